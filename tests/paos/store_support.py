"""A real SQLite fault for AgentTask store tests: another connection holds the write lock."""

from __future__ import annotations

import sqlite3
from pathlib import Path


class WriteLock:
    """Another process's connection holding the store's write lock (readers still read).

    While it is held, every store write fails with ``database is locked`` once the
    store's busy timeout has passed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    @property
    def held(self) -> bool:
        return self._db is not None

    def hold(self) -> None:
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if self._db is not None:
            self._db.execute("ROLLBACK")
            self._db.close()
            self._db = None
