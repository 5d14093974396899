"""Node artifacts: installed per ``artifacts/<artifact_id>/<version>/`` with a receipt.

``receipt.json`` records the archive digest (from the skill's lock) and every installed
file's size and SHA-256::

    {"artifact_id": "arm-driver", "version": "0.3.0", "sha256": "<archive digest>",
     "files": [{"path": "bin/arm-driver", "size": 123, "sha256": "<64 hex>"}, ...],
     "installed_at": "2025-01-01T00:00:00Z"}

:func:`verify_receipt` re-hashes the tree against it and must be called whenever an
installed artifact is used; a changed, missing or extra file is
``InstallError("SKILL_ARTIFACT_TAMPERED")``.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from doraforge.skill_runtime.download import hash_file
from doraforge.skill_runtime.errors import InstallError

RECEIPT = "receipt.json"


class NodeLock(Protocol):
    """The fields of a manifest node lock that installation reads."""

    artifact_id: str
    version: str
    platform: str
    arch: str
    artifact_type: str
    entrypoint: str
    sha256: str


@dataclass(frozen=True)
class ReceiptFile:
    """One installed file."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ArtifactReceipt:
    """A verified receipt of one installed node artifact."""

    artifact_id: str
    version: str
    sha256: str
    files: tuple[ReceiptFile, ...]
    installed_at: str
    path: Path

    def public(self) -> dict[str, Any]:
        """The JSON form, as stored in ``receipt.json`` (plus the install path)."""
        return {
            "artifact_id": self.artifact_id,
            "version": self.version,
            "sha256": self.sha256,
            "files": [vars(f) for f in self.files],
            "installed_at": self.installed_at,
            "path": str(self.path),
        }


def _tampered(root: Path, message: str) -> InstallError:
    return InstallError(
        "SKILL_ARTIFACT_TAMPERED", f"{root}: {message}", details={"path": str(root)}
    )


def _walk(root: Path) -> dict[str, Path]:
    """Every non-directory entry under ``root`` except the receipt, by relative path."""
    found: dict[str, Path] = {}
    for directory, dirnames, filenames in os.walk(root):
        for entry in [*filenames, *(d for d in dirnames if Path(directory, d).is_symlink())]:
            full = Path(directory, entry)
            relative = full.relative_to(root).as_posix()
            if relative != RECEIPT:
                found[relative] = full
    return found


def _load_receipt(root: Path) -> dict[str, Any]:
    try:
        document = json.loads((root / RECEIPT).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _tampered(root, f"unreadable {RECEIPT}: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("files"), list):
        raise _tampered(root, f"{RECEIPT} is not a receipt")
    return document


def verify_receipt(root: Path) -> ArtifactReceipt:
    """Re-hash ``root`` against its receipt; raise ``SKILL_ARTIFACT_TAMPERED`` on any change."""
    document = _load_receipt(root)
    on_disk = _walk(root)
    files = []
    for entry in document["files"]:
        try:
            record = ReceiptFile(str(entry["path"]), int(entry["size"]), str(entry["sha256"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise _tampered(root, f"malformed file entry {entry!r}") from exc
        full = on_disk.pop(record.path, None)
        # A symlink could point a verified name at unverified bytes outside the tree.
        if full is None or full.is_symlink() or not full.is_file():
            raise _tampered(root, f"{record.path} is missing or not a regular file")
        if hash_file(full) != (record.sha256, record.size):
            raise _tampered(root, f"{record.path} does not match its receipt")
        files.append(record)
    if on_disk:
        raise _tampered(root, f"files not in the receipt: {sorted(on_disk)[:5]}")
    return ArtifactReceipt(
        artifact_id=str(document.get("artifact_id")),
        version=str(document.get("version")),
        sha256=str(document.get("sha256")),
        files=tuple(files),
        installed_at=str(document.get("installed_at")),
        path=root,
    )


def _write_receipt(root: Path, lock: NodeLock, paths: list[str]) -> None:
    files = []
    for relative in sorted(paths):
        digest, size = hash_file(root / relative)
        files.append({"path": relative, "size": size, "sha256": digest})
    document = {
        "artifact_id": lock.artifact_id,
        "version": lock.version,
        "sha256": lock.sha256,
        "files": files,
        "installed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    with (root / RECEIPT).open("w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())


def installed(artifacts_dir: Path, lock: NodeLock) -> ArtifactReceipt | None:
    """The verified installation matching ``lock``, ``None`` when absent or damaged.

    An installation of the same id and version from a different archive is a conflict:
    another skill may rely on it, so it is never silently replaced.
    """
    target = artifacts_dir / lock.artifact_id / lock.version
    if not target.exists():
        return None
    try:
        receipt = verify_receipt(target)
    except InstallError:
        return None
    if receipt.sha256 != lock.sha256.lower():
        raise InstallError(
            "SKILL_ARTIFACT_CONFLICT",
            f"{lock.artifact_id} {lock.version} is installed from a different archive",
            details={"installed": receipt.sha256, "locked": lock.sha256},
        )
    return receipt


def install_artifact(
    archive: Path, lock: NodeLock, artifacts_dir: Path, *, extract: Any
) -> ArtifactReceipt:
    """Extract a verified archive to a staging dir, write its receipt, rename into place.

    ``extract(archive, destination) -> list[str]`` is the safe artifact extractor.
    """
    staging = artifacts_dir / f".staging-{uuid.uuid4().hex}"
    target = artifacts_dir / lock.artifact_id / lock.version
    try:
        paths = list(extract(archive, staging))
        if lock.entrypoint not in paths:
            raise InstallError(
                "SKILL_ARTIFACT_NO_ENTRYPOINT",
                f"{lock.artifact_id}: entrypoint {lock.entrypoint!r} is not in the archive",
                details={"entrypoint": lock.entrypoint},
            )
        _write_receipt(staging, lock, paths)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            # Only a damaged copy reaches here (installed() returned None for it).
            discard(target, artifacts_dir)
        os.replace(staging, target)
        return verify_receipt(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def discard(path: Path, parent: Path) -> None:
    """Move ``path`` out of the way atomically, then delete it."""
    trash = parent / f".trash-{uuid.uuid4().hex}"
    os.replace(path, trash)
    shutil.rmtree(trash, ignore_errors=True)
