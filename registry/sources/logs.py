"""Bounded stderr logs for tool servers: a server that floods stderr cannot fill the disk.

:class:`BoundedLog` keeps at most ``max_bytes`` in ``<path>`` and the previous
``max_bytes`` in ``<path>.1`` (the newest bytes always survive). :func:`open_errlog` gives
the MCP SDK what ``stdio_client(server, errlog=...)`` needs: it hands ``errlog`` to the
child as its stderr, so it must be a real file with a descriptor. That file is the write end
of a pipe whose read end a daemon thread drains into a :class:`BoundedLog`; one errlog can
serve every restart of a server, and closing it ends the drain once the children have gone.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from pathlib import Path
from typing import BinaryIO, Self

MIB = 1024 * 1024
DEFAULT_MAX_BYTES = MIB
READ_CHUNK = 64 * 1024


class BoundedLog:
    """An append-only log of at most ``max_bytes`` per file, rotating to ``<path>.1``.

    Thread-safe; the file is created with mode 0600 (a server's stderr may carry what it
    was given)."""

    def __init__(self, path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self.path = path
        self.rotated = path.with_name(path.name + ".1")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self._open()
        self._size = self._file.tell()

    def _open(self) -> BinaryIO:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return os.fdopen(fd, "ab")

    def append(self, data: bytes | str) -> None:
        """Append ``data``; when it would pass ``max_bytes`` the file rotates first, and a
        chunk larger than the bound keeps only its last ``max_bytes``."""
        chunk = data.encode("utf-8", "replace") if isinstance(data, str) else data
        chunk = chunk[-self.max_bytes :]
        with self._lock:
            if self._file.closed:
                return
            if self._size + len(chunk) > self.max_bytes:
                self._rotate()
            self._file.write(chunk)
            self._file.flush()
            self._size += len(chunk)

    def _rotate(self) -> None:
        self._file.close()
        os.replace(self.path, self.rotated)
        self._file = self._open()
        self._size = 0

    def tail(self, max_bytes: int = 4096) -> str:
        """The newest ``max_bytes`` logged (across the rotation), decoded leniently: for an
        error message that shows what a crashed server last said."""
        with self._lock:
            parts = [p.read_bytes() for p in (self.rotated, self.path) if p.exists()]
        return b"".join(parts)[-max_bytes:].decode("utf-8", "replace")

    def close(self) -> None:
        """Close the file; later appends are dropped."""
        with self._lock:
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Errlog(io.TextIOWrapper):
    """The write end of a pipe drained into a :class:`BoundedLog` (a text file the SDK can
    give a child as stderr). ``close`` closes this end; the drain ends at end of file."""

    def __init__(self, log: BoundedLog) -> None:
        read_fd, write_fd = os.pipe()
        super().__init__(
            os.fdopen(write_fd, "wb"), encoding="utf-8", errors="replace", write_through=True
        )
        self.log = log
        self._drain = threading.Thread(
            target=_drain, args=(read_fd, log), name=f"errlog:{log.path.name}", daemon=True
        )
        self._drain.start()

    def wait_drained(self, timeout: float) -> bool:
        """Wait for the drain to reach end of file (after ``close`` and every child's exit);
        True when it did within ``timeout`` seconds."""
        self._drain.join(timeout)
        return not self._drain.is_alive()


def _drain(read_fd: int, log: BoundedLog) -> None:
    """Copy the pipe into the log until every writer has closed it, then close both.

    A failing write (disk full) drops that chunk but keeps draining: a pipe nobody reads
    would block the server on its next stderr line."""
    try:
        while chunk := os.read(read_fd, READ_CHUNK):
            with contextlib.suppress(OSError):
                log.append(chunk)
    finally:
        os.close(read_fd)
        log.close()


def open_errlog(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> Errlog:
    """A bounded stderr sink for ``mcp.client.stdio.stdio_client(server, errlog=...)``."""
    return Errlog(BoundedLog(path, max_bytes))
