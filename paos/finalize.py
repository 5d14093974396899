"""Finishing AgentTasks: finalize with verification, cancel, and recovery revisions.

``finalize`` first reconciles (reads only), refuses while Actions or task-owned Sessions
are still live, validates the evidence bundle (re-hashing the bytes on disk), runs the
contract's verifiers, decides the verdict and applies the mode. Experience is recorded
last and fail-open: it never changes a task, a record or a verification attempt.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doraforge.paos.binding import BindingError
from doraforge.paos.errors import ForgeHttpError, ForgeTimeout, ForgeTransportError
from doraforge.paos.evidence import EvidenceArtifact, validate_bundle
from doraforge.paos.store import StoreError, TaskRow
from doraforge.paos.tasks import TaskError, TaskService
from doraforge.paos.verify.aggregate import Verdict, apply_mode, decide
from doraforge.paos.verify.contract import parse_contract
from doraforge.paos.verify.protocol import CriterionResult, QueryFn, VerificationContext
from doraforge.paos.verify.registry import VerifierRegistry, default_registry, run_criteria

if TYPE_CHECKING:
    from doraforge.paos.experience import Lesson

log = logging.getLogger(__name__)

_LIVE = frozenset({"intent", "indeterminate", "accepted", "running", "stopping"})
DEFAULT_MAX_AGE_S = 5.0  # a frame older than this when received is stale evidence


async def finalize(
    service: TaskService, task_id: str, registry: VerifierRegistry | None = None
) -> dict[str, Any]:
    """Aggregate the active revision's facts, verify, and end or replan the task."""
    task = service.store.task(task_id)
    if task.state != "executing":
        raise TaskError("PAOS_TASK_STATE", f"task is {task.state}; finalize needs executing")
    await service.reconcile(task_id)
    revision = service.store.current_revision(task_id)
    records = service.store.records(task_id, revision.revision_id)
    _refuse_live_work(records)
    contract = parse_contract(task.contract)
    execution_ok = all(r.state == "completed" for r in records if r.semantics != "session")
    verdict = None
    if contract.mode != "off":
        verdict = await _verdict(service, task, revision.revision_id, registry)
        service.store.set_verdict(revision.revision_id, verdict.to_dict())
    outcome = apply_mode(contract.mode, execution_ok, verdict)
    facts = {
        "execution_ok": execution_ok,
        "verdict": None if verdict is None else verdict.status,
        "revision_id": revision.revision_id,
    }
    service.store.transition(task_id, outcome, allowed_from={"executing"}, outcome=facts)
    if outcome != "awaiting_replan":
        _remember(service, task_id)
    return service.describe(task_id)


async def begin_revision(service: TaskService, task_id: str, reason: str) -> dict[str, Any]:
    """Append a revision after a recovery verdict, within the deadline."""
    task = service.store.task(task_id)
    contract = parse_contract(task.contract)
    if _deadline_passed(task, contract.deadline_s):
        raise TaskError("PAOS_DEADLINE_PASSED", "the task's deadline has passed")
    service.store.begin_revision(task_id, f"rev_{uuid.uuid4().hex}", reason)
    return service.describe(task_id)


async def cancel_task(
    service: TaskService,
    task_id: str,
    settle_timeout_s: float = 10.0,
    *,
    reason: str = "agent_requested",
) -> dict[str, Any]:
    """Cancel live Actions, stop task-owned Sessions, wait (bounded), end ``cancelled``.

    ``reason`` (PhyAgentOS's default ``agent_requested``; ``interrupted``,
    ``owner_stopped``, ``idle_timeout`` when the task's owner ended it) is recorded in the
    outcome. Each record keeps the outcome its provider reported; one still live when the
    wait ends, or whose Gateway no longer answers, is recorded ``unknown`` (never
    ``failed``, never sent again) and named in the outcome's ``unknown_records``.
    """
    await request_ends(service, task_id)
    await _settle(service, task_id, settle_timeout_s)
    return end_cancelled(service, task_id, reason=reason)


