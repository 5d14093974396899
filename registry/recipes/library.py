"""The recipe library of one server: revisions on disk, active recipes as registry tools.

Saving validates a definition against the tools registered now, records its step tools'
fingerprints, persists a new revision and makes it the active one; archiving takes the
recipe's tool out of the catalog (its history stays); restoring brings it back at its last
active revision or a chosen one. Each of these re-registers the recipe tool, so the
catalog (and its ETag) changes with it. Only the operator's routes reach these methods:
an agent's ``callToolRecipes`` grant runs recipes, it never authors them.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doraforge.registry.errors import Conflict, NotFound, RegistryError
from doraforge.registry.recipes.definition import NAME_PATTERN, Definition, parse_definition
from doraforge.registry.recipes.run import OUTPUT_SCHEMA, Active, RecipeRunner
from doraforge.registry.recipes.store import RecipeStore, Record, Revision, Skipped
from doraforge.registry.recipes.validate import validate

if TYPE_CHECKING:
    from doraforge.registry.service import RegistryService

logger = logging.getLogger(__name__)

GRANT = "callToolRecipes"
MAX_RECIPES = 200
MAX_REVISIONS = 50
#: A recipe's deadline when one of its step tools is not registered at registration.
DEFAULT_STEP_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 3_600_000


def _now(clock: float) -> str:
    return datetime.fromtimestamp(clock, UTC).isoformat(timespec="milliseconds")


class RecipeLibrary:
    """Recipes persisted in ``store_dir`` and offered as ``recipe.*`` tools on ``service``.

    Construction loads every valid file (the others are in :attr:`skipped`) and registers
    the active recipes. Refusals are registry errors an edge maps: ``RECIPE_*`` 422 for a
    definition that may not be saved, 404 ``RECIPE_NOT_FOUND``, 409 for a name another
    tool holds, a full library or an unknown revision."""

    def __init__(
        self, store_dir: Path, service: RegistryService, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.service, self._clock = service, clock
        self.store = RecipeStore(store_dir)
        loaded, self.skipped = self.store.load_all()
        self.records: dict[str, Record] = {}
        self._active: dict[str, Active] = {}
        for record in loaded:
            self._load(record)

    def _load(self, record: Record) -> None:
        """Offer a stored record; one the registry refuses now (its name taken by a tool
        registered since, a schema no longer accepted) is skipped and reported."""
        try:
            self._install(record)
        except RegistryError as exc:
            file = self.store.path(record.name).name
            logger.warning("recipe file %s skipped: %s", file, exc.message)
            self.skipped.append(Skipped(file, exc.code, exc.message[:200]))
            return
        self.records[record.name] = record

    def skipped_files(self) -> list[dict[str, str]]:
        return [problem.public() for problem in self.skipped]

    def active(self, name: str) -> Active | None:
        """The active revision of ``name``; ``None`` when archived or unknown."""
        return self._active.get(name)

    def get(self, name: str) -> Record:
        """The record of ``name``; :class:`NotFound` ``RECIPE_NOT_FOUND``."""
        record = self.records.get(name) if _is_name(name) else None
        if record is None:
            raise NotFound(
                "RECIPE_NOT_FOUND",
                f"no recipe {name[:80]!r}; list them with `doraforge recipes list`",
            )
        return record

    def save(self, document: Any) -> tuple[dict[str, Any], bool]:
        """Validate and persist ``document`` as the recipe's new active revision; the
        recipe's summary and whether a revision was added (saving the active definition
        again, unchanged and against unchanged tools, adds none)."""
        definition = parse_definition(document)
        prints = validate(definition, self.service)
        self._check_name_free(definition)
        record = self.records.get(definition.name)
        if record is None and len(self.records) >= MAX_RECIPES:
            raise Conflict(
                "RECIPE_LIBRARY_FULL",
                f"the library holds its maximum of {MAX_RECIPES} recipes; archive is not "
                "enough, remove a recipe file under <home>/recipes",
            )
        if record is not None and _same(record, definition, prints) and not record.archived:
            return self.summary(record), False
        self._commit(_revised(record, definition, prints, _now(self._clock())))
        return self.summary(self.records[definition.name]), True

    def archive(self, name: str) -> dict[str, Any]:
        """Take ``name`` out of the catalog; its history stays and it can be restored."""
        record = self.get(name)
        if not record.archived:
            self._commit(record.model_copy(update={"archived": True}))
        return self.summary(self.records[name])

    def restore(self, name: str, revision: int | None = None) -> dict[str, Any]:
        """Offer ``name`` again at ``revision`` (default: its last active one).
        :class:`Conflict` ``RECIPE_REVISION_NOT_FOUND`` for a revision not in its history.
        A revision whose tools changed since is restored but unavailable (schema drift)."""
        record = self.get(name)
        number = record.active if revision is None else revision
        if record.revision(number) is None:
            raise Conflict(
                "RECIPE_REVISION_NOT_FOUND",
                f"{name} has no revision {number}; `doraforge recipes show {name}` lists them",
                details={"revisions": [r.revision for r in record.revisions]},
            )
        self._check_name_free(record.current().parsed())
        self._commit(record.model_copy(update={"archived": False, "active": number}))
        return self.summary(self.records[name])

    def summary(self, record: Record) -> dict[str, Any]:
        """What the list shows: status, active revision, tools, availability (no
        definition literals or bindings)."""
        current = record.current()
        definition = current.parsed()
        tool = None if record.archived else self.service.resolve(record.name)
        available = None
        if tool is not None:
            available = self.service.project(tool, "portos").get("availability")
        return {
            "name": record.name,
            "status": "archived" if record.archived else "active",
            "activeRevision": record.active,
            "revisions": len(record.revisions),
            "description": definition.description,
            "tools": definition.tools(),
            "savedAt": current.savedAt,
            "availability": available,
        }

    def detail(self, name: str) -> dict[str, Any]:
        """The operator's view: the summary and every revision with its definition."""
        record = self.get(name)
        revisions = [r.model_dump(mode="json") for r in reversed(record.revisions)]
        return {**self.summary(record), "history": revisions}

    def _check_name_free(self, definition: Definition) -> None:
        for name in (definition.name, definition.provider_name):
            entry = self.service.resolve(name)
            if entry is not None and entry.origin is None:
                raise Conflict(
                    "RECIPE_NAME_TAKEN",
                    f"{name} is already a registered tool that is not a recipe; pick another name",
                    details={"name": name, "owner": entry.name},
                )

    def _commit(self, record: Record) -> None:
        """Persist ``record``, then offer it as it now is."""
        try:
            self.store.save(record)
        except OSError as exc:
            raise Conflict(
                "RECIPE_STORE_UNWRITABLE",
                f"the recipe could not be written under {self.store.directory.name}/ "
                f"({exc.strerror or type(exc).__name__}); free space or fix permissions",
                retryable=True,
            ) from exc
        self.records[record.name] = record
        self._install(record)

    def _install(self, record: Record) -> None:
        """Register the active revision of ``record`` (replacing the previous one), or
        only unregister it when archived."""
        if self.service.resolve(record.name) is not None and record.name in self._active:
            self.service.unregister(record.name)
        self._active.pop(record.name, None)
        if record.archived:
            return
        current = record.current()
        definition = current.parsed()
        runner = RecipeRunner(record.name, lambda: self._active.get(record.name), self.service)
        self.service.register(
            self._entry(definition, current.revision),
            runner.run,
            wants_context=True,
            admit=runner.admit,
        )
        self._active[record.name] = Active(current.revision, definition, dict(current.fingerprints))

    def _entry(self, definition: Definition, revision: int) -> dict[str, Any]:
        return {
            "type": "portos_tool",
            "name": definition.name,
            "version": 1,
            "providerName": definition.provider_name,
            "description": definition.description,
            "input_schema": definition.input_schema,
            "output_schema": OUTPUT_SCHEMA,
            "policy": {
                "scopes": ["agent", "ui"],
                "requiredCapabilities": [GRANT],
                "sideEffect": "read",
                "idempotent": True,
                "risk": "low",
                "timeoutMs": self._timeout_ms(definition),
            },
            "origin": {"kind": "local-recipe", "revision": revision, "tools": definition.tools()},
        }

    def _timeout_ms(self, definition: Definition) -> int:
        """Room for every step at its own deadline, plus a second."""
        total = 1000
        for tool in definition.tools():
            entry = self.service.resolve(tool)
            total += entry.policy.timeoutMs if entry is not None else DEFAULT_STEP_TIMEOUT_MS
        return min(total, MAX_TIMEOUT_MS)


def _is_name(name: str) -> bool:
    return re.fullmatch(NAME_PATTERN, name) is not None


def _same(record: Record, definition: Definition, prints: dict[str, str]) -> bool:
    current = record.current()
    return current.definition == definition.document() and current.fingerprints == prints


def _revised(
    record: Record | None, definition: Definition, prints: dict[str, str], saved_at: str
) -> Record:
    """``record`` with ``definition`` as its new active revision (the oldest revisions
    beyond :data:`MAX_REVISIONS` dropped; numbers are never reused)."""
    revisions = [] if record is None else list(record.revisions)
    number = revisions[-1].revision + 1 if revisions else 1
    revision = Revision(
        revision=number,
        savedAt=saved_at,
        definition=definition.document(),
        fingerprints=prints,
    )
    revisions = [*revisions, revision][-MAX_REVISIONS:]
    return Record(name=definition.name, active=number, archived=False, revisions=revisions)
