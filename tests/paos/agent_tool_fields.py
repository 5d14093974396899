"""The one table of every field PhyAgentOS 1.1.1's agent tools and doraforge's exchange.

For each of the 16 tools: the argument fields PhyAgentOS's tool schema declares, and the
answer fields PhyAgentOS's tool returns, with their JSON types. It is checked against
PhyAgentOS's real schemas and answers (its code run in its own venv, ``tests.peers``) and
against doraforge's (``paos.agent_tools``): unit parts in ``tests/paos/
test_agent_tool_shapes.py``, the live part in ``tests/e2e/peers/
test_phyagentos_tool_answers.py``.

Types: ``str``, ``int``, ``number``, ``bool``, ``object``, ``array``; a trailing ``?``
means the field may be absent or ``null`` (PhyAgentOS leaves out what it has not got).
``a[]`` is every item of the array ``a``; ``a[].b`` the field ``b`` of every item. Fields
under a free-form object (a ToolSpec, a call's arguments, a Gateway result) are values,
not fields, and are not listed.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app
from doraforge.gateway.local import LocalCarrier, LocalProvider
from doraforge.paos.binding import BindingCandidate
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.tasks import TaskService
from tests.gateway.harness import mock_config, mock_handler
from tests.support.waiting import eventually_async

STR, INT, BOOL, OBJ, ARR = "str", "int", "bool", "object", "array"

#: tool -> argument field -> JSON type (PhyAgentOS's ``parameters``).
ARGUMENTS: dict[str, dict[str, str]] = {
    "activate_skill": {"name": STR, "role": STR},
    "forge_task_create": {"task_description": STR, "activation_id": STR, "verification": OBJ},
    "forge_task_get": {"task_id": STR},
    "forge_task_begin_revision": {"task_id": STR, "reason": STR},
    "forge_task_finalize": {"task_id": STR},
    "forge_task_cancel": {"task_id": STR, "reason": STR},
    "forge_tool_context": {"tool_id": STR},
    "forge_tool_query": {"task_id": STR, "tool_id": STR, "arguments": OBJ, "timeout_ms": INT},
    "forge_tool_start_action": {
        "task_id": STR,
        "tool_id": STR,
        "arguments": OBJ,
        "timeout_ms": INT,
    },
    "forge_tool_action_status": {"task_id": STR, "invocation_id": STR},
    "forge_tool_action_result": {"task_id": STR, "invocation_id": STR},
    "forge_tool_cancel_action": {"task_id": STR, "invocation_id": STR},
    "forge_tool_start_session": {
        "task_id": STR,
        "tool_id": STR,
        "arguments": OBJ,
        "ownership": STR,
    },
    "forge_tool_session_status": {"task_id": STR, "invocation_id": STR},
    "forge_tool_session_result": {"task_id": STR, "invocation_id": STR},
    "forge_tool_stop_session": {"task_id": STR, "invocation_id": STR},
}

#: A ``ScopedLesson`` as ``activate_skill`` lists it (``lesson_payload``).
LESSON: dict[str, str] = {
    "lesson_id": STR,
    "applies_when": ARR,
    "applies_when[]": STR,
    "does_not_apply_when": ARR,
    "does_not_apply_when[]": STR,
    "failure_mode": STR,
    "recommendation": STR,
    "severity": STR,
    "observations": INT,
    "skill_version_spec": "str?",
}

#: A ``VerificationVerdict``.
VERDICT: dict[str, str] = {
    "version": STR,
    "verdict": STR,
    "criteria": ARR,
    "criteria[]": OBJ,
    "criteria[].criterion": STR,
    "criteria[].status": STR,
    "criteria[].evidence_refs": ARR,
    "criteria[].evidence_refs[]": STR,
    "evidence_refs": ARR,
    "evidence_refs[]": STR,
    "reason": STR,
    "lesson": STR,
    "recovery_context": "object?",
    "verifier_status": STR,
}

#: A ``VerificationAttempt``.
ATTEMPT: dict[str, str] = {
    "attempt_id": STR,
    "created_at": STR,
    "source": STR,
    "mode": STR,
    "verdict": "str?",
    "error": "str?",
    "abandoned": BOOL,
}

#: A ``ForgeSkillBinding`` (a task bound to an installed skill).
BINDING: dict[str, str] = {
    "version": STR,
    "binding_id": STR,
    "skill_name": STR,
    "skill_version": STR,
    "manifest_sha256": STR,
    "skill_document_sha256": STR,
    "workflow_document_sha256": "str?",
    "runtime_profile": STR,
    "runtime_instance_id": STR,
    "gateway_url": STR,
    "gateway_identity": "str?",
    "required_tools": ARR,
    "required_tools[]": OBJ,
    "required_tools[].tool_id": STR,
    "required_tools[].semantics": STR,
    "required_tools[].spec_sha256": STR,
    "required_tools[].ready_at_binding": BOOL,
    "node_artifact_ids": ARR,
    "node_artifact_ids[]": STR,
    "created_at": STR,
}

#: A ``ToolExecutionRecord``.
EXECUTION_RECORD: dict[str, str] = {
    "version": STR,
    "record_id": STR,
    "revision_id": STR,
    "tool_id": STR,
    "semantics": STR,
    "skill_binding_id": "str?",
    "tool_spec_sha256": "str?",
    "caller_id": STR,
    "ownership": STR,
    "arguments": OBJ,
    "status": STR,
    "invocation_id": "str?",
    "attempt_id": "str?",
    "response": "object?",
    "error": "object?",
    "rejected_before_dispatch": BOOL,
    "evidence_refs": ARR,
    "evidence_refs[]": STR,
    "created_at": STR,
    "updated_at": STR,
}


def _nest(prefix: str, table: Mapping[str, str]) -> dict[str, str]:
    return {f"{prefix}.{path}": kind for path, kind in table.items()}


#: An ``AgentTaskRecord`` (``data`` of every task tool).
TASK_RECORD: dict[str, str] = {
    "version": STR,
    "task_id": STR,
    "task_description": STR,
    "verification": OBJ,
    "verification.version": STR,
    "verification.mode": STR,
    "verification.goal": STR,
    "verification.success_criteria": ARR,
    "verification.success_criteria[]": STR,
    "verification.constraints": ARR,
    "verification.constraints[]": STR,
    "verification.evidence_policy": OBJ,
    "verification.evidence_policy.profile": STR,
    "verification.evidence_policy.required_kinds": ARR,
    "verification.evidence_policy.required_kinds[]": STR,
    "verification.evidence_policy.required_sources": ARR,
    "verification.evidence_policy.required_sources[]": STR,
    "verification.evidence_policy.minimum_association": STR,
    "status": STR,
    "revisions": ARR,
    "revisions[]": OBJ,
    "revisions[].version": STR,
    "revisions[].revision_id": STR,
    "revisions[].number": INT,
    "revisions[].reason": STR,
    "revisions[].skill_binding_id": "str?",
    "revisions[].execution_records": ARR,
    "revisions[].execution_records[]": OBJ,
    **_nest("revisions[].execution_records[]", EXECUTION_RECORD),
    "revisions[].verdict": "object?",
    **_nest("revisions[].verdict", VERDICT),
    "revisions[].verification_attempts": ARR,
    "revisions[].verification_attempts[]": OBJ,
    **_nest("revisions[].verification_attempts[]", ATTEMPT),
    "revisions[].created_at": STR,
    "revisions[].closed_at": "str?",
    "active_revision_id": STR,
    "primary_skill_binding": "object?",
    **_nest("primary_skill_binding", BINDING),
    "supporting_skill_bindings": ARR,
    "runtime_snapshot_ref": "str?",
    "verdict": "object?",
    **_nest("verdict", VERDICT),
    "verification_attempts": ARR,
    "verification_attempts[]": OBJ,
    **_nest("verification_attempts[]", ATTEMPT),
    "before_snapshot_ref": "str?",
    "after_snapshot_ref": "str?",
    "evidence_bundle_ref": "str?",
    "evidence_errors": ARR,
    "evidence_errors[]": STR,
    "cancellation_requested": BOOL,
    "replan_deadline": "str?",
    "origin_session_key": "str?",
    "created_at": STR,
    "updated_at": STR,
    "terminal_at": "str?",
}

_ENVELOPE = {"ok": BOOL, "data": OBJ}
_TASK_ANSWER = {**_ENVELOPE, **_nest("data", TASK_RECORD)}
_ADMISSION = {
    "data.invocation_id": STR,
    "data.attempt_id": STR,
    "data.tool_id": STR,
    "data.caller_id": STR,
    "data.phase": STR,
    "data.deadline_ms": "int?",
    "data.duplicate": BOOL,
}
_STATUS = {
    "data.invocation_id": STR,
    "data.attempt_id": STR,
    "data.tool_id": STR,
    "data.endpoint_id": STR,
    "data.operation": STR,
    "data.semantics": STR,
    "data.caller_id": STR,
    "data.phase": STR,
    "data.status": STR,
    "data.terminal": BOOL,
    "data.cancel_status": STR,
    "data.endpoint_instance_id": "str?",
    "data.created_at_ms": INT,
    "data.updated_at_ms": INT,
    "data.deadline_ms": "int?",
    "data.terminal_at_ms": "int?",
    "data.progress": "object?",
    "data.result": "object?",
}
_RESULT = {"data.status": STR, "data.phase": STR, "data.result": "object?"}
_CONTROL = {"data.invocation_id": STR, "data.command": STR, "data.status": STR, "data.phase": STR}

#: tool -> answer field path -> JSON type (what PhyAgentOS's tool returns).
ANSWERS: dict[str, dict[str, str]] = {
    "activate_skill": {
        "ok": BOOL,
        "activation": OBJ,
        "activation.version": STR,
        "activation.activation_id": STR,
        "activation.skill_name": STR,
        "activation.role": STR,
        "activation.source": STR,
        "activation.content_sha256": STR,
        "activation.skill_version": "str?",
        "activation.binding_candidate_id": "str?",
        "activation.activated_at": STR,
        "skill": STR,
        "applicable_lessons": ARR,
        "applicable_lessons[]": OBJ,
        **_nest("applicable_lessons[]", LESSON),
    },
    **{
        name: _TASK_ANSWER
        for name in (
            "forge_task_create",
            "forge_task_get",
            "forge_task_begin_revision",
            "forge_task_finalize",
            "forge_task_cancel",
        )
    },
    "forge_tool_context": {**_ENVELOPE, "data.tool": OBJ, "data.context": OBJ},
    "forge_tool_query": {
        **_ENVELOPE,
        "data.endpoint_id": STR,
        "data.operation": STR,
        "data.response": OBJ,
    },
    "forge_tool_start_action": {**_ENVELOPE, **_ADMISSION},
    "forge_tool_action_status": {**_ENVELOPE, **_STATUS},
    "forge_tool_action_result": {**_ENVELOPE, **_RESULT},
    "forge_tool_cancel_action": {**_ENVELOPE, **_CONTROL, "data.cancel_status": STR},
    "forge_tool_start_session": {**_ENVELOPE, **_ADMISSION},
    "forge_tool_session_status": {**_ENVELOPE, **_STATUS},
    "forge_tool_session_result": {**_ENVELOPE, **_RESULT},
    "forge_tool_stop_session": {**_ENVELOPE, **_CONTROL, "data.stop_status": STR},
}

#: A tool's failure answer (PhyAgentOS's Forge tools answer them; its task tools raise).
ERROR_ANSWER: dict[str, str] = {
    "ok": BOOL,
    "error": OBJ,
    "error.type": STR,
    "error.message": STR,
    "error.code": "str?",
    "error.retryable": "bool?",
    "error.status_code": "int?",
    "error.invocation_id": "str?",
    "error.attempt_id": "str?",
    "error.remote_state": "str?",
    "error.stopped": "bool?",
}


def fields_of(key: str) -> dict[str, str]:
    """The table for a :data:`SEQUENCE` answer key (``tool``, ``tool/moment``, ``tool/error``)."""
    return ERROR_ANSWER if key.endswith("/error") else ANSWERS[tool_of(key)]


#: Status fields and every word PhyAgentOS gives them (``AgentTaskStatus``,
#: ``ToolExecutionRecord.status``, the Gateway's result and phase words).
TASK_STATUSES = frozenset(
    {"executing", "cancelling", "awaiting_replan", "succeeded", "failed", "cancelled"}
)
RECORD_STATUSES = frozenset(
    {"pending", "accepted", "running", "succeeded", "failed", "cancelled", "stopped", "unknown"}
)
PHASES = frozenset(
    {"dispatching", "accepted", "running", "stopping", "completed"}
    | {"failed", "cancelled", "stopped", "unknown"}
)
CONTROL_STATUSES = frozenset({"accepted", "requested", "terminal"})
RESULT_STATUSES = frozenset({"pending", "available"})


def status_vocabulary(tool: str) -> dict[str, frozenset[str]]:
    """The status fields of ``tool``'s answer and the words PhyAgentOS gives each."""
    if tool.startswith("forge_task_"):
        return {
            "data.status": TASK_STATUSES,
            "data.revisions[].execution_records[].status": RECORD_STATUSES,
        }
    if tool.endswith("_result"):
        return {"data.status": RESULT_STATUSES, "data.phase": PHASES}
    if tool.endswith("_status"):
        return {"data.status": PHASES, "data.phase": PHASES}
    if tool in ("forge_tool_cancel_action", "forge_tool_stop_session"):
        return {"data.status": CONTROL_STATUSES, "data.phase": PHASES}
    if tool.startswith("forge_tool_start_"):
        return {"data.phase": PHASES}
    return {}