async def request_ends(service: TaskService, task_id: str) -> None:
    """Move the task to ``cancelling`` and ask the Gateway to cancel each live Action and
    stop each task-owned Session (requests only: nothing here waits for them to end)."""
    service.store.transition(
        task_id, "cancelling", allowed_from={"executing", "awaiting_replan", "cancelling"}
    )
    # Read first: an Action whose admission was cut short has no invocation id yet.
    await _reconciled(service, task_id)
    for record in service.store.records(task_id):
        if record.state in _LIVE and record.invocation_id is not None:
            await _request_end(service, task_id, record)


def end_cancelled(service: TaskService, task_id: str, *, reason: str) -> dict[str, Any]:
    """End a cancelling (or still active) task ``cancelled`` at once, without waiting or
    calling anything: every record still live is recorded ``unknown``. What a cancel ends
    with, and what a second Ctrl-C leaves when it cuts the wait short."""
    live = [r.record_id for r in service.store.records(task_id) if _owned_live(r.public())]
    unknown = [record_id for record_id in live if _recorded_unknown(service, record_id)]
    service.store.transition(
        task_id,
        "cancelled",
        allowed_from={"executing", "awaiting_replan", "cancelling"},
        outcome={"cancelled": True, "reason": reason, **_named("unknown_records", unknown)},
    )
    _remember(service, task_id)
    return service.describe(task_id)


_UNCONFIRMED = {
    "code": "PAOS_CANCEL_UNCONFIRMED",
    "message": "a cancel was requested but the provider did not report how the call ended; "
    "its physical outcome is unknown: check the cell before moving it again",
}
_UNREACHABLE = (ForgeHttpError, ForgeTimeout, ForgeTransportError, BindingError)


def _named(key: str, ids: list[str]) -> dict[str, list[str]]:
    """``{key: ids}``, or nothing when there are none (a clean cancel's outcome stays as
    it always was)."""
    return {key: ids} if ids else {}


def _recorded_unknown(service: TaskService, record_id: str) -> bool:
    """Record ``record_id`` ``unknown``; ``False`` when another process (an agent polling
    its result) recorded how it ended first: a terminal record never changes."""
    try:
        service.store.record_terminal(record_id, "unknown", error=_UNCONFIRMED)
    except StoreError as exc:
        if exc.code != "PAOS_RECORD_TERMINAL":
            raise
        return False
    return True


def _owned_live(record: dict[str, Any]) -> bool:
    """A live Action or task-owned Session: what a cancelled task must not leave open."""
    owned = record["semantics"] != "session" or record["ownership"] == "task"
    return bool(record["state"] in _LIVE and owned)


async def _reconciled(service: TaskService, task_id: str) -> list[dict[str, Any]] | None:
    """The task's records read from the Gateway, or ``None`` when it does not answer."""
    try:
        return await service.reconcile(task_id)
    except _UNREACHABLE as exc:
        log.warning("task %s: could not reconcile its records (%s)", task_id, exc)
        return None


async def _request_end(service: TaskService, task_id: str, record: Any) -> None:
    """Ask the Gateway to cancel an Action or stop a task-owned Session; a Gateway that
    does not answer leaves the record live (then ``unknown`` once the wait ends)."""
    try:
        if record.semantics == "action":
            await service.cancel(task_id, record.record_id)
        elif record.semantics == "session" and record.ownership == "task":
            await service.stop(task_id, record.record_id)
    except _UNREACHABLE as exc:
        log.warning("task %s: could not ask %s to end (%s)", task_id, record.tool_id, exc)


