"""Deterministic packing of a skill bundle directory into a ``.tar.gz``.

The same directory contents give byte-identical archives whatever the files' times,
owners or the packing host's umask: members are sorted, ``archive-manifest.json`` comes
first, every header carries a fixed mtime, uid/gid 0 and empty owner names, modes are
0o755 (directories, executable files) or 0o644, and the gzip header has no name and
mtime 0. Only regular files and directories are packed; links and special files are
refused rather than silently followed or skipped. ``__pycache__`` directories are build
by-products and are left out, as is a root ``archive-manifest.json`` (regenerated).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from doraforge.skill_runtime.archive_format import (
    ARCHIVE_MANIFEST_NAME,
    DEFAULT_LIMITS,
    ArchiveCode,
    ArchiveFile,
    ArchiveLimits,
    ArchiveManifest,
    MemberRegistry,
    archive_error,
    check_member_path,
    hash_file,
)
from doraforge.skill_runtime.manifest import load_manifest

#: 1980-01-01T00:00:00Z, the earliest time ZIP-based tools accept; any constant would do.
FIXED_MTIME = 315532800
COMPRESS_LEVEL = 6
_SKIPPED_DIRS = frozenset({"__pycache__"})


@dataclass(frozen=True)
class PackResult:
    """The written archive: its path, SHA-256, byte size and inventory entries."""

    path: Path
    sha256: str
    size: int
    files: tuple[ArchiveFile, ...]


@dataclass(frozen=True)
class _Entry:
    path: str
    is_dir: bool
    executable: bool


def _scan(root: Path, prefix: str = "") -> list[_Entry]:
    """Every directory and regular file under ``root``; anything else is refused."""
    found: list[_Entry] = []
    with os.scandir(root) as entries:
        for entry in entries:
            path = f"{prefix}{entry.name}"
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if entry.name in _SKIPPED_DIRS:
                    continue
                found.append(_Entry(path, True, True))
                found.extend(_scan(Path(entry.path), f"{path}/"))
            elif stat.S_ISREG(info.st_mode):
                if path != ARCHIVE_MANIFEST_NAME:
                    found.append(_Entry(path, False, bool(info.st_mode & 0o100)))
            else:
                kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "a special file"
                raise archive_error(
                    ArchiveCode.SOURCE_UNSUPPORTED,
                    f"{root / entry.name} is {kind}; bundles hold only files and directories",
                    member=path,
                )
    return found


def _checked_entries(bundle_dir: Path, limits: ArchiveLimits) -> list[_Entry]:
    """Scan, sort and hold the source to the rules extraction will apply."""
    entries = sorted(_scan(bundle_dir), key=lambda entry: entry.path)
    registry = MemberRegistry(str(bundle_dir))
    registry.add(ARCHIVE_MANIFEST_NAME, is_dir=False)
    for entry in entries:
        registry.add(check_member_path(entry.path, archive=bundle_dir), is_dir=entry.is_dir)
    if len(entries) + 1 > limits.max_members:
        raise archive_error(
            ArchiveCode.TOO_MANY_MEMBERS,
            f"{bundle_dir} has more than {limits.max_members} entries",
            archive=bundle_dir,
        )
    return entries


def _inventory(bundle_dir: Path, entries: list[_Entry], limits: ArchiveLimits) -> ArchiveManifest:
    files = []
    total = 0
    for entry in entries:
        if entry.is_dir:
            continue
        size, sha256 = hash_file(bundle_dir / entry.path)
        if size > limits.max_member_bytes:
            raise archive_error(
                ArchiveCode.MEMBER_TOO_LARGE,
                f"{entry.path!r} is larger than {limits.max_member_bytes} bytes",
                member=entry.path,
            )
        total += size
        files.append(ArchiveFile(path=entry.path, size=size, sha256=sha256))
    if total > limits.max_total_bytes:
        raise archive_error(
            ArchiveCode.TOTAL_TOO_LARGE, f"{bundle_dir} holds more than {limits.max_total_bytes}"
        )
    return ArchiveManifest(format=1, files=tuple(files))


def _header(path: str, *, is_dir: bool, executable: bool, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(path)
    info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    info.mode = 0o755 if is_dir or executable else 0o644
    info.size = 0 if is_dir else size
    info.mtime = FIXED_MTIME
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


class _HashingReader:
    """Reads a source file for ``tarfile`` and hashes what was actually packed."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self.digest.update(data)
        return data