# -- reading answers against the table --------------------------------------------------------


def kind(value: Any) -> str:
    """The JSON type of a decoded value, in the table's words."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return STR
    if isinstance(value, dict):
        return OBJ
    if isinstance(value, list):
        return ARR
    return "null"


def values_at(answer: Any, path: str) -> list[Any]:
    """Every value at ``path`` (``[]`` fans out over array items); absent ones are left out."""
    found = [answer]
    for step in path.split("."):
        name, fan = step.removesuffix("[]"), step.endswith("[]")
        found = [item[name] for item in found if isinstance(item, dict) and name in item]
        if fan:
            found = [x for item in found if isinstance(item, list) for x in item]
    return found


def _parent(path: str) -> str | None:
    if path.endswith("[]"):
        return path[:-2]
    return path.rsplit(".", 1)[0] if "." in path else None


def problems(answer: Any, table: Mapping[str, str]) -> list[str]:
    """Where ``answer`` does not carry a field of ``table`` with its type.

    A required field must be there wherever its parent is (an optional parent may be
    absent); an optional one may be absent or ``null``; ``int`` passes as ``number``.
    """
    found: list[str] = []
    for path, wanted in table.items():
        optional, base = wanted.endswith("?"), wanted.removesuffix("?")
        values = values_at(answer, path)
        parent = _parent(path)
        parents = [p for p in values_at(answer, parent) if p is not None] if parent else [answer]
        expected = sum(len(p) for p in parents) if path.endswith("[]") else len(parents)
        if not optional and len(values) < expected:
            found.append(f"{path}: missing")
        for value in values:
            have = kind(value)
            if have == base or (optional and have == "null") or (base, have) == ("number", INT):
                continue
            found.append(f"{path}: {have}, not {wanted}")
    return found


_FREE_FORM = frozenset(
    {"tool", "context", "arguments", "response", "error", "result", "progress", "recovery_context"}
)


def paths(answer: Any, prefix: str = "") -> dict[str, set[str]]:
    """Every field path of ``answer`` and the JSON types seen there, free-form values and
    ``data`` of a Forge tool's free-form fields left unexpanded."""
    seen: dict[str, set[str]] = {}

    def walk(value: Any, path: str) -> None:
        seen.setdefault(path, set()).add(kind(value))
        last = path.rsplit(".", 1)[-1].removesuffix("[]")
        if last in _FREE_FORM:
            return
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else key)
        elif isinstance(value, list):
            for item in value:
                walk(item, path + "[]")

    for key, value in answer.items():
        walk(value, prefix + key)
    return seen


