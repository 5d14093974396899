"""The PAOS agent tools: one registry of name -> description, input schema, async callable.

Transport-free: the semantic registry (and MCP) can expose these later. Every tool answers
``{"ok": true, "data": ...}`` or ``{"ok": false, "error": {type, code, message, retryable,
invocation_id?, record_id?, remote_state?}}`` and never raises for a caller mistake, nor
lets a raw ``sqlite3`` or ``OSError`` out: one that no layer classified reads
``remote_state: "unknown"`` (it may have struck after a request was sent).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from jsonschema import Draft202012Validator

from doraforge.paos import finalize as finishing
from doraforge.paos.binding import BindingCandidate
from doraforge.paos.errors import PaosError
from doraforge.paos.tasks import TaskService

log = logging.getLogger(__name__)

type Handler = Callable[[TaskService, dict[str, Any]], Awaitable[Any]]
type SideEffect = Literal["read", "write"]
type Risk = Literal["low", "medium", "high", "critical"]

_ID = {"type": "string", "minLength": 1, "maxLength": 200}
_ARGS = {"type": "object"}
_TIMEOUT = {"type": "integer", "minimum": 1, "maximum": 86_400_000}
_URL = {"type": "string", "pattern": "^https?://", "maxLength": 2048}


def _schema(required: list[str], **properties: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": properties,
    }


@dataclass(frozen=True)
class AgentTool:
    """One tool: what it does, what it takes, what calling it does, and the call.

    ``side_effect`` and ``risk`` are declared where the tool is defined; ``None`` means
    undeclared, and a caller exposing the tool must then treat it as a high-risk write.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    side_effect: SideEffect | None = None
    risk: Risk | None = None

    async def __call__(self, service: TaskService, arguments: Any) -> dict[str, Any]:
        errors = sorted(
            Draft202012Validator(self.input_schema).iter_errors(arguments),
            key=lambda e: list(e.path),
        )
        if errors:
            path = "$" + "".join(f".{p}" for p in errors[0].path)
            return _failure(
                "invalid_arguments",
                "PAOS_INVALID_ARGUMENTS",
                f"{path}: {errors[0].message}",
                retryable=False,
            )
        try:
            return {"ok": True, "data": await self.handler(service, arguments)}
        except PaosError as exc:
            return {"ok": False, "error": _error_of(exc)}
        except (sqlite3.Error, OSError) as exc:
            log.error("agent tool %s: unclassified %r", self.name, exc)
            return {"ok": False, "error": _unclassified(exc)}


def _failure(kind: str, code: str, message: str, *, retryable: bool) -> dict[str, Any]:
    return {
        "ok": False,
        "error": {"type": kind, "code": code, "message": message, "retryable": retryable},
    }


def _error_of(exc: PaosError) -> dict[str, Any]:
    error: dict[str, Any] = {
        "type": type(exc).__name__,
        "code": exc.code,
        "message": exc.message,
        "retryable": exc.retryable,
    }
    remote_state = getattr(exc, "remote_state", None)
    if remote_state is not None:
        error["remote_state"] = remote_state
    for name in ("invocation_id", "record_id"):
        if exc.details.get(name) is not None:
            error[name] = exc.details[name]
    return error


def _unclassified(exc: sqlite3.Error | OSError) -> dict[str, Any]:
    # Where it struck is not known, so a request may already have reached the robot:
    # reported as unknown and not retryable, never as a plain failure worth repeating.
    return {
        "type": "UnclassifiedFault",
        "code": "PAOS_UNCLASSIFIED_FAULT",
        "message": f"{type(exc).__name__}: {exc}; the outcome is unknown: reconcile, do not retry",
        "retryable": False,
        "remote_state": "unknown",
    }


async def _context(service: TaskService, a: dict[str, Any]) -> Any:
    if "task_id" in a:
        task = service.store.task(a["task_id"])
        gateway_url = service.binding(task).gateway_url
    else:
        gateway_url = a["gateway_url"]
    client = service.client(gateway_url)
    spec, sha256 = await client.tool_spec(a["tool_id"])
    return {"spec": spec, "spec_sha256": sha256, "context": await client.context(a["tool_id"])}


async def _query(service: TaskService, a: dict[str, Any]) -> Any:
    return await service.query(
        a["tool_id"],
        a.get("arguments", {}),
        task_id=a.get("task_id"),
        gateway_url=a.get("gateway_url"),
        timeout_ms=a.get("timeout_ms"),
    )


async def _create(service: TaskService, a: dict[str, Any]) -> Any:
    if "skill" in a:
        if service.activate_skill is None:
            raise PaosError("PAOS_NO_SKILL_RUNTIME", "no Skill Runtime is configured")
        activation = service.activate_skill(a["skill"])
        contract = a.get("contract") or activation.contract
        if contract is None:
            raise PaosError("PAOS_NO_CONTRACT", "the skill has no verification contract")
        goal = a.get("goal") or contract.get("goal", a["skill"])
        return await service.create_task(goal, contract, activation.candidate)
    candidate = BindingCandidate.adhoc(a["gateway_url"], a["required_tools"])
    return await service.create_task(a["goal"], a["contract"], candidate)


def _record_call(method: str) -> Handler:
    async def handler(service: TaskService, a: dict[str, Any]) -> Any:
        return await getattr(service, method)(a["task_id"], a["record_id"])

    return handler


