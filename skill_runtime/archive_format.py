"""The bundle archive format: error codes, limits, the file inventory, member bookkeeping.

A bundle archive is a ``.tar.gz`` whose first member is ``archive-manifest.json``::

    {"files": [{"path": "SKILL.md", "sha256": "<hex>", "size": 123}, ...], "format": 1}

listing every regular file of the bundle except itself, sorted by path.

Archives packed the PhyAgentOS way are read too (:func:`parse_inventory`): the inventory
may be named ``.paos-manifest.json`` instead, and ``files`` may be a ``{path: sha256}``
mapping instead of the list; ``size`` may be left out of a list entry (then only the
SHA-256 is checked). An archive carrying both inventory names is refused
(``ARCHIVE_MANIFEST_AMBIGUOUS``), as is an inventory that lists either name.
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from doraforge.skill_runtime.errors import ArchiveError
from doraforge.skill_runtime.paths import (
    PathProblem,
    check_relative_path,
    control_character,
    describe,
    path_problem,
    printable,
)
from doraforge.wire import strict_json

ARCHIVE_MANIFEST_NAME = "archive-manifest.json"
#: PhyAgentOS's other name for the inventory.
PAOS_MANIFEST_NAME = ".paos-manifest.json"
INVENTORY_NAMES = (ARCHIVE_MANIFEST_NAME, PAOS_MANIFEST_NAME)
#: The inventory is read whole; 10,000 entries take about 1.5 MB.
MAX_ARCHIVE_MANIFEST_BYTES = 16 * 1024 * 1024
MiB = 1024 * 1024
#: Read granularity when hashing files.
HASH_CHUNK = 1024 * 1024


class ArchiveCode(StrEnum):
    """The ``code`` of every :class:`ArchiveError` raised by pack, extract and verify."""

    CORRUPT = "ARCHIVE_CORRUPT"
    PATH_EMPTY = "ARCHIVE_PATH_EMPTY"
    PATH_NUL = "ARCHIVE_PATH_NUL"
    PATH_BACKSLASH = "ARCHIVE_PATH_BACKSLASH"
    PATH_ABSOLUTE = "ARCHIVE_PATH_ABSOLUTE"
    PATH_DRIVE = "ARCHIVE_PATH_DRIVE"
    PATH_TRAVERSAL = "ARCHIVE_PATH_TRAVERSAL"
    PATH_CONTROL = "ARCHIVE_PATH_CONTROL_CHARACTER"
    PATH_INVALID = "ARCHIVE_PATH_INVALID"
    PATH_CONFLICT = "ARCHIVE_PATH_CONFLICT"
    DUPLICATE_MEMBER = "ARCHIVE_DUPLICATE_MEMBER"
    NORMALIZATION_COLLISION = "ARCHIVE_NORMALIZATION_COLLISION"
    CASE_COLLISION = "ARCHIVE_CASE_COLLISION"
    SYMLINK = "ARCHIVE_SYMLINK"
    HARDLINK = "ARCHIVE_HARDLINK"
    SPECIAL_MEMBER = "ARCHIVE_SPECIAL_MEMBER"
    TOO_MANY_MEMBERS = "ARCHIVE_TOO_MANY_MEMBERS"
    MEMBER_TOO_LARGE = "ARCHIVE_MEMBER_TOO_LARGE"
    TOTAL_TOO_LARGE = "ARCHIVE_TOTAL_TOO_LARGE"
    RATIO_EXCEEDED = "ARCHIVE_RATIO_EXCEEDED"
    MANIFEST_MISSING = "ARCHIVE_MANIFEST_MISSING"
    MANIFEST_INVALID = "ARCHIVE_MANIFEST_INVALID"
    MANIFEST_DUPLICATE_KEY = "ARCHIVE_MANIFEST_DUPLICATE_KEY"
    MANIFEST_AMBIGUOUS = "ARCHIVE_MANIFEST_AMBIGUOUS"
    FILE_UNLISTED = "ARCHIVE_FILE_UNLISTED"
    FILE_MISSING = "ARCHIVE_FILE_MISSING"
    SIZE_MISMATCH = "ARCHIVE_SIZE_MISMATCH"
    HASH_MISMATCH = "ARCHIVE_HASH_MISMATCH"
    DESTINATION_NOT_EMPTY = "ARCHIVE_DESTINATION_NOT_EMPTY"
    WRITE_FAILED = "ARCHIVE_WRITE_FAILED"
    SOURCE_UNSUPPORTED = "ARCHIVE_SOURCE_UNSUPPORTED"
    SOURCE_CHANGED = "ARCHIVE_SOURCE_CHANGED"
    OUTPUT_INSIDE_SOURCE = "ARCHIVE_OUTPUT_INSIDE_SOURCE"


PATH_CODES = {
    PathProblem.EMPTY: ArchiveCode.PATH_EMPTY,
    PathProblem.NUL: ArchiveCode.PATH_NUL,
    PathProblem.BACKSLASH: ArchiveCode.PATH_BACKSLASH,
    PathProblem.ABSOLUTE: ArchiveCode.PATH_ABSOLUTE,
    PathProblem.DRIVE: ArchiveCode.PATH_DRIVE,
    PathProblem.TRAVERSAL: ArchiveCode.PATH_TRAVERSAL,
    PathProblem.CONTROL: ArchiveCode.PATH_CONTROL,
    PathProblem.INVALID: ArchiveCode.PATH_INVALID,
}


def archive_error(code: ArchiveCode, message: str, **details: object) -> ArchiveError:
    """An :class:`ArchiveError` with ``details`` (``member``, ``archive``, ...)."""
    return ArchiveError(code, message, details={k: str(v) for k, v in details.items()})


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps applied while reading an archive; each breach has its own error code.

    ``max_ratio`` is decompressed tar bytes over compressed archive bytes; it applies once
    more than ``ratio_grace_bytes`` have been decompressed, since a small archive cannot
    amplify into harm and tar padding alone gives tiny archives a high ratio.
    """

    max_members: int = 10_000
    max_member_bytes: int = 512 * MiB
    max_total_bytes: int = 2048 * MiB
    max_ratio: float = 200.0
    ratio_grace_bytes: int = 1 * MiB