def unlisted(answer: Mapping[str, Any], table: Mapping[str, str]) -> list[str]:
    """Field paths of ``answer`` (a PhyAgentOS answer) the table does not list: the table
    must name every field PhyAgentOS answers."""
    return sorted(path for path in paths(answer) if path not in table)


def status_words(tool: str, answer: Mapping[str, Any]) -> list[str]:
    """Status words in ``answer`` that are not PhyAgentOS's for that field."""
    if answer.get("ok") is False:
        return []
    return [
        f"{path}={value!r}"
        for path, words in status_vocabulary(tool).items()
        for value in values_at(answer, path)
        if value not in words
    ]


# -- one agent sequence, run by both sides -----------------------------------------------------

SKILL = "mock-skill"
SKILL_DOCUMENT = "---\nname: mock-skill\ndescription: Move the mock arm.\n---\n# Mock\nMove it.\n"

#: The same calls in the same order for PhyAgentOS's tools (in its venv) and doraforge's:
#: ``sequence(call, until)`` where ``call(tool, **arguments)`` answers the decoded tool
#: answer and ``until(poll, what)`` awaits (bounded) a truthy ``await poll()``. It reads only
#: PhyAgentOS's answer fields, so it is also an agent written for PhyAgentOS.
SEQUENCE = """
async def sequence(call, until):
    out = {}

    async def record(tool, **arguments):
        answer = await call(tool, **arguments)
        out.setdefault(tool, answer)
        return answer

    activation = await record("activate_skill", name=SKILL)
    created = await record(
        "forge_task_create",
        task_description="move the mock",
        activation_id=activation["activation"]["activation_id"],
        verification={"mode": "off"},
    )
    task_id = created["data"]["task_id"]
    await record("forge_tool_context", tool_id="mock.move")
    out["forge_tool_query/error"] = await call(
        "forge_tool_query", tool_id="mock.nothing", arguments={})
    out["forge_tool_action_status/error"] = await call(
        "forge_tool_action_status", task_id=task_id, invocation_id="inv_of_nobody")
    await record("forge_tool_query", task_id=task_id, tool_id="mock.echo",
                 arguments={"message": "hi"})
    action = await record("forge_tool_start_action", task_id=task_id, tool_id="mock.move",
                          arguments={"duration_s": 5, "behaviour": "succeed"})
    ids = {"task_id": task_id, "invocation_id": action["data"]["invocation_id"]}
    await record("forge_tool_action_status", **ids)
    await record("forge_tool_action_result", **ids)
    await record("forge_tool_cancel_action", **ids)

    async def result():
        answer = await call("forge_tool_action_result", **ids)
        return answer if answer["data"]["status"] == "available" else None

    out["forge_tool_action_result/available"] = await until(result, "the cancelled result")
    session = await record("forge_tool_start_session", task_id=task_id, tool_id="mock.stream",
                           arguments={}, ownership="task")
    owned = {"task_id": task_id, "invocation_id": session["data"]["invocation_id"]}
    await record("forge_tool_session_status", **owned)
    await record("forge_tool_session_result", **owned)
    await record("forge_tool_stop_session", **owned)

    async def stopped():
        answer = await call("forge_tool_session_status", **owned)
        return answer if answer["data"]["terminal"] else None

    out["forge_tool_session_status/terminal"] = await until(stopped, "the stopped session")
    await record("forge_task_get", task_id=task_id)
    await record("forge_task_finalize", task_id=task_id)
    await record("forge_task_cancel", task_id=task_id, reason="user said stop")
    return out
"""


