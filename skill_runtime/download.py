"""Downloads into a cache keyed by SHA-256, with a mandatory size and digest.

Every file enters ``cache/sha256/<hex>`` the same way, whether it came over HTTP or from a
local path: bytes are streamed into ``<hex>.part`` while being hashed, fsynced, and renamed
to ``<hex>`` only when both the size and the digest match what the caller expected. A file
that does not match is deleted, so the cache is never poisoned. An interrupted HTTP
download keeps its partial file and the next attempt resumes it with a ``Range`` request
(only when the server answers ``206`` with a matching ``Content-Range``; anything else
restarts from byte 0). A cache hit is re-hashed before it is handed out.

Errors are :class:`~doraforge.skill_runtime.errors.InstallError` with one of these codes:

``SKILL_DOWNLOAD_DIGEST_MISMATCH``  the bytes do not hash to the expected SHA-256
``SKILL_DOWNLOAD_SIZE_MISMATCH``    declared or received size differs from the expected size
``SKILL_DOWNLOAD_TOO_LARGE``        the expected or declared size exceeds the size cap
``SKILL_DOWNLOAD_INTERRUPTED``      the transfer broke; retryable, the partial file is kept
``SKILL_DOWNLOAD_FAILED``           the server refused (HTTP status) or the source is missing
``SKILL_DOWNLOAD_BUSY``             another process is downloading the same digest
``SKILL_DOWNLOAD_BAD_DIGEST``       the expected digest is not 64 hex characters
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO
from urllib.parse import unquote, urlsplit

import httpx

from doraforge.skill_runtime.errors import InstallError

type ProgressCallback = Callable[[int, int], None]
"""Called with ``(bytes_done, bytes_total)`` as a download advances."""

DEFAULT_MAX_BYTES = 1 << 30
CHUNK_SIZE = 1 << 16
_HEX = re.compile(r"[0-9a-f]{64}")
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


@dataclass(frozen=True)
class CachedFile:
    """A verified file in the cache."""

    path: Path
    sha256: str
    size: int


def _error(code: str, message: str, *, retryable: bool = False, **details: object) -> InstallError:
    return InstallError(code, message, retryable=retryable, details=details)


def check_digest(sha256: str) -> str:
    """The digest in canonical lower-case form; it names a cache file, so it is validated."""
    digest = sha256.strip().lower()
    if not _HEX.fullmatch(digest):
        raise _error("SKILL_DOWNLOAD_BAD_DIGEST", f"not a SHA-256 hex digest: {sha256!r}")
    return digest


def hash_file(path: Path) -> tuple[str, int]:
    """``(sha256 hex, size)`` of ``path``, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_SIZE):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def local_path(source: str) -> Path | None:
    """The filesystem path of a ``file://`` URL or a plain path; ``None`` for other URLs."""
    parts = urlsplit(source)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise _error("SKILL_DOWNLOAD_FAILED", f"remote file URL not supported: {source}")
        return Path(unquote(parts.path))
    if parts.scheme in ("http", "https"):
        return None
    if parts.scheme and len(parts.scheme) > 1:
        raise _error("SKILL_DOWNLOAD_FAILED", f"unsupported URL scheme {parts.scheme!r}")
    return Path(source).expanduser()


