"""Strict manifest v2 (``skill.yaml``) of a skill bundle.

``skill.yaml`` is untrusted input: it arrives inside downloaded archives. Unknown keys are
rejected at every level, types are strict (``"1"`` is not ``1``, ``yes`` is not a boolean),
duplicate keys, YAML aliases, non-finite numbers and deep nesting are refused and the file
size is capped (:mod:`doraforge.wire.strict_yaml`), and every path is a safe relative path
(:mod:`doraforge.skill_runtime.paths`). Every failure is a
:class:`~doraforge.skill_runtime.errors.ManifestError` with code ``SKILL_MANIFEST_INVALID``
whose message names the file and the dotted field, also given in ``details`` (``file``, ``field``).

The verification contract template lives beside the manifest in ``verification.yaml``
(:data:`VERIFICATION_FILENAME`), read by :func:`load_manifest` into
``SkillManifest.verification``, so ``skill.yaml`` keeps only the fields PhyAgentOS's own
manifest v2 reader accepts. A ``verification`` key inside ``skill.yaml`` (the earlier
layout) is still read, with a logged deprecation warning; both at once is refused.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import stat
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from doraforge.skill_runtime.errors import ManifestError
from doraforge.skill_runtime.paths import check_relative_path
from doraforge.wire import strict_yaml

MANIFEST_FILENAME = "skill.yaml"
#: The verification contract template, beside ``skill.yaml`` (PhyAgentOS ignores it).
VERIFICATION_FILENAME = "verification.yaml"
MANIFEST_INVALID = "SKILL_MANIFEST_INVALID"
#: A manifest is a page of YAML; anything bigger is refused before parsing.
MAX_MANIFEST_BYTES = 256 * 1024
#: Mappings and sequences nested deeper than this are refused (the verification template
#: is free-form, and deep nesting exhausts the parser's and the validator's recursion).
MAX_NESTING = 32
#: The skill document is read whole to hash it; bound it.
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024

_log = logging.getLogger(__name__)

NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
VERSION_PATTERN = (
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)

SkillName = Annotated[str, Field(pattern=NAME_PATTERN)]
Version = Annotated[str, Field(max_length=64, pattern=VERSION_PATTERN)]
RelativePath = Annotated[str, AfterValidator(check_relative_path)]
ToolName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:/-]+$")]
EnvName = Annotated[str, Field(max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Binary = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\x00-\x1f\x7f]+$")]
NodeId = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
ArtifactId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


def _unique[T](values: list[T]) -> list[T]:
    seen: set[T] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"entries must be unique; {value!r} repeats")
        seen.add(value)
    return values


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class Profile(_Strict):
    """One way to run the skill (``sim``, ``hardware``): a dataflow and what it needs."""

    dataflow: RelativePath
    startup_timeout_s: float = Field(gt=0, le=600)
    required_binaries: Annotated[list[Binary], AfterValidator(_unique)] = []
    required_assets: Annotated[list[RelativePath], AfterValidator(_unique)] = []
    required_environment: Annotated[list[EnvName], AfterValidator(_unique)] = []
    environment: dict[EnvName, Annotated[str, Field(max_length=4096)]] = {}
    #: Tools this profile needs in addition to the top-level ``required_tools``.
    required_tools: Annotated[list[ToolName], AfterValidator(_unique)] | None = None


class NodeLock(_Strict):
    """The exact node artifact a dataflow node runs, pinned by digest."""

    artifact_id: ArtifactId
    version: Version
    platform: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
    arch: Literal["x86_64", "aarch64"]
    artifact_type: Literal["executable_tar_gz", "directory_tar_gz"]
    entrypoint: RelativePath
    sha256: Sha256


class Artifacts(_Strict):
    """Where node artifacts come from and the lock of each node that needs one."""

    resolver: Literal["local", "registry"]
    nodes: dict[NodeId, NodeLock]


class SkillManifest(_Strict):
    """``skill.yaml`` version 2. ``gateway_url`` is the only source of the Gateway URL."""

    manifest_version: Literal[2]
    name: SkillName
    version: Version
    description: Annotated[str, Field(min_length=1, max_length=4096)]
    skill_document: RelativePath = "SKILL.md"
    gateway_url: Annotated[str, Field(max_length=2048)]
    required_tools: Annotated[list[ToolName], Field(min_length=1), AfterValidator(_unique)]
    profiles: Annotated[dict[SkillName, Profile], Field(min_length=1)]
    #: The PAOS verification contract template, opaque here (a JSON object). Read from
    #: ``verification.yaml`` by :func:`load_manifest`; in ``skill.yaml`` it is deprecated.
    verification: dict[str, Any] | None = None
    artifacts: Artifacts | None = None

    @field_validator("gateway_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if parts.username is not None or parts.password is not None:
            # Manifests are shared and stored; credentials do not belong in them.
            raise ValueError("must not carry credentials")
        if re.search(r"\s", value):
            raise ValueError("must not contain whitespace")
        return value

    @field_validator("verification")
    @classmethod
    def _json_object(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            _check_json(value, "")
        return value


def _check_json(value: Any, path: str) -> None:
    """Refuse what JSON cannot carry faithfully: YAML dates, non-string keys, NaN."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{path or '<root>'}: keys must be strings, got {key!r}")
            _check_json(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{path}.{index}")
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{path}: non-finite numbers are not allowed")
    elif value is not None and not isinstance(value, str | int | float | bool):
        raise ValueError(f"{path}: {type(value).__name__} is not a JSON value")


def _invalid(source: str, field: str, message: str) -> ManifestError:
    return ManifestError(
        MANIFEST_INVALID, f"{source}: {field}: {message}", details={"file": source, "field": field}
    )


def parse_manifest(text: str, source: str) -> SkillManifest:
    """Parse and validate manifest text; ``source`` names the file in errors.

    Raises :class:`ManifestError` (``SKILL_MANIFEST_INVALID``) naming ``source`` and the
    dotted field of the first problem (all problems are in the message).
    """
    try:
        raw = strict_yaml.load(text, max_bytes=MAX_MANIFEST_BYTES, max_depth=MAX_NESTING)
    except strict_yaml.YAMLRefused as exc:
        raise _invalid(source, exc.field, exc.message) from exc
    if not isinstance(raw, dict):
        raise _invalid(source, "<root>", "the top level must be a mapping")
    try:
        return SkillManifest.model_validate(raw)
    except ValidationError as exc:
        field, message = _describe(exc)
        raise ManifestError(
            MANIFEST_INVALID, f"{source}: {message}", details={"file": source, "field": field}
        ) from exc


def _describe(exc: ValidationError) -> tuple[str, str]:
    """The dotted field of the first error, and every error as ``field: message``."""
    parts = []
    first = "<root>"
    for index, error in enumerate(exc.errors(include_url=False)):
        location = ".".join(str(item) for item in error["loc"]) or "<root>"
        if index == 0:
            first = location
        parts.append(f"{location}: {error['msg'].removeprefix('Value error, ')}")
    return first, "; ".join(parts)


def _read_regular(path: Path, limit: int, source: str, field: str) -> bytes:
    """Read a regular file (not a link, device or FIFO) of at most ``limit`` bytes."""
    try:
        info = path.lstat()
    except OSError as exc:
        raise _invalid(source, field, f"cannot read {path.name}: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise _invalid(source, field, f"{path.name} is not a regular file")
    if info.st_size > limit:
        raise _invalid(source, field, f"{path.name} is larger than {limit} bytes")
    return path.read_bytes()


def load_manifest(bundle_dir: Path) -> SkillManifest:
    """Read and validate ``bundle_dir/skill.yaml``; the skill document must exist beside it.

    ``verification`` is the contract of ``bundle_dir/verification.yaml`` when that file
    exists (a JSON-like mapping, as strict as the manifest), else the deprecated
    ``verification`` key of ``skill.yaml``, else ``None``. Raises :class:`ManifestError`
    (``SKILL_MANIFEST_INVALID``), also when both carry a contract.
    """
    file = Path(bundle_dir) / MANIFEST_FILENAME
    data = _read_regular(file, MAX_MANIFEST_BYTES, str(file), "<root>")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(str(file), "<root>", "not valid UTF-8") from exc
    manifest = parse_manifest(text, str(file))
    document = Path(bundle_dir) / manifest.skill_document
    if not _is_regular_file(document):
        raise _invalid(
            str(file), "skill_document", f"{manifest.skill_document!r} is not a file in the bundle"
        )
    return _with_verification(Path(bundle_dir), manifest)


def _with_verification(bundle_dir: Path, manifest: SkillManifest) -> SkillManifest:
    """Attach ``verification.yaml``'s contract, or warn about the deprecated key."""
    file = bundle_dir / VERIFICATION_FILENAME
    if not os.path.lexists(file):
        if manifest.verification is not None:
            _log.warning(
                "%s: `verification` in %s is deprecated; move it to %s beside it "
                "(PhyAgentOS refuses the key)",
                bundle_dir / MANIFEST_FILENAME,
                MANIFEST_FILENAME,
                VERIFICATION_FILENAME,
            )
        return manifest
    source = str(file)
    if manifest.verification is not None:
        raise _invalid(
            source,
            "verification",
            f"the contract is in both {MANIFEST_FILENAME} and {VERIFICATION_FILENAME}; "
            f"delete `verification` from {MANIFEST_FILENAME}",
        )
    return manifest.model_copy(update={"verification": parse_verification(file, source)})


def parse_verification(file: Path, source: str) -> dict[str, Any]:
    """Read a ``verification.yaml``: a mapping of JSON values under the manifest's limits."""
    data = _read_regular(file, MAX_MANIFEST_BYTES, source, "<root>")
    try:
        raw = strict_yaml.load(
            data.decode("utf-8"), max_bytes=MAX_MANIFEST_BYTES, max_depth=MAX_NESTING
        )
    except UnicodeDecodeError as exc:
        raise _invalid(source, "<root>", "not valid UTF-8") from exc
    except strict_yaml.YAMLRefused as exc:
        raise _invalid(source, exc.field, exc.message) from exc
    if not isinstance(raw, dict):
        raise _invalid(source, "<root>", "the top level must be a mapping")
    try:
        _check_json(raw, "")
    except ValueError as exc:
        raise _invalid(source, "<root>", str(exc)) from exc
    return raw


def _is_regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def manifest_sha256(bundle_dir: Path) -> str:
    """Hex SHA-256 of the ``skill.yaml`` bytes in ``bundle_dir``."""
    file = Path(bundle_dir) / MANIFEST_FILENAME
    return hashlib.sha256(_read_regular(file, MAX_MANIFEST_BYTES, str(file), "<root>")).hexdigest()


def skill_document_bytes(bundle_dir: Path, manifest: SkillManifest) -> bytes:
    """The manifest's skill document (``SKILL.md``) in ``bundle_dir``, read bounded."""
    file = Path(bundle_dir) / manifest.skill_document
    source = str(Path(bundle_dir) / MANIFEST_FILENAME)
    return _read_regular(file, MAX_DOCUMENT_BYTES, source, "skill_document")


def skill_document_sha256(bundle_dir: Path, manifest: SkillManifest) -> str:
    """Hex SHA-256 of the manifest's skill document (``SKILL.md``) in ``bundle_dir``."""
    return hashlib.sha256(skill_document_bytes(bundle_dir, manifest)).hexdigest()


def skill_document_text(bundle_dir: Path, manifest: SkillManifest) -> str:
    """The skill document as text; bytes that are not UTF-8 are a manifest error."""
    data = skill_document_bytes(bundle_dir, manifest)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        source = str(Path(bundle_dir) / MANIFEST_FILENAME)
        raise _invalid(
            source,
            "skill_document",
            f"{manifest.skill_document} is not UTF-8 (byte {exc.start}); save it as UTF-8",
        ) from exc