class _HashingWriter:
    """Counts and hashes the compressed bytes on their way to the output file."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self._handle.write(data)

    def flush(self) -> None:
        self._handle.flush()


def _write_archive(
    bundle_dir: Path, entries: list[_Entry], inventory: ArchiveManifest, out: _HashingWriter
) -> int:
    """Write the tar stream; return its uncompressed size (for the ratio check)."""
    listed = inventory.by_path()
    document = inventory.to_json()
    with (
        gzip.GzipFile(
            filename="", mode="wb", fileobj=out, mtime=0, compresslevel=COMPRESS_LEVEL
        ) as compressed,
        tarfile.open(fileobj=compressed, mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        header = _header(ARCHIVE_MANIFEST_NAME, is_dir=False, executable=False, size=len(document))
        tar.addfile(header, _BytesReader(document))
        for entry in entries:
            size = 0 if entry.is_dir else listed[entry.path].size
            header = _header(
                entry.path, is_dir=entry.is_dir, executable=entry.executable, size=size
            )
            if entry.is_dir:
                tar.addfile(header)
            else:
                _add_file(tar, header, bundle_dir / entry.path, listed[entry.path])
        tar_size = tar.offset
    return tar_size


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)

    def read(self, size: int = -1) -> bytes:
        size = len(self._data) if size < 0 else size
        chunk, self._data = self._data[:size], self._data[size:]
        return bytes(chunk)


def _add_file(
    tar: tarfile.TarFile, header: tarfile.TarInfo, path: Path, entry: ArchiveFile
) -> None:
    """Pack one file; refuse it if it changed since it was hashed for the inventory."""
    try:
        with open(path, "rb") as handle:
            reader = _HashingReader(handle)
            tar.addfile(header, reader)
    except OSError as exc:
        raise archive_error(
            ArchiveCode.SOURCE_CHANGED, f"{path} changed while packing: {exc}", member=entry.path
        ) from exc
    if reader.digest.hexdigest() != entry.sha256:
        raise archive_error(
            ArchiveCode.SOURCE_CHANGED, f"{path} changed while packing", member=entry.path
        )


def pack(bundle_dir: Path, output: Path, limits: ArchiveLimits = DEFAULT_LIMITS) -> PackResult:
    """Validate ``bundle_dir``'s manifest and write its deterministic archive to ``output``.

    The archive is written to a temporary file beside ``output`` and renamed into place,
    so ``output`` is either the complete archive or untouched. It is refused when
    extraction with the same ``limits`` would refuse it. Raises :class:`ManifestError`
    for an invalid ``skill.yaml`` and :class:`ArchiveError` for anything else.
    """
    bundle_dir, output = Path(bundle_dir), Path(output)
    load_manifest(bundle_dir)
    if output.resolve().is_relative_to(bundle_dir.resolve()):
        raise archive_error(
            ArchiveCode.OUTPUT_INSIDE_SOURCE, f"{output} is inside the bundle {bundle_dir}"
        )
    entries = _checked_entries(bundle_dir, limits)
    inventory = _inventory(bundle_dir, entries, limits)
    partial = output.with_name(f".{output.name}.{os.getpid()}.partial")
    try:
        with open(partial, "wb") as handle:
            writer = _HashingWriter(handle)
            tar_size = _write_archive(bundle_dir, entries, inventory, writer)
            handle.flush()
            os.fsync(handle.fileno())
        _check_ratio(tar_size, writer.size, limits, output)
        os.replace(partial, output)
    finally:
        partial.unlink(missing_ok=True)
    return PackResult(output, writer.digest.hexdigest(), writer.size, inventory.files)


def _check_ratio(tar_size: int, size: int, limits: ArchiveLimits, output: Path) -> None:
    if tar_size > limits.ratio_grace_bytes and tar_size > limits.max_ratio * max(size, 1):
        raise archive_error(
            ArchiveCode.RATIO_EXCEEDED,
            f"{output} would compress {tar_size / size:.0f}:1, over the cap of "
            f"{limits.max_ratio:.0f}:1 that installation enforces",
        )