class DownloadCache:
    """The ``cache/sha256`` directory of a PAOS home.

    ``max_bytes`` caps every file; ``progress`` is told ``(done, total)``; ``client`` is the
    ``httpx.Client`` used for HTTP sources (one with a timeout is created when omitted).
    """

    def __init__(
        self,
        directory: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        progress: ProgressCallback | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._progress = progress or (lambda _done, _total: None)
        self._client = client

    # ------------------------------------------------------------------ public

    def fetch(self, source: str, *, sha256: str | None, size: int | None) -> CachedFile:
        """Bring ``source`` (http(s) URL, ``file://`` URL or path) into the cache, verified.

        HTTP sources need both ``sha256`` and ``size``. Local sources are checked against
        whichever the caller provides; a bare local archive has its digest computed.
        """
        path = local_path(source)
        if path is not None:
            return self.add_local(path, sha256=sha256, size=size)
        if sha256 is None or size is None:
            raise _error("SKILL_DOWNLOAD_FAILED", "an HTTP download needs its size and SHA-256")
        return self.download(source, sha256=sha256, size=size)

    def lookup(self, sha256: str) -> CachedFile | None:
        """The cached file for ``sha256`` after re-hashing it; a corrupt entry is deleted."""
        final = self.directory / check_digest(sha256)
        if not final.is_file():
            return None
        actual, size = hash_file(final)
        if actual != final.name:
            # Bit rot or tampering: drop it so the next fetch replaces it.
            final.unlink(missing_ok=True)
            return None
        return CachedFile(final, actual, size)

    def download(self, url: str, *, sha256: str, size: int) -> CachedFile:
        """Stream ``url`` into the cache, resuming a partial file; see the module docstring."""
        digest = check_digest(sha256)
        self._check_cap(size)
        if (hit := self.lookup(digest)) is not None:
            return self._finish_hit(hit, size)
        self.directory.mkdir(parents=True, exist_ok=True)
        part = self.directory / f"{digest}.part"
        with self._locked(part) as handle:
            if (hit := self.lookup(digest)) is not None:
                return self._finish_hit(hit, size)
            try:
                self._stream(url, handle, size)
                return self._commit(part, handle, digest, size)
            except InstallError as exc:
                if not exc.retryable:
                    # Only an interrupted transfer leaves a partial worth resuming.
                    part.unlink(missing_ok=True)
                raise

    def add_local(self, path: Path, *, sha256: str | None, size: int | None) -> CachedFile:
        """Copy a local file into the cache, verified like a download."""
        if not path.is_file():
            raise _error("SKILL_DOWNLOAD_FAILED", f"no such file: {path}", path=str(path))
        actual_size = path.stat().st_size
        self._check_cap(actual_size)
        if size is not None and actual_size != size:
            raise _error(
                "SKILL_DOWNLOAD_SIZE_MISMATCH",
                f"{path} has {actual_size} bytes, expected {size}",
                expected=size,
                actual=actual_size,
            )
        digest = check_digest(sha256) if sha256 is not None else hash_file(path)[0]
        if (hit := self.lookup(digest)) is not None:
            return hit
        self.directory.mkdir(parents=True, exist_ok=True)
        part = self.directory / f"{digest}.part"
        with self._locked(part) as handle, path.open("rb") as source:
            try:
                handle.truncate(0)
                self._copy(iter(lambda: source.read(CHUNK_SIZE), b""), handle, 0, actual_size)
                return self._commit(part, handle, digest, actual_size)
            except BaseException:
                # A local copy is cheap to redo; never leave a partial that looks resumable.
                part.unlink(missing_ok=True)
                raise

    # ------------------------------------------------------------------ steps

    def _check_cap(self, size: int) -> None:
        if size < 0 or size > self.max_bytes:
            raise _error(
                "SKILL_DOWNLOAD_TOO_LARGE",
                f"{size} bytes exceeds the download cap of {self.max_bytes}",
                size=size,
                max_bytes=self.max_bytes,
            )

    def _finish_hit(self, hit: CachedFile, size: int) -> CachedFile:
        if hit.size != size:
            raise _error(
                "SKILL_DOWNLOAD_SIZE_MISMATCH",
                f"cached file has {hit.size} bytes, expected {size}",
                expected=size,
                actual=hit.size,
            )
        self._progress(size, size)
        return hit

    @contextlib.contextmanager
    def _locked(self, part: Path) -> Iterator[BinaryIO]:
        # The lock lives on the partial file itself: two installers fetching the same
        # digest would otherwise interleave their writes.
        handle = os.fdopen(os.open(part, os.O_RDWR | os.O_CREAT, 0o644), "r+b")
        try:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise _error(
                    "SKILL_DOWNLOAD_BUSY", f"{part.name} is being downloaded", retryable=True
                ) from exc
            yield handle
        finally:
            handle.close()

    def _stream(self, url: str, handle: BinaryIO, size: int) -> None:
        handle.seek(0, os.SEEK_END)
        offset = handle.tell()
        if offset >= size:
            # A complete (or overlong) partial: verify it as is; _commit decides.
            return
        client = self._client or httpx.Client(timeout=30.0, follow_redirects=True)
        try:
            if offset and self._get(client, url, handle, offset, size):
                return
            # No partial, or the server did not honour the range: start over from byte 0.
            self._get(client, url, handle, 0, size)
        except httpx.HTTPError as exc:
            handle.flush()
            raise _error(
                "SKILL_DOWNLOAD_INTERRUPTED",
                f"download of {url} broke off: {exc}",
                retryable=True,
                url=url,
            ) from exc
        finally:
            if self._client is None:
                client.close()

    def _get(
        self, client: httpx.Client, url: str, handle: BinaryIO, offset: int, size: int
    ) -> bool:
        """Fetch from ``offset``; ``False`` when a range request was not honoured."""
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        with client.stream("GET", url, headers=headers) as response:
            if offset and not self._range_honoured(response, offset, size):
                return False
            if not offset:
                self._check_status(response, url)
                self._check_declared(response, size, size)
                handle.truncate(0)
            handle.seek(offset)
            # No chunk_size: httpx would buffer up to it, and bytes buffered when the
            # connection breaks are lost to the partial file.
            self._copy(response.iter_bytes(), handle, offset, size)
        return True

    def _range_honoured(self, response: httpx.Response, offset: int, size: int) -> bool:
        # Appending is only safe when the server says it sends exactly the bytes we lack;
        # a 200 (whole body) or a different range means starting over.
        if response.status_code != 206:
            return False
        match = _CONTENT_RANGE.fullmatch(response.headers.get("content-range", "").strip())
        if match is None or int(match[1]) != offset or int(match[2]) != size - 1:
            return False
        if match[3] not in ("*", str(size)):
            return False
        self._check_declared(response, size - offset, size)
        return True

    def _check_status(self, response: httpx.Response, url: str) -> None:
        if response.status_code != 200:
            raise _error(
                "SKILL_DOWNLOAD_FAILED",
                f"GET {url} answered HTTP {response.status_code}",
                retryable=response.status_code >= 500,
                status_code=response.status_code,
            )

    def _check_declared(self, response: httpx.Response, body_size: int, size: int) -> None:
        declared = response.headers.get("content-length")
        # With a content coding the length is of the encoded bytes; the streamed count
        # is checked anyway.
        if declared is None or response.headers.get("content-encoding"):
            return
        if not declared.isdigit():
            raise _error("SKILL_DOWNLOAD_SIZE_MISMATCH", f"bad Content-Length {declared!r}")
        self._check_cap(int(declared))
        if int(declared) != body_size:
            raise _error(
                "SKILL_DOWNLOAD_SIZE_MISMATCH",
                f"server declares {declared} bytes, expected {body_size}",
                expected=size,
                declared=int(declared),
            )

    def _copy(self, chunks: Iterable[bytes], handle: BinaryIO, done: int, size: int) -> None:
        self._progress(done, size)
        for chunk in chunks:
            done += len(chunk)
            if done > size:
                # Never let a lying server write past the size we expect.
                raise _error(
                    "SKILL_DOWNLOAD_SIZE_MISMATCH",
                    f"received more than the expected {size} bytes",
                    expected=size,
                )
            handle.write(chunk)
            self._progress(done, size)

    def _commit(self, part: Path, handle: BinaryIO, digest: str, size: int) -> CachedFile:
        """Verify the partial file and rename it into place; delete it on any mismatch."""
        handle.flush()
        os.fsync(handle.fileno())
        handle.seek(0)
        hasher = hashlib.sha256()
        received = 0
        while chunk := handle.read(CHUNK_SIZE):
            hasher.update(chunk)
            received += len(chunk)
        if received < size:
            raise _error(
                "SKILL_DOWNLOAD_INTERRUPTED",
                f"received {received} of {size} bytes; the partial file is kept",
                retryable=True,
                received=received,
                expected=size,
            )
        problem = None
        if received != size:
            problem = _error(
                "SKILL_DOWNLOAD_SIZE_MISMATCH",
                f"received {received} bytes, expected {size}",
                expected=size,
                actual=received,
            )
        elif hasher.hexdigest() != digest:
            problem = _error(
                "SKILL_DOWNLOAD_DIGEST_MISMATCH",
                f"SHA-256 {hasher.hexdigest()} does not match the expected {digest}",
                expected=digest,
                actual=hasher.hexdigest(),
            )
        if problem is not None:
            part.unlink(missing_ok=True)
            raise problem
        final = self.directory / digest
        os.replace(part, final)
        _fsync_dir(self.directory)
        return CachedFile(final, digest, size)


def fetch_with_retry(
    cache: DownloadCache, source: str, *, sha256: str | None, size: int | None, attempts: int = 3
) -> CachedFile:
    """``cache.fetch`` retried on retryable failures; each retry resumes the partial file."""
    for attempt in range(1, attempts + 1):
        try:
            return cache.fetch(source, sha256=sha256, size=size)
        except InstallError as exc:
            if not exc.retryable or attempt == attempts:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def terminal_progress(
    stream: TextIO, *, label: str, interactive: bool | None = None
) -> Iterator[ProgressCallback]:
    """A progress callback drawing a ``rich`` bar on a TTY, else a plain line per 10%.

    ``interactive`` defaults to ``stream.isatty()``. The bar appears with the first bytes
    (nothing is drawn while a source is resolved, or for a bundle already in the cache)
    and stops redrawing once the download is complete, so what follows (a confirmation
    prompt) is never drawn over.
    """
    if interactive if interactive is not None else stream.isatty():
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TransferSpeedColumn,
        )

        columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
        # Drawn as on the terminal the caller found (or asked for with ``interactive``).
        console = Console(file=stream, force_terminal=True, force_interactive=True)
        bar = Progress(*columns, TransferSpeedColumn(), console=console)
        task = bar.add_task(label, total=None)
        started = [False]

        def draw(done: int, total: int) -> None:
            if not started[0]:
                started[0] = True
                bar.start()
            bar.update(task, completed=done, total=total)
            if total and done >= total:
                bar.stop()  # idempotent; the finished bar stays on screen

        try:
            yield draw
        finally:
            bar.stop()
        return
    last = [-1]

    def plain(done: int, total: int) -> None:
        tenth = (done * 10 // total) if total else 10
        if tenth != last[0]:
            last[0] = tenth
            print(f"{label}: {done}/{total} bytes", file=stream, flush=True)

    yield plain
