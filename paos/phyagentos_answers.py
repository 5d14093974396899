"""PhyAgentOS 1.1.1's agent-tool answers, carried inside doraforge's, in this one place.

An agent written for PhyAgentOS reads its tools' answers by PhyAgentOS's field names
(``PhyAgentOS.agent.tools``): a task tool answers an ``AgentTaskRecord``, a Forge tool the
Gateway's own data, ``activate_skill`` the activation, the skill document and its lessons.
Each function here takes doraforge's answer data and returns it with those fields added,
with PhyAgentOS's names, JSON types, nesting and status words; doraforge's own fields
(``task``, ``record``, ``binding``, ``invocation``, ``control``, …) stay beside them as the
documented extensions (README, "Agent tools: PhyAgentOS and doraforge").

Where doraforge keeps less than PhyAgentOS, the field is there with the documented
stand-in rather than missing: doraforge stores a call's arguments only by SHA-256, so an
execution record's ``arguments`` is ``{}`` beside ``arguments_sha256``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

#: doraforge record state -> PhyAgentOS ``ToolExecutionRecord.status``.
RECORD_STATUS = {
    "intent": "pending",
    "indeterminate": "unknown",
    "accepted": "accepted",
    "running": "running",
    "stopping": "running",
    "completed": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
    "stopped": "stopped",
    "unknown": "unknown",
}
#: doraforge record state -> the Gateway phase word PhyAgentOS reads (``data.phase``).
RECORD_PHASE = {
    **{s: s for s in RECORD_STATUS},
    "intent": "dispatching",
    "indeterminate": "unknown",
}
#: doraforge verdict / criterion status -> PhyAgentOS's words.
_VERDICT = {"success": "success", "failure": "failure", "replan_required": "replan_required"}
_CRITERION = {"pass": "satisfied", "fail": "unsatisfied"}
_LIVE = frozenset({"intent", "indeterminate", "accepted", "running", "stopping"})


def iso(ms: int | None) -> str | None:
    """A store time in milliseconds as PhyAgentOS writes datetimes (ISO 8601, ``Z``)."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


# -- the task tools: an AgentTaskRecord ------------------------------------------------------


def task_record(described: Mapping[str, Any]) -> dict[str, Any]:
    """PhyAgentOS's ``AgentTaskRecord`` fields of a task doraforge ``describe``\\ d.

    ``revisions`` is doraforge's list with each revision widened to a ``PlanRevision``
    (``number``, ``execution_records``, …); ``verification`` is the contract restated as
    PhyAgentOS's ``TaskVerificationContract`` (criteria by id; doraforge's machine form stays
    in ``task.contract``).
    """
    task = described["task"]
    binding_id = task["binding_id"]
    revisions = list(described["revisions"])
    records = list(described["records"])
    stamp = iso(task["updated_at_ms"])
    attempts = [_attempt(a, stamp) for a in described.get("verifications", [])]
    answer: dict[str, Any] = {
        "version": "agent_task_record_v2",
        "task_id": task["task_id"],
        "task_description": task["goal"],
        "verification": verification(task["contract"]),
        "status": task["state"],
        "revisions": _plan_revisions(revisions, records, binding_id, attempts),
        "active_revision_id": revisions[-1]["revision_id"],
        "supporting_skill_bindings": [],
        "verification_attempts": attempts,
        "evidence_errors": _evidence_errors(task, described.get("evidence", [])),
        "cancellation_requested": _cancellation_requested(task),
        "created_at": iso(task["created_at_ms"]),
        "updated_at": iso(task["updated_at_ms"]),
    }
    binding = skill_binding(binding_id, described.get("binding"), task["created_at_ms"])
    optional = {
        "primary_skill_binding": binding,
        "runtime_snapshot_ref": _runtime_ref(described.get("binding")),
        "verdict": _last_verdict(revisions),
        "before_snapshot_ref": _snapshot_ref(described.get("evidence", []), "before"),
        "after_snapshot_ref": _snapshot_ref(described.get("evidence", []), "after"),
        "terminal_at": iso(task["terminal_at_ms"]),
    }
    # PhyAgentOS leaves out what it has not got (``exclude_none``); so does this.
    answer.update({k: v for k, v in optional.items() if v is not None})
    return answer


