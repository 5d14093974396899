"""The PAOS AgentTask store (SQLite, WAL, ``BEGIN IMMEDIATE``)."""

from paos.store.models import NewRecord, RecordRow, RevisionRow, TaskRow
from paos.store.store import AgentTaskStore, NotFound, StoreError, TaskSlotTaken

__all__ = [
    "AgentTaskStore",
    "NewRecord",
    "NotFound",
    "RecordRow",
    "RevisionRow",
    "StoreError",
    "TaskRow",
    "TaskSlotTaken",
]
