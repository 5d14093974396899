"""Recipe persistence: one JSON file per recipe (``<slug>.json``), written atomically.

A file holds the recipe's whole history: every revision (numbered from 1, never reused)
with its definition and the fingerprints of its step tools at save, which revision is
active and whether the recipe is archived. Files are read as strict JSON
(``doraforge.wire.strict_json``) and validated; a file that is not a valid record (hand
edited, truncated, saved under older rules) is skipped and reported, never a crash and
never half-loaded.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from doraforge.registry.errors import RegistryError
from doraforge.registry.recipes.definition import NAME_PATTERN, PREFIX, Definition, parse_definition
from doraforge.wire import strict_json
from doraforge.wire.files import atomic_write_text

logger = logging.getLogger(__name__)

#: The most bytes a recipe file may have (a definition is at most 32,000 characters and
#: a recipe keeps at most 50 revisions).
MAX_FILE_BYTES = 4 * 1024 * 1024


class Revision(BaseModel):
    """One saved revision: its number, when it was saved, the definition and the
    fingerprints of its step tools at that save."""

    model_config = ConfigDict(extra="forbid", strict=True)
    revision: Annotated[int, Field(ge=1)]
    savedAt: Annotated[str, Field(min_length=1, max_length=40)]
    definition: dict[str, Any]
    fingerprints: dict[str, Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]]

    def parsed(self) -> Definition:
        """The definition as a model (it was valid when stored; load checks it again)."""
        return parse_definition(self.definition)


class Record(BaseModel):
    """A recipe's file: its revisions, the active one, whether it is archived."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    active: Annotated[int, Field(ge=1)]
    archived: bool = False
    revisions: Annotated[list[Revision], Field(min_length=1)]

    @model_validator(mode="after")
    def _consistent(self) -> Record:
        numbers = [r.revision for r in self.revisions]
        if numbers != sorted(set(numbers)):
            raise ValueError("revisions must be numbered in increasing order, none twice")
        if self.active not in numbers:
            raise ValueError(f"the active revision {self.active} is not among the revisions")
        return self

    def revision(self, number: int) -> Revision | None:
        """Revision ``number``, ``None`` when the history has none of that number."""
        return next((r for r in self.revisions if r.revision == number), None)

    def current(self) -> Revision:
        """The active revision."""
        found = self.revision(self.active)
        assert found is not None  # checked by the model
        return found


@dataclass(frozen=True)
class Skipped:
    """A file the library could not load, and why (reported, never fatal)."""

    file: str
    code: str
    message: str

    def public(self) -> dict[str, str]:
        return {"file": self.file, "code": self.code, "message": self.message}


class RecipeStore:
    """Recipe files under ``directory`` (created on the first save)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, name: str) -> Path:
        return self.directory / f"{name.removeprefix(PREFIX)}.json"

    def save(self, record: Record) -> None:
        """Write ``record`` so a reader sees the whole old or the whole new file."""
        text = json.dumps(record.model_dump(mode="json"), indent=2, ensure_ascii=False)
        atomic_write_text(self.path(record.name), text + "\n")

    def load_all(self) -> tuple[list[Record], list[Skipped]]:
        """Every valid record, and every file skipped with its reason."""
        if not self.directory.is_dir():
            return [], []
        records: list[Record] = []
        skipped: list[Skipped] = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                records.append(self._load(path))
            except _Unloadable as problem:
                logger.warning("recipe file %s skipped: %s", path.name, problem.message)
                skipped.append(Skipped(path.name, problem.code, problem.message))
        return records, skipped

    def _load(self, path: Path) -> Record:
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise _Unloadable("RECIPE_FILE_TOO_LARGE", f"over {MAX_FILE_BYTES} bytes")
            document = strict_json.loads(path.read_bytes())
            record = Record.model_validate(document)
        except OSError as exc:
            raise _Unloadable("RECIPE_FILE_UNREADABLE", exc.strerror or type(exc).__name__) from exc
        except strict_json.JSONRefused as exc:
            raise _Unloadable("RECIPE_FILE_INVALID", exc.message[:200]) from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(file)"
            raise _Unloadable("RECIPE_FILE_INVALID", f"{where}: {first['msg']}"[:200]) from exc
        if path.name != f"{record.name.removeprefix(PREFIX)}.json":
            raise _Unloadable("RECIPE_FILE_INVALID", f"holds {record.name}, not its own name")
        for revision in record.revisions:
            try:
                definition = revision.parsed()
            except RegistryError as exc:
                message = f"revision {revision.revision}: {exc.message}"[:200]
                raise _Unloadable("RECIPE_FILE_INVALID", message) from exc
            if definition.name != record.name:
                message = f"revision {revision.revision} defines {definition.name}"
                raise _Unloadable("RECIPE_FILE_INVALID", message)
        return record


class _Unloadable(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message