async def _settle(service: TaskService, task_id: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        records = await _reconciled(service, task_id)
        if records is None or not any(_owned_live(r) for r in records):
            return
        if time.monotonic() >= deadline:
            return
        await asyncio.sleep(0.05)


def _refuse_live_work(records: list[Any]) -> None:
    live_actions = [r.record_id for r in records if r.semantics == "action" and r.state in _LIVE]
    if live_actions:
        raise TaskError(
            "PAOS_ACTIONS_LIVE",
            "Actions are still running; wait or cancel them",
            retryable=True,
            details={"records": live_actions},
        )
    owned = [
        r.record_id
        for r in records
        if r.semantics == "session" and r.ownership == "task" and r.state in _LIVE
    ]
    if owned:
        raise TaskError(
            "PAOS_SESSIONS_LIVE",
            "task-owned Sessions must be stopped before finalize",
            details={"records": owned},
        )


async def _verdict(
    service: TaskService, task: TaskRow, revision_id: str, registry: VerifierRegistry | None
) -> Verdict:
    contract = parse_contract(task.contract)
    evidence = [a for a in service.store.evidence(task.task_id) if a["revision_id"] == revision_id]
    records = service.store.records(task.task_id, revision_id)
    bundle = validate_bundle(
        [EvidenceArtifact.from_dict(a) for a in evidence],
        workspace=service.workspace,
        task_id=task.task_id,
        required_sources=contract.evidence_policy.required_sources,
        window={
            r.record_id: (r.terminal_at_ms or 0) * 1_000_000
            for r in records
            if r.semantics == "action"
        },
        max_age_s=contract.evidence_policy.max_age_s or DEFAULT_MAX_AGE_S,
    )
    attempt: dict[str, Any] = {
        "attempt_id": f"ver_{uuid.uuid4().hex}",
        "bundle": {"ok": bundle.ok, "problems": bundle.problems},
    }
    if not bundle.ok:
        # A bundle that fails validation never reaches a verifier: the verdict fails closed.
        results = [
            CriterionResult(c.id, "inconclusive", "evidence bundle refused")
            for c in contract.success_criteria
        ]
    else:
        context = VerificationContext(
            task_id=task.task_id,
            revision_id=revision_id,
            binding=service.store.binding(task.binding_id),
            records=[r.public() for r in records],
            evidence=_with_files(evidence, service.workspace, revision_id),
            query=_bound_query(service, task.task_id),
            lessons=_lessons(service, task),
        )
        results = await run_criteria(
            contract.success_criteria, context, registry or default_registry()
        )
    verdict = decide(
        contract.mode,
        results,
        replans_used=task.replans_used,
        replan_budget=contract.replan_budget,
        deadline_passed=_deadline_passed(task, contract.deadline_s),
    )
    attempt["verdict"] = verdict.to_dict()
    service.store.add_verification(attempt["attempt_id"], task.task_id, revision_id, attempt)
    return verdict


def _with_files(
    evidence: list[dict[str, Any]], workspace: Path, revision_id: str
) -> list[dict[str, Any]]:
    files = []
    for artifact in evidence:
        if artifact.get("error") is None and artifact["revision_id"] == revision_id:
            files.append({**artifact, "file": str(workspace / artifact["path"])})
    return files


def _bound_query(service: TaskService, task_id: str) -> QueryFn:
    async def query(tool_id: str, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        data = await service.query(tool_id, dict(arguments), task_id=task_id)
        result = data["response"]["result"]
        if result["status"] != "succeeded":
            raise TaskError("PAOS_QUERY_FAILED", f"{tool_id} {result['status']}")
        outputs: Mapping[str, Any] = result["outputs"]  # a Query's outputs are an object
        return outputs

    return query


def _lessons(service: TaskService, task: TaskRow) -> list[Lesson]:
    # Advisory only, scoped to the bound skill version; never allowed to break finalize.
    try:
        from doraforge.paos.experience import lessons

        binding = service.binding(task)
        skill, version = binding.skill, binding.version
        return lessons(service.store.episodes(skill, version), skill, version)
    except Exception:
        log.exception("could not read lessons for task %s", task.task_id)
        return []


def _deadline_passed(task: TaskRow, deadline_s: float | None) -> bool:
    if deadline_s is None:
        return False
    return time.time() * 1000 - task.created_at_ms > deadline_s * 1000


def _remember(service: TaskService, task_id: str) -> None:
    try:
        from doraforge.paos.experience import episode_from

        described = service.describe(task_id)
        binding = described["binding"]
        episode = episode_from(
            described["task"],
            described["revisions"],
            described["records"],
            [r["verdict"] for r in described["revisions"] if r["verdict"]],
            described["evidence"],
            binding,
        )
        service.store.add_episode(task_id, binding["skill"], binding["version"], episode)
    except Exception:  # experience is fail-open by contract
        log.exception("could not record the experience of task %s", task_id)
