"""The ``tasks`` scope: AgentTask summaries, verdicts and criteria from the task store.

Each item: the task's cell (skill, version and the runtime instance its binding froze),
state, verification mode, the current
revision's verdict, how many criteria it carries and how many passed, failed or were
inconclusive, and its times. The task id is only ever an opaque reference. Never the
call arguments, raw tool outputs or physical parameters: criteria are counted and named
by id and kind, never their predicates, targets or values; the verdict's own sentences
are left out too (they may quote measured values). The goal is private matching text
with every number in it replaced by ``#``: its words match a search, and a target an
agent spelled into it ("place it at x=0.42") cannot reach even a redacted summary.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore, TaskRow
from doraforge.registry.context.scopes._common import HomeSource, iso_ms, task_store
from doraforge.registry.context.source import (
    ContextItem,
    Scalar,
    Snapshot,
    opaque_ref,
)

ROUTE = "/console/#/tasks"
_NUMBER = re.compile(r"[-+]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:[eE][-+]?\d+)?")


def task_ref(task_id: str) -> str:
    """The opaque reference of a task (evidence items name their task by it)."""
    return opaque_ref("tasks", task_id)


def _criteria(contract: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    listed = contract.get("success_criteria")
    return [c for c in listed if isinstance(c, Mapping)] if isinstance(listed, list) else []


def _verdict(store: AgentTaskStore, task_id: str) -> tuple[Mapping[str, Any] | None, int]:
    """The current (latest) revision's verdict, ``None`` while undecided, and how many
    revisions the task has."""
    revisions = store.revisions(task_id)
    verdict = revisions[-1].verdict if revisions else None
    return (verdict if isinstance(verdict, Mapping) else None), len(revisions)


def _result_counts(verdict: Mapping[str, Any] | None) -> dict[str, int]:
    results = verdict.get("results") if verdict is not None else None
    statuses = Counter(str(r.get("status")) for r in results or [] if isinstance(r, Mapping))
    return {f"criteria_{status}": statuses[status] for status in ("pass", "fail", "inconclusive")}


def cell_of(store: AgentTaskStore, binding_id: str) -> tuple[str | None, str | None, str | None]:
    """The skill, version and runtime instance a task's binding froze (its cell)."""
    document = store.binding(binding_id)
    fields = (document.get(key) for key in ("skill", "version", "runtime_instance"))
    skill, version, instance = (str(value) if value else None for value in fields)
    return skill, version, instance


def _item(store: AgentTaskStore, task: TaskRow) -> ContextItem:
    skill, version, instance = cell_of(store, task.binding_id)
    verdict, revisions = _verdict(store, task.task_id)
    criteria = _criteria(task.contract)
    status = verdict.get("status") if verdict is not None else None
    metadata: dict[str, Scalar] = {
        "skill": skill,
        "skill_version": version,
        "runtime_instance_id": instance,
        "state": task.state,
        "mode": str(task.contract.get("mode") or "") or None,
        "verdict": str(status) if status is not None else None,
        "created_at": iso_ms(task.created_at_ms),
        "updated_at": iso_ms(task.updated_at_ms),
        "terminal_at": iso_ms(task.terminal_at_ms),
    }
    named = " ".join(f"{c.get('id')} ({c.get('kind')})" for c in criteria)
    return ContextItem(
        ref=task_ref(task.task_id),
        scope="tasks",
        kind="task",
        label=f"{skill or 'unknown skill'} task: {task.state}"
        + (f", verdict {status}" if status is not None else ""),
        route=ROUTE,
        metadata=metadata,
        counts={
            "criteria": len(criteria),
            "revisions": revisions,
            "replans_used": task.replans_used,
            "evidence": len(store.evidence(task.task_id)),
            **_result_counts(verdict),
        },
        text=f"{_NUMBER.sub('#', task.goal)}\ncriteria: {named}".strip(),
    )


def _read(home: PaosHome, limit: int) -> Snapshot:
    with task_store(home, "tasks") as store:
        if store is None:
            return Snapshot(())
        rows = store.tasks(limit + 1)  # newest first; one more says whether more exist
        items = tuple(_item(store, task) for task in rows[:limit])
    return Snapshot(items, source_truncated=len(rows) > limit)


class TasksSource(HomeSource):
    """The tasks scope of ``home``'s task store; raises :class:`SourceError`
    ``CONTEXT_STORE_UNAVAILABLE`` when the store cannot be read. A home with no store
    yet has no tasks (nothing is created by reading)."""

    scope_name = "tasks"

    def read(self, limit: int) -> Snapshot:
        return _read(self._home, limit)
