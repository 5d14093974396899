"""Task slots: how many AgentTasks may be non-terminal at once, enforced by SQLite.

Every task row carries the runtime its binding occupies (``runtime_key``, see
:func:`paos.binding.runtime_key`) and the slot it holds (``slot``). One unique partial
index over ``slot`` among non-terminal tasks is the whole invariant: two processes racing
to create a task for the same slot get exactly one.

The home's mode decides the slot, and it lives in the database itself (table
``store_settings``), so every process on the home obeys the same rule:

* ``global`` (the default, as the Forge spec says): every task holds the slot
  ``global``, so one AgentTask is non-terminal in the whole home;
* ``per_runtime``: a task holds its runtime's key, so each running skill (cell) has at
  most one non-terminal task and several cells work at once.

Stores written before slots existed (a constant index, no such columns) are upgraded when
opened; their rows keep working: the one non-terminal task of such a store gets its
runtime key from its binding, terminal ones keep ``NULL`` (the index ignores them).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Literal

from doraforge.paos.binding import runtime_key
from doraforge.paos.store.upgrade import upgrade_once

type TaskSlots = Literal["global", "per_runtime"]

TASK_SLOTS: tuple[TaskSlots, ...] = ("global", "per_runtime")
DEFAULT_TASK_SLOTS: TaskSlots = "global"
GLOBAL_SLOT = "global"
#: The index of the slots, and how SQLite words its violation: "the slot is taken".
SLOT_INDEX = "one_active_task_slot"
SLOT_VIOLATION = "UNIQUE constraint failed: tasks.slot"
_ACTIVE = "('executing', 'awaiting_replan', 'cancelling')"
_SETTING = "task_slots"


def migrate(db: sqlite3.Connection) -> None:
    """Bring a store to the slot schema (a no-op read on a current one).

    The check is repeated inside ``BEGIN IMMEDIATE``: two processes opening an old store
    at once upgrade it exactly once.
    """
    upgrade_once(db, _current, _upgrade)


def _current(db: sqlite3.Connection) -> bool:
    indexes = {
        row[0]
        for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks'"
        )
    }
    return SLOT_INDEX in indexes and "one_active_task" not in indexes


def _upgrade(db: sqlite3.Connection) -> None:
    columns = {row[1] for row in db.execute("PRAGMA table_info(tasks)")}
    for column in ("runtime_key", "slot"):
        if column not in columns:
            db.execute(f"ALTER TABLE tasks ADD COLUMN {column} TEXT")
    # Under the old constant index at most one task is non-terminal: it keeps the slot.
    active = db.execute(
        "SELECT t.task_id, b.document_json FROM tasks t JOIN bindings b"
        f" ON b.binding_id = t.binding_id WHERE t.state IN {_ACTIVE} AND t.slot IS NULL"
    ).fetchall()
    for task_id, document in active:
        key = runtime_key(json.loads(document))
        slot = slot_for(mode(db), key)
        db.execute(
            "UPDATE tasks SET runtime_key = ?, slot = ? WHERE task_id = ?", (key, slot, task_id)
        )
    db.execute("DROP INDEX IF EXISTS one_active_task")
    db.execute(f"CREATE UNIQUE INDEX {SLOT_INDEX} ON tasks (slot) WHERE state IN {_ACTIVE}")


def mode(db: sqlite3.Connection) -> TaskSlots:
    """The home's task-slot mode (``global`` when never set)."""
    row = db.execute("SELECT value FROM store_settings WHERE key = ?", (_SETTING,)).fetchone()
    return "per_runtime" if row is not None and row[0] == "per_runtime" else DEFAULT_TASK_SLOTS


def slot_for(slots: TaskSlots, key: str) -> str:
    """The slot a task on runtime ``key`` holds under ``slots``."""
    return key if slots == "per_runtime" else GLOBAL_SLOT


def set_mode(db: sqlite3.Connection, slots: TaskSlots) -> None:
    """Record ``slots`` and move the non-terminal tasks to their slots under it, inside the
    caller's write transaction; ``sqlite3.IntegrityError`` (:data:`SLOT_VIOLATION`) when
    ``global`` is asked while several tasks are non-terminal (nothing is changed then)."""
    db.execute(
        "INSERT INTO store_settings (key, value) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (_SETTING, slots),
    )
    db.execute(
        "UPDATE tasks SET slot = CASE ? WHEN 'per_runtime' THEN COALESCE(runtime_key, ?)"
        f" ELSE ? END WHERE state IN {_ACTIVE}",
        (slots, GLOBAL_SLOT, GLOBAL_SLOT),
    )


def holder(db: sqlite3.Connection, slot: str) -> sqlite3.Row | None:
    """The non-terminal task holding ``slot``, if any."""
    row: sqlite3.Row | None = db.execute(
        f"SELECT * FROM tasks WHERE slot = ? AND state IN {_ACTIVE}", (slot,)
    ).fetchone()
    return row