def verification(contract: Mapping[str, Any]) -> dict[str, Any]:
    """doraforge's contract as PhyAgentOS's ``TaskVerificationContract`` (criteria by id)."""
    policy = contract.get("evidence_policy") or {}
    return {
        "version": "task_verification_contract_v1",
        "mode": contract.get("mode", "off"),
        "goal": str(contract.get("goal") or "").strip(),
        "success_criteria": [
            str(c["id"]) for c in contract.get("success_criteria", []) if c.get("id")
        ],
        "constraints": [],
        "evidence_policy": {
            "profile": "doraforge",
            "required_kinds": [],
            "required_sources": list(policy.get("required_sources") or []),
            "minimum_association": "best_effort",
        },
    }


def _plan_revisions(
    revisions: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    binding_id: str,
    attempts: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Each revision as a PlanRevision. A stored attempt names no revision, so it is the
    revision's when it holds that revision's verdict (finalize stores the same document)."""
    widened = []
    for index, revision in enumerate(revisions):
        revision_id = revision["revision_id"]
        later = revisions[index + 1] if index + 1 < len(revisions) else None
        entry = {
            **revision,
            "version": "plan_revision_v2",
            "number": revision["ordinal"],
            "skill_binding_id": binding_id,
            "execution_records": [
                execution_record(r, binding_id) for r in records if r["revision_id"] == revision_id
            ],
            "verification_attempts": [
                a
                for a in attempts
                if revision.get("verdict") is not None and a.get("outcome") == revision["verdict"]
            ],
            "created_at": iso(revision["created_at_ms"]),
        }
        if revision.get("verdict") is not None:
            entry["verdict"] = _verdict(revision["verdict"])
        if later is not None:
            entry["closed_at"] = iso(later["created_at_ms"])
        widened.append(entry)
    return widened


def execution_record(record: Mapping[str, Any], binding_id: str) -> dict[str, Any]:
    """A doraforge record widened to PhyAgentOS's ``ToolExecutionRecord``."""
    invocation_id = record.get("invocation_id")
    semantics = record["semantics"]
    entry = {
        **record,
        "version": "tool_execution_record_v2",
        "skill_binding_id": binding_id,
        "tool_spec_sha256": record["spec_sha256"],
        "ownership": record.get("ownership") or "task",
        "arguments": {},  # doraforge keeps arguments only by SHA-256 (arguments_sha256)
        "status": RECORD_STATUS.get(record["state"], "unknown"),
        "response": _response(record),
        "rejected_before_dispatch": record["state"] == "failed"
        and invocation_id is None
        and semantics != "query",
        "evidence_refs": [
            f"invocation:{invocation_id}"
            if invocation_id and semantics == "action"
            else f"session:{invocation_id}"
            if invocation_id
            else f"tool:{record['record_id']}"
        ],
        "created_at": iso(record["created_at_ms"]),
        "updated_at": iso(record["updated_at_ms"]),
    }
    return entry


def _response(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """The last Gateway answer as PhyAgentOS keeps it: the terminal result, when known."""
    if record.get("result") is None:
        return None
    phase = RECORD_PHASE.get(record["state"], "unknown")
    return {"ok": True, "data": {"status": "available", "phase": phase, "result": record["result"]}}


def skill_binding(
    binding_id: str, binding: Mapping[str, Any] | None, created_at_ms: int
) -> dict[str, Any] | None:
    """doraforge's frozen binding as PhyAgentOS's ``ForgeSkillBinding``; ``None`` unless
    the task is bound to an installed skill (as PhyAgentOS's unbound tasks have none)."""
    if not binding or not all(
        binding.get(k) for k in ("manifest_sha256", "skill_md_sha256", "runtime_instance")
    ):
        return None  # an ad-hoc binding (a Gateway URL and tools) binds no installed skill
    identity = binding.get("gateway_identity") or {}
    tools = binding.get("tools") or {}
    entry = {
        "version": "forge_skill_binding_v1",
        "binding_id": binding_id,
        "skill_name": binding.get("skill"),
        "skill_version": binding.get("version"),
        "manifest_sha256": binding.get("manifest_sha256"),
        "skill_document_sha256": binding.get("skill_md_sha256"),
        "runtime_profile": binding.get("profile"),
        "runtime_instance_id": binding.get("runtime_instance"),
        "gateway_url": binding.get("gateway_url"),
        "gateway_identity": identity.get("instance_id") if isinstance(identity, dict) else None,
        "required_tools": [
            {
                "tool_id": tool_id,
                "semantics": tool["semantics"],
                "spec_sha256": tool["spec_sha256"],
                "ready_at_binding": True,  # freeze refuses a tool that is not ready
            }
            for tool_id, tool in sorted(tools.items())
        ],
        "node_artifact_ids": list(binding.get("node_artifacts") or []),
        "created_at": iso(created_at_ms),
    }
    return {k: v for k, v in entry.items() if v is not None}


def _runtime_ref(binding: Mapping[str, Any] | None) -> str | None:
    instance = (binding or {}).get("runtime_instance")
    return f"runtime:{instance}" if instance else None


def _verdict(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """doraforge's verdict widened to PhyAgentOS's ``VerificationVerdict`` words."""
    status = str(verdict.get("status"))
    detail = str(verdict.get("detail") or "") or f"verdict {status}"
    return {
        **verdict,
        "version": "verification_verdict_v1",
        "verdict": _VERDICT.get(status, "inconclusive"),
        "criteria": [
            {
                "criterion": str(r.get("criterion_id")),
                "status": _CRITERION.get(str(r.get("status")), "unknown"),
                "evidence_refs": list(r.get("evidence_refs") or []),
            }
            for r in verdict.get("results", [])
        ],
        "evidence_refs": list(verdict.get("evidence_refs") or []),
        "reason": detail,
        "lesson": detail,
        "verifier_status": "completed",
    }


def _last_verdict(revisions: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    for revision in reversed(revisions):
        if revision.get("verdict") is not None:
            return _verdict(revision["verdict"])
    return None


def _attempt(attempt: Mapping[str, Any], stamp: str | None) -> dict[str, Any]:
    """A stored verification attempt as PhyAgentOS's ``VerificationAttempt``.

    ``verdict`` becomes PhyAgentOS's verdict word; doraforge's verdict document moves to
    ``outcome``. A stored attempt carries no time of its own, so ``created_at`` is
    ``stamp`` (the task's last update, which the attempt's verdict caused).
    """
    verdict = attempt.get("verdict")
    status = verdict.get("status") if isinstance(verdict, Mapping) else None
    bundle = attempt.get("bundle")
    refused = isinstance(bundle, Mapping) and not bundle.get("ok", True)
    entry = {
        **attempt,
        "outcome": verdict,
        "attempt_id": str(attempt.get("attempt_id")),
        "created_at": iso(attempt["created_at_ms"]) if "created_at_ms" in attempt else stamp,
        "source": "auto",
        "mode": "apply",
        "verdict": _VERDICT.get(str(status), "inconclusive") if status else None,
        "error": "evidence bundle refused" if refused else None,
        "abandoned": False,
    }
    return {k: v for k, v in entry.items() if v is not None}


def _evidence_errors(task: Mapping[str, Any], evidence: Sequence[Mapping[str, Any]]) -> list[str]:
    errors = [_capture_error(a["error"]) for a in evidence if a.get("error")]
    outcome = task.get("outcome") or {}
    if outcome.get("cancelled"):
        errors.append(f"task cancellation requested: {outcome.get('reason', 'agent_requested')}")
    return errors


def _capture_error(error: Any) -> str:
    if isinstance(error, Mapping):
        return f"{error.get('code', 'PAOS_EVIDENCE_CAPTURE')}: {error.get('message', '')}"
    return str(error)


def _snapshot_ref(evidence: Sequence[Mapping[str, Any]], phase: str) -> str | None:
    """The workspace-relative path of the task's first ``before`` (last ``after``)
    artifact, as PhyAgentOS names its snapshots; ``None`` when none was kept."""
    kept = [a["path"] for a in evidence if a.get("phase") == phase and a.get("path")]
    if not kept:
        return None
    return str(kept[0] if phase == "before" else kept[-1])


def _cancellation_requested(task: Mapping[str, Any]) -> bool:
    return task["state"] == "cancelling" or bool((task.get("outcome") or {}).get("cancelled"))


# -- the Forge tools: the Gateway's own data -------------------------------------------------


def context_answer(spec: Mapping[str, Any], sha256: str, context: Any) -> dict[str, Any]:
    """``forge_tool_context``: PhyAgentOS's ``tool`` and ``context``; doraforge's ``spec``
    and ``spec_sha256`` beside them."""
    return {"tool": spec, "context": context, "spec": spec, "spec_sha256": sha256}


def admission(record: Mapping[str, Any], invocation: Mapping[str, Any] | None) -> dict[str, Any]:
    """A start answer: the Gateway's admission fields (``invocation_id``, ``attempt_id``,
    ``tool_id``, ``caller_id``, ``phase``, ``deadline_ms``, ``duplicate``) over the record.

    ``invocation`` is the Gateway's status of the admitted invocation, read once after the
    admission; without it the record speaks (``deadline_ms`` is then ``None``). doraforge's
    caller ids are unique per record, so an admission is never a duplicate.
    """
    seen = invocation or {}
    return {
        **record,
        "phase": seen.get("phase") or RECORD_PHASE.get(record["state"], "unknown"),
        "deadline_ms": seen.get("deadline_ms"),
        "duplicate": False,
    }


def status_answer(
    record: Mapping[str, Any],
    invocation: Mapping[str, Any] | None,
    bound: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """A status answer: the Gateway's invocation fields at the top, then doraforge's
    ``record`` and ``invocation``. Without a Gateway reading (the record was terminal, or
    the Gateway could not be read) the same fields are stated from the record."""
    base = dict(invocation) if invocation else _invocation_of(record, bound or {})
    return {**base, "record": record, "invocation": invocation}


def _invocation_of(record: Mapping[str, Any], bound: Mapping[str, Any]) -> dict[str, Any]:
    phase = RECORD_PHASE.get(record["state"], "unknown")
    cancel = record.get("cancel") or {}
    return {
        "invocation_id": record.get("invocation_id"),
        "attempt_id": record.get("attempt_id"),
        "tool_id": record["tool_id"],
        "endpoint_id": bound.get("endpoint_id"),
        "operation": bound.get("operation"),
        "semantics": record["semantics"],
        "caller_id": record["caller_id"],
        "phase": phase,
        "status": phase,
        "terminal": record["state"] not in _LIVE,
        "cancel_status": cancel.get("status") or "none",
        "endpoint_instance_id": None,
        "created_at_ms": record["created_at_ms"],
        "updated_at_ms": record["updated_at_ms"],
        "deadline_ms": None,
        "terminal_at_ms": record.get("terminal_at_ms"),
        "progress": None,
    }


def result_answer(status: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """A result answer: the Gateway's ``status`` (``pending``/``available``), ``phase`` and,
    when available, ``result``; doraforge's ``record`` beside them."""
    answer: dict[str, Any] = {
        "status": status,
        "phase": RECORD_PHASE.get(record["state"], "unknown"),
        "record": record,
    }
    if status == "available":
        answer["result"] = record.get("result")
    return answer


def control_answer(record: Mapping[str, Any], control: Mapping[str, Any]) -> dict[str, Any]:
    """A cancel/stop answer: the Gateway's control fields (``invocation_id``, ``command``,
    ``status``, ``cancel_status`` or ``stop_status``, ``phase``) at the top, then doraforge's
    ``record`` and ``control``. A record already terminal answers as the Gateway does for an
    invocation already terminal (``status: "terminal"``)."""
    command = "cancel" if record["semantics"] == "action" else "stop"
    status = str(control.get("status", "terminal"))
    stated = {
        "invocation_id": record.get("invocation_id"),
        "command": command,
        "status": status,
        f"{command}_status": status,
        "phase": RECORD_PHASE.get(record["state"], "unknown"),
    }
    return {**stated, **control, "record": record, "control": control}


# -- activate_skill: activation, skill document, lessons -------------------------------------


def document_sha256(document: str) -> str:
    """PhyAgentOS's ``content_sha256``: the SHA-256 of the document text as UTF-8."""
    return hashlib.sha256(document.encode("utf-8")).hexdigest()


def lesson(found: Mapping[str, Any]) -> dict[str, Any]:
    """One doraforge lesson (:func:`paos.experience.lessons`) as PhyAgentOS's applicable
    lesson (``SkillActivationManager.lesson_payload``), doraforge's fields beside it.

    A lesson that an uncertain physical outcome taught (``unknown``, ``timeout``) is
    ``important``; every other one ``advisory``.
    """
    skill, version, key = str(found["skill"]), str(found["version"]), str(found["key"])
    digest = hashlib.sha256(f"{skill}\0{version}\0{key}".encode()).hexdigest()[:20]
    if found.get("kind") == "tool_failure":
        subject = f"calling {found['tool_id']}"
        failure = f"{found['tool_id']} ended {found['error_code']}"
        serious = found.get("error_code") in ("unknown", "timeout")
    else:
        subject = f"verifying criterion {found['criterion_id']}"
        failure = f"criterion {found['criterion_id']} was {found['status']}"
        serious = False
    return {
        **found,
        "lesson_id": f"lesson_{digest}",
        "applies_when": [f"skill {skill} {version}", subject],
        "does_not_apply_when": [f"a version of {skill} other than {version}"],
        "failure_mode": failure,
        "recommendation": str(found.get("advice", "")),
        "severity": "important" if serious else "advisory",
        "observations": int(found.get("count", 1)),
        "skill_version_spec": version,
    }
