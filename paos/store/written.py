"""Live records as this connection last wrote them, so an UPDATE need not read its row back.

A record's UPDATE returns the whole row. Reading it back (``RETURNING *``) cost a bound
Action as much as one of its three transactions. The row is already known when this
connection wrote every change to it: the store's own last write plus the columns the
UPDATE sets is the row. That holds only while no *other* connection (another process, or
another store object in this one) has committed anything, and SQLite says exactly that:
``PRAGMA data_version`` changes when another connection commits, never for this
connection's own commits. Read inside the write transaction (which holds the write lock,
so nothing else commits until it ends), an unchanged version proves the kept row exact;
a changed one drops every kept row and the caller reads the row back.

Terminal records are not kept: a terminal record never changes again. The store uses its
connection from one thread, as its transactions already require.
"""

from __future__ import annotations

import sqlite3

from doraforge.paos.store.models import RecordRow

_KEPT = 256  # live records of one process: a few per task, far fewer than this


class WrittenRows:
    """Rows of live records written through one connection, exact while no other
    connection has committed since (``PRAGMA data_version``)."""

    __slots__ = ("_probe", "_rows", "_version")

    def __init__(self, db: sqlite3.Connection) -> None:
        # A cursor of its own that returns plain tuples, whatever the connection's
        # row_factory: the probe runs twice per bound Action.
        self._probe = db.cursor()
        self._probe.row_factory = None
        self._rows: dict[str, RecordRow] = {}
        self._version: int | None = None

    def exact(self, record_id: str) -> RecordRow | None:
        """The kept row of ``record_id`` if it is still exact, else ``None``; to be called
        inside a write transaction on the connection every kept row came from."""
        version = self._probe.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self._rows.clear()
            self._version = version
            return None
        return self._rows.get(record_id)

    def keep(self, row: RecordRow) -> None:
        """Remember ``row`` as committed by this connection (a terminal one is let go)."""
        rows = self._rows
        if row.terminal:
            rows.pop(row.record_id, None)
            return
        rows[row.record_id] = row
        if len(rows) > _KEPT:
            del rows[next(iter(rows))]
