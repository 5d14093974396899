"""The agent tasks one registry opens: owned by it, kept active by each call, ended with
it; stale ones are ended (and audited, and named) at start and on each task_create."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from doraforge.paos.agent_tools import AgentTool
from doraforge.paos.errors import PaosError
from doraforge.paos.owners import (
    DEFAULT_IDLE_TIMEOUT_S,
    OwnerLocks,
    end_owned_tasks,
    end_stale_tasks,
)
from doraforge.paos.tasks import TaskService
from doraforge.registry.audit import AuditLog

log = logging.getLogger(__name__)

CREATE = "forge_task_create"
#: A task's activity is written at most this often (each call would be a store write).
TOUCH_EVERY_MS = 1_000


@dataclass
class TaskOwnership:
    """This registry as the owner of the tasks its agents open."""

    locks: OwnerLocks
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    audit: AuditLog | None = None
    owner_id: str | None = None
    _touched: dict[str, int] = field(default_factory=dict, repr=False)

    async def start(self, service: TaskService) -> list[dict[str, Any]]:
        """Claim an owner id, then end the stale tasks earlier registries left."""
        if self.owner_id is None:
            self.owner_id = self.locks.claim()
        try:
            return await self.end_stale(service)
        except PaosError:  # the store is busy: the next task_create tries again
            log.exception("could not end the stale agent tasks at start")
            return []

    async def stop(self, service: TaskService) -> list[dict[str, Any]]:
        """End the tasks this registry owns (bounded), then give the owner id up."""
        if self.owner_id is None:
            return []
        try:
            ended = await end_owned_tasks(service, self.owner_id)
        except PaosError:
            log.exception("could not end the tasks of %s", self.owner_id)
            ended = []
        self._audit(ended)
        self.locks.release(self.owner_id)
        self.owner_id = None
        return ended

    async def end_stale(self, service: TaskService) -> list[dict[str, Any]]:
        """Cancel and finalize stale agent tasks; each one audited and returned."""
        ended = await end_stale_tasks(service, self.locks, idle_timeout_s=self.idle_timeout_s)
        self._audit(ended)
        return ended

    async def call(self, tool: AgentTool, service: TaskService, arguments: Any) -> dict[str, Any]:
        """``tool``'s answer, with the ownership rules around it."""
        ended = await self.end_stale(service) if tool.name == CREATE else []
        answer = await tool(service, arguments)
        if tool.name == CREATE:
            self._opened(service, answer, ended)
        elif isinstance(arguments, dict) and isinstance(arguments.get("task_id"), str):
            self._touch(service, arguments["task_id"])
        return answer

    def _opened(self, service: TaskService, answer: dict[str, Any], ended: list[Any]) -> None:
        """Own the task just opened; say which stale ones were ended, or who holds the
        slot when the open was refused."""
        if answer["ok"]:
            data = answer["data"]
            task_id = (data.get("task") or {}).get("task_id")
            if self.owner_id is not None and isinstance(task_id, str):
                service.store.own_task(task_id, self.owner_id)
            if ended:
                data["ended_stale_tasks"] = ended
            return
        error = answer["error"]  # flat: its fields become the failure's details
        if ended:
            error["ended_stale_tasks"] = ended
        if error.get("code") == "PAOS_TASK_ACTIVE" and error.get("active_task_id"):
            holder = self._holder(service, str(error["active_task_id"]))
            error["holder"] = holder
            error["message"] = f"{error['message']}; {holder['says']}"

    def _holder(self, service: TaskService, task_id: str) -> dict[str, Any]:
        """Who holds ``task_id`` and when it will be ended if it stays idle."""
        owner = service.store.task_owner(task_id)
        if owner is None:
            return {
                "owner": None,
                "says": "it was not opened through a registry (an operator's "
                "`doraforge task run`, or another PAOS client), so only its owner or "
                "`doraforge task cancel` ends it",
            }
        idle_s = max(0, service.store.now_ms() - owner.last_activity_ms) / 1000
        whose = "this registry" if owner.owner_id == self.owner_id else "another registry"
        return {
            "owner": owner.owner_id,
            "idle_s": round(idle_s, 3),
            "idle_timeout_s": self.idle_timeout_s,
            "says": f"{whose}, still running, holds it; its agent last acted {idle_s:.0f} s "
            f"ago, and it is cancelled (idle_timeout) once idle {self.idle_timeout_s:.0f} s",
        }

    def _touch(self, service: TaskService, task_id: str) -> None:
        now = service.store.now_ms()
        if now - self._touched.get(task_id, -TOUCH_EVERY_MS) < TOUCH_EVERY_MS:
            return
        try:
            service.store.touch_task(task_id)
        except PaosError:  # activity is advisory: a busy store never fails the call
            log.warning("could not note the activity of task %s", task_id)
            return
        self._touched[task_id] = now
        if len(self._touched) > 1024:
            self._touched.clear()

    def _audit(self, ended: list[dict[str, Any]]) -> None:
        for notice in ended:
            log.warning("ended task %s (%s)", notice["task_id"], notice["reason"])
            if self.audit is not None:
                self.audit.record_task_ended(notice)
