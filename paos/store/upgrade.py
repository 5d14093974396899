"""Upgrading an older store's schema on open, once, whoever else opens it at the time."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

type Check = Callable[[sqlite3.Connection], bool]
type Change = Callable[[sqlite3.Connection], None]


def upgrade_once(db: sqlite3.Connection, current: Check, change: Change) -> None:
    """Run ``change`` unless ``current`` says the store is up to date (a no-op read then).

    The check is repeated inside ``BEGIN IMMEDIATE``: two processes opening an old store
    at once upgrade it exactly once, and a failed change leaves it as it was.
    """
    if current(db):
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        if not current(db):
            change(db)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
