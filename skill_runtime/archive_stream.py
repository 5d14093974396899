"""Gzip decompression one step ahead of the archive reader, in a worker thread.

``tar -xzf`` runs ``gzip -d`` as a second process beside ``tar``; this is the same split
inside one process. zlib, the CRC and the file read release the GIL, so on two cores the
worker decompresses the next chunks while the caller parses tar headers, hashes and writes.

The worker runs at most ``depth`` chunks ahead (a bounded queue), so a gzip bomb costs at
most ``depth * chunk`` bytes beyond what the caller has read: every cap on decompressed
bytes stays with the caller (:class:`~doraforge.skill_runtime.archive._BoundedGzip`),
which sees every byte, in order, before any member that contains it is checked or written.
A decompression error reaches the caller after every good byte before it, as it would
without the thread.
"""

from __future__ import annotations

import gzip
import queue
import threading
from types import TracebackType
from typing import IO, Final

#: Marks the end of the stream in the queue.
_END: Final = object()


class ThreadedGunzip:
    """``read(size)`` over the gzip file ``raw``, decompressed ahead by one worker thread.

    A read returns at most ``size`` bytes and fewer when a chunk ends (``b""`` only at the
    end of the stream); an error of the worker (a corrupt or truncated stream) is raised by
    the read that reaches it. Use it as a context manager: leaving it stops the worker and
    waits for it, so ``raw`` may be closed afterwards.
    """

    def __init__(self, raw: IO[bytes], *, chunk: int = 256 * 1024, depth: int = 4) -> None:
        self._raw = raw
        self._chunk = chunk
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._data = b""
        self._offset = 0
        self._done = False
        self._thread = threading.Thread(target=self._decompress, name="gunzip", daemon=True)
        self._thread.start()

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` decompressed bytes (``size < 0``: the rest of the current chunk)."""
        if self._offset >= len(self._data) and not self._next():
            return b""
        data, start = self._data, self._offset
        end = len(data) if size < 0 else min(len(data), start + size)
        self._offset = end
        # A whole chunk is handed over as it is; a part is the one copy it costs.
        return data if start == 0 and end == len(data) else data[start:end]

    def _next(self) -> bool:
        """Wait for the worker's next chunk; ``False`` at the end of the stream."""
        if self._done:
            return False
        item = self._queue.get()
        if item is _END:
            self._done = True
            return False
        if isinstance(item, BaseException):
            self._done = True
            raise item
        assert isinstance(item, bytes)
        self._data, self._offset = item, 0
        return True

    def _decompress(self) -> None:
        try:
            with gzip.GzipFile(fileobj=self._raw, mode="rb") as stream:
                while not self._stop.is_set() and (data := stream.read(self._chunk)):
                    self._queue.put(data)
        except BaseException as exc:  # handed over in order: the reader raises it
            self._queue.put(exc)
        else:
            self._queue.put(_END)

    def close(self) -> None:
        """Stop the worker and wait for it: the queue is drained so its put never blocks."""
        self._stop.set()
        while not self._done:
            item = self._queue.get()
            self._done = item is _END or isinstance(item, BaseException)
        self._thread.join()
        self._data, self._offset = b"", 0

    def __enter__(self) -> ThreadedGunzip:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
