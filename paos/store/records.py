"""The ``records`` table's schema (``records.sql``) and the upgrade of older stores to it.

The first schema wrote the table's CHECK constraints and its terminal trigger as
``x IN ('a', 'b', ...)``. SQLite builds a constant IN list of more than two values into a
temporary b-tree every time a statement runs, and a bound Action runs three statements on
this table: that was a tenth of an Action's accounting. ``records.sql`` says the same
thing as chains of equalities, and fires the identity trigger only on UPDATEs that set a
column it guards.

A CHECK constraint cannot be altered in place, so a store of the first schema is rebuilt
when opened: inside ``BEGIN IMMEDIATE`` (two processes opening it at once upgrade it once)
the old table is renamed, the new one created, every row copied with its rowid (creation
order is ``created_at_ms, rowid``) and the old table dropped. Older code opening an
upgraded store finds every name it would create already there, with the same meaning.
"""

from __future__ import annotations

import re
import sqlite3
from importlib.resources import files

from doraforge.paos.store.upgrade import upgrade_once

SQL = (files(__package__) / "records.sql").read_text(encoding="utf-8")

_COLUMNS = (
    "record_id, task_id, revision_id, tool_id, semantics, ownership, caller_id,"
    " arguments_sha256, spec_sha256, state, invocation_id, attempt_id, result_json,"
    " error_json, cancel_json, created_at_ms, updated_at_ms, terminal_at_ms"
)
_OLD = "records_before_upgrade"
_TRIGGERS = ("terminal_record_frozen", "record_identity_frozen", "records_kept")
_IN_LIST = re.compile(r"\bIN\s*\(", re.IGNORECASE)


def statements(script: str) -> list[str]:
    """``script`` split into complete SQL statements (a trigger's body stays whole)."""
    done: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        if not pending and line.lstrip().startswith("--"):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            done.append(pending.strip())
            pending = ""
    return done


def migrate(db: sqlite3.Connection) -> None:
    """Bring the ``records`` table to ``records.sql`` (a no-op read on a current store).

    Called after ``records.sql`` ran, so the table exists; the check is repeated inside
    ``BEGIN IMMEDIATE``.
    """
    upgrade_once(db, current, _rebuild)


def current(db: sqlite3.Connection) -> bool:
    """Whether the table and its triggers are the ``records.sql`` ones (no IN lists, the
    identity trigger bound to the columns it guards)."""
    sql = dict(
        db.execute(
            "SELECT name, sql FROM sqlite_master WHERE tbl_name = 'records' AND sql IS NOT NULL"
        ).fetchall()
    )
    identity = sql.get("record_identity_frozen", "")
    return (
        not _IN_LIST.search(sql.get("records", ""))
        and not _IN_LIST.search(sql.get("terminal_record_frozen", ""))
        and " UPDATE OF " in " ".join(identity.split()).upper()
    )


def _rebuild(db: sqlite3.Connection) -> None:
    db.execute(f"ALTER TABLE records RENAME TO {_OLD}")
    # The old table's triggers and index went with it; their names are the new ones'.
    for trigger in _TRIGGERS:
        db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    db.execute("DROP INDEX IF EXISTS records_by_task")
    for statement in statements(SQL):
        db.execute(statement)
    db.execute(
        f"INSERT INTO records (rowid, {_COLUMNS}) SELECT rowid, {_COLUMNS} FROM {_OLD}"
        " ORDER BY rowid"
    )
    db.execute(f"DROP TABLE {_OLD}")
