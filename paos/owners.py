"""Tasks end with their owner: an agent task whose owner stopped, or that sat idle past a
limit, is cancelled ``owner_stopped`` / ``idle_timeout`` instead of holding its slot. An
owner runs while it holds the ``flock`` on its file (the kernel drops it however it ends)."""

from __future__ import annotations

import fcntl
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from doraforge.paos.finalize import cancel_task
from doraforge.paos.store import StoreError, TaskOwner
from doraforge.paos.tasks import TaskService

log = logging.getLogger(__name__)

type EndReason = Literal["owner_stopped", "idle_timeout"]

#: How long an agent's task may go without a call before the next start ends it.
DEFAULT_IDLE_TIMEOUT_S = 600.0
#: How long ending a stale task waits for its cancelled calls to report their end.
SETTLE_S = 10.0


class OwnerLiveness(Protocol):
    """Tells whether the owner that opened a task still runs."""

    def alive(self, owner_id: str) -> bool: ...


@dataclass(frozen=True)
class StaleTask:
    """An active task the rule ends, and why."""

    owner: TaskOwner
    reason: EndReason
    idle_s: float

    def notice(self, state: str) -> dict[str, Any]:
        """What an agent, the audit and the log are told about it."""
        return {
            "task_id": self.owner.task_id,
            "reason": self.reason,
            "owner_id": self.owner.owner_id,
            "idle_s": round(self.idle_s, 3),
            "state": state,
        }


class OwnerLocks:
    """Owners as lock files under ``folder``: a running owner holds its file's ``flock``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._held: dict[str, int] = {}

    def claim(self) -> str:
        """A new owner id, held by this process until :meth:`release` (or its end)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        owner_id = f"owner_{os.getpid()}_{uuid.uuid4().hex[:12]}"
        fd = os.open(self._path(owner_id), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._held[owner_id] = fd
        return owner_id

    def release(self, owner_id: str) -> None:
        """Let ``owner_id`` go (its file is removed: it never runs again)."""
        fd = self._held.pop(owner_id, None)
        if fd is not None:
            self._path(owner_id).unlink(missing_ok=True)
            os.close(fd)

    def alive(self, owner_id: str) -> bool:
        """Whether ``owner_id``'s process still holds its lock (a missing file: gone)."""
        if owner_id in self._held:
            return True
        try:
            fd = os.open(self._path(owner_id), os.O_RDWR)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops the lock this call may have taken
        self._path(owner_id).unlink(missing_ok=True)
        return False

    def _path(self, owner_id: str) -> Path:
        # Owner ids come from the store; only a plain name may become a path.
        if not owner_id.replace("_", "").isalnum():
            raise ValueError(f"not an owner id: {owner_id!r}")
        return self.folder / f"{owner_id}.lock"


def stale_tasks(
    owners: list[TaskOwner], liveness: OwnerLiveness, *, now_ms: int, idle_timeout_s: float
) -> list[StaleTask]:
    """The tasks among ``owners`` whose owner stopped or that sat idle past the limit."""
    stale = []
    for owner in owners:
        idle_s = max(0, now_ms - owner.last_activity_ms) / 1000
        if not liveness.alive(owner.owner_id):
            stale.append(StaleTask(owner, "owner_stopped", idle_s))
        elif idle_s >= idle_timeout_s:
            stale.append(StaleTask(owner, "idle_timeout", idle_s))
    return stale


async def end_stale_tasks(
    service: TaskService,
    liveness: OwnerLiveness,
    *,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    settle_timeout_s: float = SETTLE_S,
) -> list[dict[str, Any]]:
    """Cancel and finalize every stale agent task (:func:`stale_tasks`); one notice each."""
    found = stale_tasks(
        service.store.owned_active_tasks(),
        liveness,
        now_ms=service.store.now_ms(),
        idle_timeout_s=idle_timeout_s,
    )
    ended = [await _end(service, stale, settle_timeout_s) for stale in found]
    return [notice for notice in ended if notice is not None]


async def end_owned_tasks(
    service: TaskService, owner_id: str, *, settle_timeout_s: float = SETTLE_S
) -> list[dict[str, Any]]:
    """Cancel and finalize the active tasks ``owner_id`` holds (its orderly stop)."""
    now_ms = service.store.now_ms()
    ended = [
        await _end(
            service,
            StaleTask(owner, "owner_stopped", (now_ms - owner.last_activity_ms) / 1000),
            settle_timeout_s,
        )
        for owner in service.store.owned_active_tasks()
        if owner.owner_id == owner_id
    ]
    return [notice for notice in ended if notice is not None]


async def _end(
    service: TaskService, stale: StaleTask, settle_timeout_s: float
) -> dict[str, Any] | None:
    """Cancel one stale task; ``None`` when it ended meanwhile (finalized by its agent)."""
    task_id = stale.owner.task_id
    try:
        described = await cancel_task(
            service, task_id, settle_timeout_s=settle_timeout_s, reason=stale.reason
        )
    except StoreError as exc:
        if exc.code not in ("PAOS_TASK_STATE", "PAOS_TASK_TERMINAL"):
            raise
        return None
    notice = stale.notice(described["task"]["state"])
    notice["unknown_records"] = described["task"]["outcome"].get("unknown_records", [])
    log.warning("task %s ended %s: %s", task_id, notice["state"], stale.reason)
    return notice
