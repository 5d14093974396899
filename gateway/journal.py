"""The append-only invocation journal.

The Gateway writes an ``admit`` line before it dispatches anything and a ``terminal``
line once an outcome is retained. A restarted Gateway replays the file: invocations that
were in flight read as terminal ``unknown`` (never 404), terminal ones stay readable
within retention. Lines are flushed to the kernel before dispatch, which survives a
Gateway crash; ``fsync=True`` also survives power loss at a latency cost.

Reading back never raises for the content of a line: a torn, garbled or oversized line
is returned as a :class:`JournalLine` with a ``problem`` and whatever identity fields are
still legible in it, so the invocation it names can read ``unknown`` after a restart.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from doraforge.wire import strict_json

type JournalRecord = dict[str, Any]

#: A record is a small JSON object; a longer line is damage, not a record.
MAX_LINE_BYTES = 1 << 20
#: The string fields worth recovering from a damaged line: identity and lookup keys.
SALVAGED_FIELDS = frozenset(
    (
        "id",
        "attempt_id",
        "tool_id",
        "endpoint_id",
        "operation",
        "semantics",
        "caller_id",
        "instance_id",
    )
)
#: The longest id (or other salvaged string) a record may hold.
MAX_ID_CHARS = 512
_STRING_FIELD = re.compile(rb'"([a-z_]{1,32})"\s*:\s*"((?:[^"\\\x00-\x1f]|\\.){1,512})"')


@dataclass(frozen=True)
class JournalLine:
    """One line read back: its 1-based number and the record, or why it is unreadable.

    ``salvaged`` holds the :data:`SALVAGED_FIELDS` still legible in an unreadable line;
    a blank line has neither a record nor a problem.
    """

    number: int
    record: JournalRecord | None
    problem: str | None = None
    salvaged: dict[str, str] = field(default_factory=dict)


@dataclass
class JournalHealth:
    """What the Tool Runtime has seen go wrong with its journal since it started.

    ``degraded`` means a record that should be in the file is not (its write failed after
    dispatch); until a compaction rewrites the file from memory, a restart would read the
    affected invocations as ``unknown``.
    """

    skipped_records: int = 0
    write_failures: int = 0
    degraded: bool = False
    last_error: str | None = None


class Journal(Protocol):
    """Where the Tool Runtime makes invocation facts durable."""

    def append(self, record: JournalRecord) -> None:
        """Durably append one record; ``OSError`` when it could not be written."""
        ...

    def replay(self) -> list[JournalLine]:
        """Every line in append order; an unreadable one is reported, never raised."""
        ...

    def compact(self, records: Iterable[JournalRecord]) -> None:
        """Atomically replace the journal with ``records``; on ``OSError`` the old one stays."""
        ...


def encode(record: JournalRecord) -> bytes:
    """One record as a compact JSON line (``ValueError`` for NaN or infinities)."""
    return (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def read_line(number: int, raw: bytes) -> JournalLine:
    """Parse one raw line strictly; damage becomes a ``problem``, never an exception."""
    if not raw.strip():
        return JournalLine(number, None)  # a blank line holds no record
    torn = not raw.endswith(b"\n")
    if len(raw) >= MAX_LINE_BYTES and torn:
        return JournalLine(number, None, f"longer than {MAX_LINE_BYTES} bytes", salvage(raw))
    try:
        # The Gateway wrote only strict values, so anything else is damage; nesting is
        # bounded by what the parser can reach (results are up to the Wire's 64 levels).
        value = strict_json.loads(raw, structure=False)
    except strict_json.JSONRefused as exc:
        kind = "torn last line" if torn else "not JSON"
        return JournalLine(number, None, f"{kind}: {exc.message}", salvage(raw))
    if not isinstance(value, dict):
        return JournalLine(number, None, f"a JSON {type(value).__name__}, not an object")
    return JournalLine(number, value)


def salvage(raw: bytes) -> dict[str, str]:
    """The :data:`SALVAGED_FIELDS` legible as ``"name":"value"`` pairs in a damaged line."""
    return legible_fields(_string_pairs(raw))


def legible_fields(pairs: Iterable[tuple[str, Any]]) -> dict[str, str]:
    """The :data:`SALVAGED_FIELDS` among ``pairs`` whose value is a string of 1 to
    :data:`MAX_ID_CHARS` characters; the first legible one of each name wins."""
    found: dict[str, str] = {}
    for name, value in pairs:
        if name in SALVAGED_FIELDS and name not in found and _legible(value):
            found[name] = value
    return found


def _legible(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS


def _string_pairs(raw: bytes) -> Iterator[tuple[str, Any]]:
    for match in _STRING_FIELD.finditer(raw):
        name = match.group(1).decode("ascii")
        if name not in SALVAGED_FIELDS:
            continue  # decode only what could be kept
        try:
            yield name, json.loads(b'"' + match.group(2) + b'"')
        except ValueError:
            continue


class MemoryJournal:
    """An in-process journal for tests and for Gateways that need no restart story."""

    def __init__(self) -> None:
        self.records: list[JournalRecord] = []

    def append(self, record: JournalRecord) -> None:
        self.records.append(json.loads(encode(record)))

    def replay(self) -> list[JournalLine]:
        # Deep copies, as a file replay would give: recovery may change what it reads.
        return [
            JournalLine(n, json.loads(encode(record))) for n, record in enumerate(self.records, 1)
        ]

    def compact(self, records: Iterable[JournalRecord]) -> None:
        self.records = [json.loads(encode(record)) for record in records]


class FileJournal:
    """A JSON-lines journal file with one writer (the Gateway process).

    An append that fails part-way (``ENOSPC``, ``EIO``, a file-size limit) cuts its
    partial line off again, so the file keeps whole lines only; if even that fails, the
    next record starts on a fresh line so that only the damaged one is lost.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._fd = -1
        self._size = 0
        self._torn = False
        self._reopen()
        self.appended = 0

    def _reopen(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        self._size = os.fstat(self._fd).st_size
        # A crash mid-write leaves a torn tail; a new record must not extend it.
        self._torn = self._size > 0 and os.pread(self._fd, 1, self._size - 1) != b"\n"

    def append(self, record: JournalRecord) -> None:
        data = (b"\n" if self._torn else b"") + encode(record)
        try:
            self._write_all(data)
            if self._fsync:
                os.fsync(self._fd)
        except OSError:
            self._cut_back()
            raise
        self._size += len(data)
        self._torn = False
        self.appended += 1

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            if written <= 0:  # a regular file never does this; refuse to spin if one does
                raise OSError(f"short write to {self.path}")
            view = view[written:]

    def _cut_back(self) -> None:
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            self._torn = True

    def replay(self) -> list[JournalLine]:
        with self.path.open("rb") as handle:
            return [read_line(number, raw) for number, raw in enumerate(_lines(handle), 1)]

    def compact(self, records: Iterable[JournalRecord]) -> None:
        temporary = self.path.with_suffix(self.path.suffix + ".tmp")
        try:
            with temporary.open("wb") as handle:
                for record in records:
                    handle.write(encode(record))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            temporary.unlink(missing_ok=True)  # a full disk needs that space back
            raise
        self._reopen()
        self.appended = 0

    def close(self) -> None:
        """Release the file descriptor."""
        os.close(self._fd)
        self._fd = -1


def _lines(handle: IO[bytes]) -> Iterator[bytes]:
    """Lines of at most :data:`MAX_LINE_BYTES`; the rest of a longer one is dropped."""
    while raw := handle.readline(MAX_LINE_BYTES):
        yield raw
        if len(raw) == MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