TOOLS: dict[str, AgentTool] = {}


def _register(
    name: str,
    description: str,
    schema: dict[str, Any],
    handler: Handler,
    *,
    side_effect: SideEffect | None = None,
    risk: Risk | None = None,
) -> None:
    if name in TOOLS:
        raise ValueError(f"agent tool {name!r} registered twice")
    TOOLS[name] = AgentTool(name, description, schema, handler, side_effect, risk)


_register(
    "forge_tool_context",
    "Read a tool's ToolSpec and live context (readiness, binding, frames). No task needed.",
    {
        **_schema(["tool_id"], tool_id=_ID, task_id=_ID, gateway_url=_URL),
        "oneOf": [{"required": ["task_id"]}, {"required": ["gateway_url"]}],
    },
    _context,
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_query",
    "Run a Query: diagnostic with gateway_url (no record), or bound to task_id (recorded).",
    {
        **_schema(
            ["tool_id"],
            tool_id=_ID,
            arguments=_ARGS,
            task_id=_ID,
            gateway_url=_URL,
            timeout_ms=_TIMEOUT,
        ),
        "oneOf": [{"required": ["task_id"]}, {"required": ["gateway_url"]}],
    },
    _query,
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_start_action",
    "Admit an Action for the task (intent recorded first; never re-sent on a timeout).",
    _schema(
        ["task_id", "tool_id", "arguments"],
        task_id=_ID,
        tool_id=_ID,
        arguments=_ARGS,
        timeout_ms=_TIMEOUT,
    ),
    lambda s, a: s.start_action(
        a["task_id"], a["tool_id"], a["arguments"], timeout_ms=a.get("timeout_ms")
    ),
    side_effect="write",
    risk="high",
)
_register(
    "forge_tool_action_status",
    "Read an Action's phase and status.",
    _schema(["task_id", "record_id"], task_id=_ID, record_id=_ID),
    _record_call("status"),
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_action_result",
    "Read an Action's pending or terminal result.",
    _schema(["task_id", "record_id"], task_id=_ID, record_id=_ID),
    _record_call("result"),
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_cancel_action",
    "Request cancellation of an Action; acceptance is not a stop — read the status.",
    _schema(["task_id", "record_id"], task_id=_ID, record_id=_ID),
    _record_call("cancel"),
    side_effect="write",
    risk="medium",
)
_register(
    "forge_tool_start_session",
    "Admit a Session owned by the task, shared, or the runtime.",
    _schema(
        ["task_id", "tool_id", "arguments", "ownership"],
        task_id=_ID,
        tool_id=_ID,
        arguments=_ARGS,
        ownership={"enum": ["task", "shared", "runtime"]},
        timeout_ms=_TIMEOUT,
    ),
    lambda s, a: s.start_session(
        a["task_id"],
        a["tool_id"],
        a["arguments"],
        ownership=a["ownership"],
        timeout_ms=a.get("timeout_ms"),
    ),
    side_effect="write",
    risk="high",
)
_register(
    "forge_tool_session_status",
    "Read a Session's phase and status.",
    _schema(["task_id", "record_id"], task_id=_ID, record_id=_ID),
    _record_call("status"),
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_session_result",
    "Read a Session's pending or terminal result.",
    _schema(["task_id", "record_id"], task_id=_ID, record_id=_ID),
    _record_call("result"),
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_stop_session",
    "Stop a Session the task owns.",
    _schema(["task_id", "record_id"], task_id=_ID, record_id=_ID),
    _record_call("stop"),
    side_effect="write",
    risk="medium",
)
_register(
    "forge_task_create",
    "Bind a task to a running skill (or a Gateway URL and tools) and create the active task.",
    {
        **_schema(
            [],
            skill=_ID,
            goal={"type": "string", "minLength": 1},
            contract={"type": "object"},
            gateway_url=_URL,
            required_tools={"type": "array", "items": _ID, "minItems": 1, "maxItems": 64},
        ),
        "anyOf": [
            {"required": ["skill"]},
            {"required": ["goal", "contract", "gateway_url", "required_tools"]},
        ],
    },
    _create,
    side_effect="write",
    risk="medium",
)
_register(
    "forge_task_get",
    "Read the task, revisions, records, evidence and verdicts.",
    _schema(["task_id"], task_id=_ID),
    lambda s, a: _sync(s.describe(a["task_id"])),
    side_effect="read",
    risk="low",
)
_register(
    "forge_task_begin_revision",
    "Append a revision after a recovery verdict (within the replan budget and deadline).",
    _schema(["task_id", "reason"], task_id=_ID, reason={"type": "string", "minLength": 1}),
    lambda s, a: finishing.begin_revision(s, a["task_id"], a["reason"]),
    side_effect="write",
    risk="medium",
)
_register(
    "forge_task_finalize",
    "Capture evidence, verify, and end (or replan) the task.",
    _schema(["task_id"], task_id=_ID),
    lambda s, a: finishing.finalize(s, a["task_id"]),
    side_effect="write",
    risk="medium",
)
_register(
    "forge_task_cancel",
    "Cancel live Actions, stop owned Sessions, end the task.",
    _schema(["task_id"], task_id=_ID),
    lambda s, a: finishing.cancel_task(s, a["task_id"]),
    side_effect="write",
    risk="medium",
)


async def _sync(value: Any) -> Any:
    return value
