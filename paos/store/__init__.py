"""The PAOS AgentTask store (SQLite, WAL, ``BEGIN IMMEDIATE``)."""

from doraforge.paos.store.models import NewRecord, RecordRow, RevisionRow, TaskOwner, TaskRow
from doraforge.paos.store.store import (
    AgentTaskStore,
    NotFound,
    StoreError,
    StoreUnavailable,
    TaskSlotTaken,
)

__all__ = [
    "AgentTaskStore",
    "NewRecord",
    "NotFound",
    "RecordRow",
    "RevisionRow",
    "StoreError",
    "StoreUnavailable",
    "TaskOwner",
    "TaskRow",
    "TaskSlotTaken",
]
