"""The append-only invocation journal.

The Gateway writes an ``admit`` line before it dispatches anything and a ``terminal``
line once an outcome is retained. A restarted Gateway replays the file: invocations that
were in flight read as terminal ``unknown`` (never 404), terminal ones stay readable
within retention. Lines are flushed to the kernel before dispatch, which survives a
Gateway crash; ``fsync=True`` also survives power loss at a latency cost.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

type JournalRecord = dict[str, Any]


class Journal(Protocol):
    """Where the Tool Runtime makes invocation facts durable."""

    def append(self, record: JournalRecord) -> None:
        """Durably append one record."""
        ...

    def replay(self) -> list[JournalRecord]:
        """Return every readable record in append order."""
        ...

    def compact(self, records: Iterable[JournalRecord]) -> None:
        """Atomically replace the journal with ``records``."""
        ...


class MemoryJournal:
    """An in-process journal for tests and for Gateways that need no restart story."""

    def __init__(self) -> None:
        self.records: list[JournalRecord] = []

    def append(self, record: JournalRecord) -> None:
        self.records.append(json.loads(json.dumps(record)))

    def replay(self) -> list[JournalRecord]:
        return [dict(record) for record in self.records]

    def compact(self, records: Iterable[JournalRecord]) -> None:
        self.records = [dict(record) for record in records]


class FileJournal:
    """A JSON-lines journal file; a torn last line (crash mid-write) is skipped."""

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.appended = 0

    def append(self, record: JournalRecord) -> None:
        line = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
        os.write(self._fd, line.encode("utf-8"))
        if self._fsync:
            os.fsync(self._fd)
        self.appended += 1

    def replay(self) -> list[JournalRecord]:
        records: list[JournalRecord] = []
        with self.path.open("rb") as handle:
            for raw in handle:
                try:
                    record = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue  # a torn write from a crash; everything before it is intact
                if isinstance(record, dict) and isinstance(record.get("k"), str):
                    records.append(record)
        return records

    def compact(self, records: Iterable[JournalRecord]) -> None:
        temporary = self.path.with_suffix(self.path.suffix + ".tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.appended = 0

    def close(self) -> None:
        """Release the file descriptor."""
        os.close(self._fd)
