"""What keeps a skill runtime from stopping: task bindings and live invocations.

A normal stop is refused while the PAOS store has a non-terminal AgentTask bound to the
skill (and its live Actions and Sessions), or while the Gateway counts non-terminal
invocations. A forced stop asks the Gateway to cancel or stop every invocation PAOS knows
the id of; the Gateway has no route that lists all invocations, so ones PAOS never saw
are reported by count only. Nothing here rewrites execution records: a force stop does
not change execution truth.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doraforge.paos.store import AgentTaskStore
from doraforge.paos.store.models import LIVE_RECORD_STATES, RecordRow
from doraforge.skill_runtime import gateway_probe


def bound_task(store: AgentTaskStore, skill: str) -> tuple[str, list[RecordRow]] | None:
    """The active task bound to ``skill`` and its live records, or ``None``."""
    task = store.active_task_of(skill)
    if task is None:
        return None
    live = [r for r in store.records(task.task_id) if r.state in LIVE_RECORD_STATES]
    return task.task_id, live


def blockers(
    store: AgentTaskStore | None, skill: str, gateway_url: str, *, token: str | None = None
) -> list[dict[str, Any]]:
    """Every reason not to stop ``skill`` now (empty when a normal stop may proceed).

    ``token`` is the runtime's Gateway token: without the right one the Gateway's count
    of live invocations cannot be read and would look like none.
    """
    found: list[dict[str, Any]] = []
    bound = bound_task(store, skill) if store is not None else None
    if bound is not None:
        task_id, live = bound
        found.append({"kind": "task_binding", "task_id": task_id})
        found += [
            {
                "kind": "session" if r.semantics == "session" else "invocation",
                "record_id": r.record_id,
                "invocation_id": r.invocation_id,
                "state": r.state,
            }
            for r in live
        ]
    for tool_id, count in gateway_probe.active_invocations(gateway_url, token=token).items():
        found.append({"kind": "gateway_invocations", "tool_id": tool_id, "active": count})
    return found


def refusal(skill: str, found: list[dict[str, Any]]) -> str:
    """Why a normal stop of ``skill`` is refused, naming the task and the live invocations
    in ``found`` (:func:`blockers`), and the command that clears each."""
    tasks = [b["task_id"] for b in found if b["kind"] == "task_binding"]
    # The Gateway's count includes the task's own invocations: the larger one is the truth.
    known = sum(1 for b in found if b["kind"] in ("invocation", "session"))
    counted = sum(int(b["active"]) for b in found if b["kind"] == "gateway_invocations")
    live = max(known, counted)
    force = f"stop it anyway with `doraforge skill stop {skill} --force` (audited)"
    if tasks:
        return (
            f"{skill!r} is bound to task {tasks[0]} ({live} live invocation(s)); cancel the "
            f"task with `doraforge task cancel {tasks[0]}`, or {force}"
        )
    return f"{skill!r} has {live} live invocation(s); let them end, or {force}"


def request_stops(
    store: AgentTaskStore | None, skill: str, gateway_url: str, *, token: str | None = None
) -> list[Any]:
    """Ask the Gateway to cancel (Actions) or stop (Sessions) every known live invocation."""
    bound = bound_task(store, skill) if store is not None else None
    if bound is None:
        return []
    return [
        gateway_probe.request_stop(
            gateway_url,
            r.invocation_id,
            "stop" if r.semantics == "session" else "cancel",
            token=token,
        )
        for r in bound[1]
        if r.invocation_id
    ]


def open_store(path: Path) -> AgentTaskStore | None:
    """The home's store when it exists (a home that never ran a task has no bindings)."""
    return AgentTaskStore(path) if path.exists() else None