@dataclass(frozen=True)
class DocumentedActivation:
    """A Skill Runtime activation as ``activate_skill`` reads it, with its document."""

    candidate: BindingCandidate
    contract: dict[str, Any] | None
    document: str


def installed_candidate(gateway_url: str) -> BindingCandidate:
    """A candidate as the Skill Runtime builds one for an installed, running skill."""
    return BindingCandidate(
        skill=SKILL,
        version="1.0.0",
        gateway_url=gateway_url,
        required_tools=("mock.echo", "mock.move", "mock.stats", "mock.stream"),
        manifest_sha256="a" * 64,
        skill_md_sha256=hashlib.sha256(SKILL_DOCUMENT.encode()).hexdigest(),
        runtime_instance="rt-1",
        node_artifacts=("mock-node",),
    )


@asynccontextmanager
async def mock_task_service(
    home: Path, activate_skill: Callable[[str], Any]
) -> AsyncIterator[TaskService]:
    """A TaskService on ``home`` whose Gateway is the mock provider's, in process (ASGI),
    and whose Skill Runtime answers ``activate_skill``; closed on leaving."""
    carrier = LocalCarrier()
    gateway = Gateway(mock_config(), send=carrier.send)
    carrier.add(LocalProvider("mock", mock_handler), gateway.on_message).register()
    await eventually_async(
        lambda: gateway.registry.current("mock") is not None, what="the mock registered"
    )
    transport = httpx.ASGITransport(app=create_app(gateway))
    service = TaskService(
        AgentTaskStore(home / "paos.db"),
        lambda url: ForgeToolClient(url, transport=transport),
        workspace=home / "workspace",
    )
    service.activate_skill = activate_skill
    try:
        yield service
    finally:
        await service.aclose()
        service.store.close()