DEFAULT_LIMITS = ArchiveLimits()


def check_member_path(name: str, **details: object) -> str:
    """Return ``name`` if it is a safe relative path, else raise its specific code.

    The error's ``member`` detail spells control and format characters as ``\\uXXXX`` so
    the refusal cannot itself reorder or hide text where it is shown; for
    ``ARCHIVE_PATH_CONTROL_CHARACTER`` a ``character`` detail names the first one (``U+202E``).
    """
    problem = path_problem(name)
    if problem is None:
        return name
    character = control_character(name)
    if problem is PathProblem.CONTROL and character is not None:
        details["character"] = f"U+{ord(character):04X}"
    shown = printable(name)
    raise archive_error(
        PATH_CODES[problem], f"member path {shown!r} {describe(problem)}", member=shown, **details
    )


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


MemberPath = Annotated[str, AfterValidator(check_relative_path)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class ArchiveFile(_Strict):
    """One inventory entry: a regular file's relative path, byte size and SHA-256."""

    path: MemberPath
    size: int = Field(ge=0)
    sha256: Sha256


class ListedFile(_Strict):
    """An entry as an archive may list it: the size is optional (PhyAgentOS's form)."""

    path: MemberPath
    size: int | None = Field(default=None, ge=0)
    sha256: Sha256


class _ListInventory(_Strict):
    format: Literal[1] = 1
    files: tuple[ListedFile, ...]


class _MappingInventory(_Strict):
    format: Literal[1] = 1
    files: dict[MemberPath, Sha256]


class ArchiveManifest(_Strict):
    """The file inventory of a bundle (``archive-manifest.json``)."""

    format: Literal[1] = 1
    files: tuple[ArchiveFile, ...]

    def by_path(self) -> dict[str, ArchiveFile]:
        """Entries keyed by path."""
        return {entry.path: entry for entry in self.files}

    def to_json(self) -> bytes:
        """Canonical bytes: sorted keys and paths, compact separators, trailing newline."""
        files = [entry.model_dump() for entry in sorted(self.files, key=lambda e: e.path)]
        text = json.dumps({"format": self.format, "files": files}, sort_keys=True)
        return text.encode("utf-8") + b"\n"

    @classmethod
    def from_json(cls, data: bytes, source: str) -> ArchiveManifest:
        """Parse and validate; raise ``ARCHIVE_MANIFEST_INVALID`` naming ``source``.

        A key repeated in any object raises ``ARCHIVE_MANIFEST_DUPLICATE_KEY``: readers
        disagree on which copy wins, so the inventory checked here could differ from the
        one another tool shows for the same archive. The text must be strict JSON
        (:mod:`doraforge.wire.strict_json`).
        """
        _refuse_hostile_json(data, source)
        try:
            manifest = cls.model_validate_json(data)
        except ValidationError as exc:
            raise _schema_error(exc, ARCHIVE_MANIFEST_NAME, source) from exc
        paths = [entry.path for entry in manifest.files]
        if len(set(paths)) != len(paths) or ARCHIVE_MANIFEST_NAME in paths:
            raise archive_error(
                ArchiveCode.MANIFEST_INVALID,
                f"{ARCHIVE_MANIFEST_NAME} in {source} repeats a path or lists itself",
                archive=source,
            )
        return manifest


def _schema_error(exc: ValidationError, name: str, source: str) -> ArchiveError:
    """``ARCHIVE_MANIFEST_INVALID`` naming the inventory, the archive and the first field."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(item) for item in first["loc"]) or "<root>"
    return archive_error(
        ArchiveCode.MANIFEST_INVALID, f"{name} in {source}: {where}: {first['msg']}", archive=source
    )


def parse_inventory(data: bytes, source: str, name: str) -> dict[str, ListedFile]:
    """Parse the inventory member ``name`` of archive ``source``, either ``files`` form.

    The same strict JSON rules as :meth:`ArchiveManifest.from_json` apply, then the schema
    of either form; a repeated path, or a path naming an inventory (in any case), is
    ``ARCHIVE_MANIFEST_INVALID``. Returns the entries by path.
    """
    _refuse_hostile_json(data, source, name)
    document = strict_json.loads(data)
    files = document.get("files") if isinstance(document, dict) else None
    model = _MappingInventory if isinstance(files, dict) else _ListInventory
    try:
        parsed = model.model_validate_json(data)
    except ValidationError as exc:
        raise _schema_error(exc, name, source) from exc
    if isinstance(parsed, _MappingInventory):
        entries = [ListedFile(path=p, sha256=d) for p, d in parsed.files.items()]
    else:
        entries = list(parsed.files)
    paths = [entry.path for entry in entries]
    reserved = {inventory.casefold() for inventory in INVENTORY_NAMES}
    if len(set(paths)) != len(paths) or any(p.casefold() in reserved for p in paths):
        raise archive_error(
            ArchiveCode.MANIFEST_INVALID,
            f"{name} in {source} repeats a path or lists an inventory",
            archive=source,
        )
    return {entry.path: entry for entry in entries}


def _refuse_hostile_json(data: bytes, source: str, name: str = ARCHIVE_MANIFEST_NAME) -> None:
    """Read ``data`` under the wire's strict JSON rules before the schema sees it.

    A repeated key raises ``ARCHIVE_MANIFEST_DUPLICATE_KEY``, any other refusal (malformed
    text, NaN, unsafe integers, deep nesting) ``ARCHIVE_MANIFEST_INVALID``.
    """
    try:
        strict_json.loads(data)
    except strict_json.JSONRefused as exc:
        if exc.code == "JSON_DUPLICATE_KEY":
            key = exc.details["key"]
            raise archive_error(
                ArchiveCode.MANIFEST_DUPLICATE_KEY,
                f"{name} in {source} repeats the key {key!r}",
                archive=source,
                key=key,
            ) from exc
        raise archive_error(
            ArchiveCode.MANIFEST_INVALID,
            f"{name} in {source}: {exc.message}",
            archive=source,
        ) from exc


class MemberRegistry:
    """Every path seen so far, to refuse duplicates, collisions and file/dir conflicts.

    Two names that differ only in Unicode normalisation or case are the same file on
    macOS and Windows file systems, so installing such an archive there would let one
    member silently replace another after it was checked. Parents are claimed too:
    ``A/x`` and ``a/y`` would merge their directories on those systems.
    """

    def __init__(self, source: str) -> None:
        self._source = source
        self._kinds: dict[str, Literal["file", "dir"]] = {}
        self._members: set[str] = set()
        self._nfc: dict[str, str] = {}
        self._folded: dict[str, str] = {}

    def add(self, path: str, *, is_dir: bool) -> None:
        """Record member ``path``; raise the collision's code if it cannot coexist."""
        if path in self._members:
            self._fail(ArchiveCode.DUPLICATE_MEMBER, path, "appears twice")
        self._members.add(path)
        self._claim_parents(path)
        existing = self._kinds.get(path)
        if existing is not None and not (is_dir and existing == "dir"):
            self._fail(ArchiveCode.PATH_CONFLICT, path, "is both a file and a directory")
        if existing is None:
            self._claim(path, "dir" if is_dir else "file")

    def _claim_parents(self, path: str) -> None:
        parent = path.rpartition("/")[0]
        pending = []
        while parent and self._kinds.get(parent) != "dir":
            if self._kinds.get(parent) == "file":
                self._fail(ArchiveCode.PATH_CONFLICT, path, f"is inside the file {parent!r}")
            pending.append(parent)
            parent = parent.rpartition("/")[0]
        for directory in reversed(pending):
            self._claim(directory, "dir")

    def _claim(self, path: str, kind: Literal["file", "dir"]) -> None:
        nfc = unicodedata.normalize("NFC", path)
        other = self._nfc.setdefault(nfc, path)
        if other != path:
            self._fail(ArchiveCode.NORMALIZATION_COLLISION, path, f"normalises like {other!r}")
        folded = nfc.casefold()
        other = self._folded.setdefault(folded, path)
        if other != path:
            self._fail(ArchiveCode.CASE_COLLISION, path, f"differs from {other!r} only in case")
        self._kinds[path] = kind

    def _fail(self, code: ArchiveCode, path: str, why: str) -> None:
        raise archive_error(code, f"member {path!r} {why}", member=path, archive=self._source)


def hash_file(path: Path) -> tuple[int, str]:
    """Size and hex SHA-256 of a regular file, never following a final symbolic link."""
    digest = hashlib.sha256()
    size = 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with open(fd, "rb", buffering=0) as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()
