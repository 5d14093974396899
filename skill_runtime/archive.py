"""Hostile-input-safe extraction of bundle and node-artifact archives.

An archive is read once, as a stream (``tarfile`` in ``r|`` mode over our own gzip
reader, which decompresses one bounded step ahead in a worker thread as ``gzip -d`` does
beside ``tar``: :mod:`doraforge.skill_runtime.archive_stream`), and every member passes
the checks below before a byte of it is written:

* its name is a safe relative path (:mod:`doraforge.skill_runtime.paths`); a leading ``./`` is
  tolerated because ``tar -C dir .`` writes it;
* it is a regular file or a directory: links, devices, FIFOs and sparse or unknown
  members are refused, so nothing in the tree can redirect a later write;
* it does not repeat, collide (Unicode normalisation, case) or put a file where a
  directory is (:class:`~doraforge.skill_runtime.archive_format.MemberRegistry`);
* the member count, each member's size, the running total and the running compression
  ratio stay under :class:`ArchiveLimits`; the ratio is checked while decompressing, so a
  gzip bomb stops after at most ``max_ratio`` times its compressed size.

Containment works on path components, not string prefixes: every component was checked
above, the destination starts empty and the extractor only ever creates real directories
and regular files, so the lexical path of a member *is* its resolved path; files are opened
with ``O_CREAT | O_EXCL | O_NOFOLLOW`` so nothing that appears behind our back is
followed or overwritten. Data is hashed while it is written. Any failure removes what was
written. Permissions are normalised (0o755 for executable files and directories, else
0o644): set-id and sticky bits in an archive are never honoured.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from doraforge.skill_runtime.archive_format import (
    ARCHIVE_MANIFEST_NAME,
    DEFAULT_LIMITS,
    INVENTORY_NAMES,
    MAX_ARCHIVE_MANIFEST_BYTES,
    PAOS_MANIFEST_NAME,
    ArchiveCode,
    ArchiveFile,
    ArchiveLimits,
    ArchiveManifest,
    ListedFile,
    MemberRegistry,
    archive_error,
    check_member_path,
    hash_file,
    parse_inventory,
)
from doraforge.skill_runtime.archive_stream import ThreadedGunzip
from doraforge.skill_runtime.packing import PackResult, pack

__all__ = [
    "ARCHIVE_MANIFEST_NAME",
    "PAOS_MANIFEST_NAME",
    "ArchiveCode",
    "ArchiveFile",
    "ArchiveLimits",
    "ArchiveManifest",
    "PackResult",
    "extract",
    "extract_artifact",
    "pack",
    "verify_tree",
]

#: Read and write granularity; large enough that per-call overhead vanishes.
CHUNK = 1024 * 1024
#: ``tarfile``'s stream buffer. Each of its small reads (a 512-byte header, the padding
#: after a member) copies what is left of this buffer, so 1 MiB here cost ~10,000 copies
#: of up to 1 MiB per 2,000-file bundle; a large member is still read in large pieces.
_TAR_BUFSIZE = 64 * 1024
_OPEN_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DECOMPRESS_ERRORS = (OSError, EOFError, zlib.error)


# What to do about a corrupt archive, appended to its one-line message.
_REPACK = "; download it again or re-pack its folder with `doraforge skill pack DIR`"


class _BoundedGzip:
    """Decompresses the archive for ``tarfile``, enforcing the ratio and an absolute cap.

    Everything ``tarfile`` reads passes through here, headers included, so a pax header
    claiming gigabytes cannot be buffered past the caps either. The worker thread behind
    ``gunzip`` runs at most its bounded queue ahead of these checks.
    """

    def __init__(self, gunzip: ThreadedGunzip, compressed: int, limits: ArchiveLimits, source: str):
        self._gzip = gunzip
        self._ratio_cap = max(limits.ratio_grace_bytes, limits.max_ratio * max(compressed, 1))
        # Headers and padding cost at most a few KiB per member on top of the data.
        self._total_cap = limits.max_total_bytes + (limits.max_members + 4) * 4096
        self._source = source
        self.total = 0

    def read(self, size: int = -1) -> bytes:
        size = CHUNK if size < 0 or size > CHUNK else size
        try:
            data = self._gzip.read(size)
        except _DECOMPRESS_ERRORS as exc:
            raise archive_error(
                ArchiveCode.CORRUPT, f"{self._source} is not a valid .tar.gz: {exc}{_REPACK}"
            ) from exc
        self.total += len(data)
        if self.total > self._ratio_cap:
            raise archive_error(
                ArchiveCode.RATIO_EXCEEDED,
                f"{self._source} decompresses beyond its compression ratio cap",
                archive=self._source,
            )
        if self.total > self._total_cap:
            raise archive_error(
                ArchiveCode.TOTAL_TOO_LARGE,
                f"{self._source} decompresses beyond its size cap",
                archive=self._source,
            )
        return data


@dataclass(frozen=True)
class _Member:
    """A member that passed every check; ``data`` reads its bytes (files only)."""

    path: str
    is_dir: bool
    size: int
    executable: bool
    data: IO[bytes] | None


def _iter_members(archive: Path, limits: ArchiveLimits, source: str) -> Iterator[_Member]:
    """Yield checked members in archive order; raise ``ArchiveError`` at the first bad one.

    ``source`` names the archive in messages: the file the user gave, not a cache copy."""
    with open(archive, "rb") as raw:
        if raw.read(2) != b"\x1f\x8b":
            raise archive_error(ArchiveCode.CORRUPT, f"{source} is not a gzip file{_REPACK}")
        raw.seek(0)
        size = os.fstat(raw.fileno()).st_size
        registry = MemberRegistry(source)
        count = total = 0
        try:
            with (
                ThreadedGunzip(raw) as gunzip,
                tarfile.open(  # type: ignore[call-overload]
                    fileobj=_BoundedGzip(gunzip, size, limits, source),
                    mode="r|",
                    bufsize=_TAR_BUFSIZE,
                ) as tar,
            ):
                for info in tar:
                    count += 1
                    if count > limits.max_members:
                        raise archive_error(
                            ArchiveCode.TOO_MANY_MEMBERS,
                            f"{source} has more than {limits.max_members} members",
                            archive=source,
                        )
                    member = _check(info, registry, limits, source)
                    if member is None:
                        continue
                    total += member.size
                    if total > limits.max_total_bytes:
                        raise archive_error(
                            ArchiveCode.TOTAL_TOO_LARGE,
                            f"{source} holds more than {limits.max_total_bytes} bytes",
                            archive=source,
                        )
                    data = None if member.is_dir else tar.extractfile(info)
                    yield _Member(member.path, member.is_dir, member.size, member.executable, data)
        except tarfile.TarError as exc:
            raise archive_error(
                ArchiveCode.CORRUPT, f"{source} is not a valid tar: {exc}{_REPACK}"
            ) from exc


def _check(
    info: tarfile.TarInfo, registry: MemberRegistry, limits: ArchiveLimits, source: str
) -> _Member | None:
    """Check one header; ``None`` for the ``.`` root entry that ``tar -C dir .`` writes."""
    name = info.name
    while name.startswith("./"):
        name = name[2:]
    if info.isdir():
        name = name.rstrip("/")
        if name in ("", ".") and info.name.startswith("."):
            return None
    path = check_member_path(name, archive=source)
    _check_type(info, path, source)
    registry.add(path, is_dir=info.isdir())
    if info.isfile() and info.size > limits.max_member_bytes:
        raise archive_error(
            ArchiveCode.MEMBER_TOO_LARGE,
            f"member {path!r} is larger than {limits.max_member_bytes} bytes",
            member=path,
            archive=source,
        )
    size = info.size if info.isfile() else 0
    return _Member(path, info.isdir(), size, bool(info.mode & 0o111), None)


def _check_type(info: tarfile.TarInfo, path: str, source: str) -> None:
    if info.issym():
        code, what = ArchiveCode.SYMLINK, "a symbolic link"
    elif info.islnk():
        code, what = ArchiveCode.HARDLINK, "a hard link"
    elif (info.isfile() and not info.issparse()) or info.isdir():
        return
    else:
        code, what = ArchiveCode.SPECIAL_MEMBER, "a device, FIFO or other special member"
    raise archive_error(code, f"member {path!r} is {what}", member=path, archive=source)


@contextmanager
def _fresh_destination(destination: Path) -> Iterator[Path]:
    """Yield ``destination`` (absent or an empty directory); undo everything on failure."""
    created = not os.path.lexists(destination)
    if created:
        destination.mkdir(parents=True, mode=0o755)
    elif not stat.S_ISDIR(destination.lstat().st_mode) or any(destination.iterdir()):
        raise archive_error(
            ArchiveCode.DESTINATION_NOT_EMPTY,
            f"{destination} must not exist or be an empty directory",
            destination=destination,
        )
    try:
        yield destination
    except BaseException:
        if created:
            shutil.rmtree(destination, ignore_errors=True)
        else:
            for child in destination.iterdir():
                _remove(child)
        raise


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _write_file(root: Path, member: _Member) -> ArchiveFile:
    """Create ``member`` under ``root`` (it must not exist), hashing while writing."""
    assert member.data is not None
    digest = hashlib.sha256()
    written = 0
    try:
        fd = os.open(os.path.join(root, member.path), _OPEN_NEW, 0o600)
        try:
            # Ask for no more than the member holds: a 1 MiB read buffer per 4 KiB file
            # was most of the allocator's work. ``tarfile`` raises on a short member.
            while (left := member.size - written) > 0:
                chunk = member.data.read(min(CHUNK, left))
                if not chunk:
                    break
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
                written += len(chunk)
            os.fchmod(fd, 0o755 if member.executable else 0o644)
        finally:
            os.close(fd)
    except OSError as exc:
        raise archive_error(
            ArchiveCode.WRITE_FAILED, f"cannot write {member.path!r}: {exc}", member=member.path
        ) from exc
    return ArchiveFile(path=member.path, size=written, sha256=digest.hexdigest())


def _make_dir(root: Path, path: str) -> None:
    try:
        (root / path).mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        raise archive_error(
            ArchiveCode.WRITE_FAILED, f"cannot create {path!r}: {exc}", member=path
        ) from exc


def _place(root: Path, member: _Member, made: set[str]) -> ArchiveFile | None:
    """Write a checked member; parents are created as plain directories first."""
    parent = member.path.rpartition("/")[0] if not member.is_dir else member.path
    if parent and parent not in made:
        _make_dir(root, parent)
        while parent:
            made.add(parent)
            parent = parent.rpartition("/")[0]
    return None if member.is_dir else _write_file(root, member)


def extract(
    archive: Path,
    destination: Path,
    limits: ArchiveLimits = DEFAULT_LIMITS,
    *,
    shown_as: str | None = None,
) -> ArchiveManifest:
    """Extract a bundle archive into ``destination`` and return its verified inventory.

    ``destination`` must be absent or an empty directory. Every member is checked before it
    is written (see the module docstring); an inventory is required, named
    ``archive-manifest.json`` or (PhyAgentOS) ``.paos-manifest.json`` but not both
    (``ARCHIVE_MANIFEST_AMBIGUOUS``), in either ``files`` form
    (:func:`~doraforge.skill_runtime.archive_format.parse_inventory`), and the extracted
    files must match it exactly: no extra or missing file, equal SHA-256 and, where listed,
    size. The verified inventory, sizes filled in, is written to ``destination`` as
    ``archive-manifest.json``. Raises :class:`ArchiveError` with a specific
    :class:`ArchiveCode`; on any error ``destination`` is left as found.
    """
    archive, destination = Path(archive), Path(destination)
    label = shown_as or str(archive)
    with _fresh_destination(destination) as root:
        found: str | None = None
        expected: dict[str, ListedFile] | None = None
        written: dict[str, ArchiveFile] = {}
        made: set[str] = set()
        for member in _iter_members(archive, limits, label):
            if member.path in INVENTORY_NAMES:
                if found is not None:
                    raise archive_error(
                        ArchiveCode.MANIFEST_AMBIGUOUS,
                        f"{label} carries both {found} and {member.path}",
                        archive=label,
                    )
                found, expected = member.path, _read_inventory(member, label)
                _verify_written(written, expected, label, final=False)
                continue
            if expected is not None and not member.is_dir:
                _expect(member, expected, label)
            entry = _place(root, member, made)
            if entry is not None:
                written[entry.path] = entry
                if expected is not None:
                    _verify_written({entry.path: entry}, expected, label, final=False)
        if expected is None:
            raise archive_error(
                ArchiveCode.MANIFEST_MISSING,
                f"{label} has no {ARCHIVE_MANIFEST_NAME} (or {PAOS_MANIFEST_NAME})",
                archive=label,
            )
        _verify_written(written, expected, label, final=True)
        inventory = ArchiveManifest(files=tuple(written[path] for path in sorted(written)))
        (root / ARCHIVE_MANIFEST_NAME).write_bytes(inventory.to_json())
        return inventory


def _read_inventory(member: _Member, archive: str) -> dict[str, ListedFile]:
    if member.is_dir or member.data is None or member.size > MAX_ARCHIVE_MANIFEST_BYTES:
        raise archive_error(
            ArchiveCode.MANIFEST_INVALID,
            f"{member.path} in {archive} is not a file of at most "
            f"{MAX_ARCHIVE_MANIFEST_BYTES} bytes",
            archive=archive,
        )
    return parse_inventory(member.data.read(), archive, member.path)


def _expect(member: _Member, expected: dict[str, ListedFile], archive: str) -> None:
    """Refuse a file before writing it when the inventory already says it is wrong."""
    entry = expected.get(member.path)
    if entry is None:
        _mismatch(ArchiveCode.FILE_UNLISTED, member.path, "is not in the inventory", archive)
    elif entry.size is not None and entry.size != member.size:
        why = f"has {member.size} bytes, the inventory says {entry.size}"
        _mismatch(ArchiveCode.SIZE_MISMATCH, member.path, why, archive)


def _verify_written(
    written: dict[str, ArchiveFile],
    expected: dict[str, ListedFile],
    archive: str,
    *,
    final: bool,
) -> None:
    for path, entry in written.items():
        listed = expected.get(path)
        if listed is None:
            _mismatch(ArchiveCode.FILE_UNLISTED, path, "is not in the inventory", archive)
        elif listed.size is not None and listed.size != entry.size:
            why = f"has {entry.size} bytes, the inventory says {listed.size}"
            _mismatch(ArchiveCode.SIZE_MISMATCH, path, why, archive)
        elif listed.sha256 != entry.sha256:
            _mismatch(ArchiveCode.HASH_MISMATCH, path, "does not match its SHA-256", archive)
    if final:
        for path in sorted(expected.keys() - written.keys()):
            _mismatch(ArchiveCode.FILE_MISSING, path, "is listed but not in the archive", archive)


def _mismatch(code: ArchiveCode, path: str, why: str, archive: Path | str) -> None:
    raise archive_error(code, f"{path!r} {why}", member=path, archive=archive)


def extract_artifact(
    archive: Path, destination: Path, limits: ArchiveLimits = DEFAULT_LIMITS
) -> list[str]:
    """Extract a node artifact (plain ``.tar.gz``, no inventory) and list its files, sorted.

    The same member checks as :func:`extract` apply; executable bits of regular files are
    kept (as 0o755). The caller verifies the archive's SHA-256 against the lock first.
    Raises :class:`ArchiveError`; on any error ``destination`` is left as found.
    """
    archive, destination = Path(archive), Path(destination)
    files: list[str] = []
    with _fresh_destination(destination) as root:
        made: set[str] = set()
        for member in _iter_members(archive, limits, str(archive)):
            if _place(root, member, made) is not None:
                files.append(member.path)
    return sorted(files)


def verify_tree(root: Path, manifest: ArchiveManifest, *, allow_extra: bool = False) -> None:
    """Re-hash an installed tree against its inventory.

    Every listed file must be a regular file with the listed size and SHA-256; links and
    special files anywhere are refused; files not listed are refused unless ``allow_extra``
    (e.g. ``__pycache__`` written by a running skill). ``archive-manifest.json`` at the root
    is the inventory itself and is skipped. Raises :class:`ArchiveError`.
    """
    root = Path(root)
    expected = manifest.by_path()
    present = _tree_files(root)
    present.discard(ARCHIVE_MANIFEST_NAME)
    for path in sorted(expected.keys() - present):
        _mismatch(ArchiveCode.FILE_MISSING, path, "is missing from the installed tree", root)
    if not allow_extra:
        for path in sorted(present - expected.keys()):
            _mismatch(ArchiveCode.FILE_UNLISTED, path, "is not in the inventory", root)
    for path, entry in expected.items():
        size, sha256 = hash_file(root / path)
        if size != entry.size:
            why = f"has {size} bytes, the inventory says {entry.size}"
            _mismatch(ArchiveCode.SIZE_MISMATCH, path, why, root)
        if sha256 != entry.sha256:
            _mismatch(ArchiveCode.HASH_MISMATCH, path, "does not match its SHA-256", root)


def _tree_files(root: Path, prefix: str = "") -> set[str]:
    """Relative paths of the regular files under ``root``; links and specials refused."""
    files: set[str] = set()
    with os.scandir(root) as entries:
        for entry in entries:
            path = f"{prefix}{entry.name}"
            if entry.is_symlink():
                _mismatch(ArchiveCode.SYMLINK, path, "is a symbolic link", root)
            elif entry.is_dir(follow_symlinks=False):
                files |= _tree_files(Path(entry.path), f"{path}/")
            elif entry.is_file(follow_symlinks=False):
                files.add(path)
            else:
                _mismatch(ArchiveCode.SPECIAL_MEMBER, path, "is a special file", root)
    return files