def tool_of(key: str) -> str:
    """The tool of a :data:`SEQUENCE` answer key (``tool`` or ``tool/moment``)."""
    return key.split("/", 1)[0]


async def run_doraforge(service: Any, *, within: float = 20.0) -> dict[str, Any]:
    """:data:`SEQUENCE` through doraforge's own agent tools on ``service``."""
    from doraforge.paos.agent_tools import TOOLS

    async def call(tool: str, **arguments: Any) -> Any:
        return await TOOLS[tool](service, arguments)

    async def until(poll: Any, what: str) -> Any:
        return await eventually_async(poll, within=within, what=what, interval=0.02)

    scope: dict[str, Any] = {"SKILL": SKILL}
    exec(SEQUENCE, scope)  # the one agent script both sides run
    answers: dict[str, Any] = await scope["sequence"](call, until)
    return answers


#: Run in PhyAgentOS's venv: its tool schemas, status words and nested answer models.
PEER_DUMP = """
import json, typing
from PhyAgentOS.agent.tools import forge_tool_api as api, forge_task as task
from PhyAgentOS.agent.tools.skill_activation import ActivateSkillTool
from PhyAgentOS.agent.experience.activation import SkillActivationManager
from PhyAgentOS.agent.experience.contracts import ScopedLesson
from PhyAgentOS.forge.binding import BoundToolSpec, ForgeSkillBinding
from PhyAgentOS.forge.task import AgentTaskStatus, ToolExecutionRecord
from PhyAgentOS.verification.contracts import (
    CriterionVerdict, VerificationAttempt, VerificationVerdict)

tools = [
    api.ForgeToolContextTool(None), api.ForgeToolQueryTool(None, None),
    api.ForgeToolStartActionTool(None), api.ForgeToolActionStatusTool(None, None),
    api.ForgeToolActionResultTool(None, None), api.ForgeToolCancelActionTool(None, None),
    api.ForgeToolStartSessionTool(None), api.ForgeToolSessionStatusTool(None, None),
    api.ForgeToolSessionResultTool(None, None), api.ForgeToolStopSessionTool(None),
    *task.build_forge_task_tools(None), ActivateSkillTool(None),
]
sha = "0" * 64
lesson = ScopedLesson(lesson_id="lesson_1", skill_name="mock-skill", skill_version_spec="1.0.0",
    workflow_key="k", applies_when=["a"], does_not_apply_when=["b"], failure_mode="f",
    recommendation="r")
verdict = VerificationVerdict(verdict="failure", reason="r", lesson="l", evidence_refs=["e"],
    criteria=[CriterionVerdict(criterion="c", status="unsatisfied", evidence_refs=["e"])])
binding = ForgeSkillBinding(binding_id="b", skill_name="mock-skill", skill_version="1.0.0",
    manifest_sha256=sha, skill_document_sha256=sha, runtime_profile="default",
    runtime_instance_id="r", gateway_url="http://g", gateway_identity="i",
    required_tools=(BoundToolSpec(tool_id="t", semantics="action", spec_sha256=sha,
                                  ready_at_binding=True),), node_artifact_ids=("n",))
dump = lambda model: model.model_dump(mode="json", exclude_none=True)
print(json.dumps({
    "schemas": {t.name: t.parameters for t in tools},
    "lesson": SkillActivationManager.lesson_payload(lesson),
    "verdict": dump(verdict),
    "attempt": dump(VerificationAttempt(attempt_id="a", verdict="failure", error="e")),
    "binding": dump(binding),
    "task_statuses": [s.value for s in AgentTaskStatus],
    "record_statuses": list(typing.get_args(ToolExecutionRecord.model_fields["status"].annotation)),
}))
"""
