"""Whole-file writes, and the private modes of what a home holds.

Every state file doraforge keeps (runtime records, evidence frames, recipe libraries,
installed manifests) is written atomically: into a temporary file beside the target,
flushed and fsynced, renamed over the target, then the directory fsynced so the rename
itself survives a crash. A home's folder is 0700 and its store and logs 0600
(:func:`private_directory`, :func:`private_file`), whatever the umask.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (creating its directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically (creating its directory)."""
    atomic_write_bytes(path, text.encode("utf-8"))


#: The umask of the processes a home starts (Dora's services, their nodes, a skill's hook):
#: what they create there is theirs alone.
PRIVATE_UMASK = 0o077
#: Group and other permission bits: a private file or folder has none.
_SHARED_BITS = stat.S_IRWXG | stat.S_IRWXO


def private_directory(path: Path) -> Path:
    """Create ``path`` (and its parents) as a 0700 folder; an existing one loses its group
    and other permissions. Returns ``path``."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(path, 0o700)
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty with mode 0600 when it is missing (never a moment in which
    others could read it); an existing one loses its group and other permissions. Its
    folder must exist. Returns ``path``."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    _tighten(path, 0o600)
    return path


def _tighten(path: Path, mode: int) -> None:
    # Only what this user owns: a shared folder someone else made is not ours to change.
    with contextlib.suppress(FileNotFoundError, PermissionError):
        if path.stat().st_mode & _SHARED_BITS:
            path.chmod(mode)
