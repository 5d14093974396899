"""The PAOS agent tools: one registry of name -> description, input schema, async callable.

Transport-free: the semantic registry (and MCP) can expose these later. Every tool answers
``{"ok": true, "data": ...}`` or ``{"ok": false, "error": {type, code, message, retryable,
invocation_id?, record_id?, remote_state?}}`` and never raises for a caller mistake, nor
lets a raw ``sqlite3`` or ``OSError`` out: one that no layer classified reads
``remote_state: "unknown"`` (it may have struck after a request was sent).

Every tool also takes PhyAgentOS 1.1.1's argument shapes, so an agent prompt written for
PhyAgentOS runs unchanged: ``activate_skill`` then ``forge_task_create {task_description,
activation_id, verification}``, ``invocation_id`` wherever doraforge takes ``record_id``,
``forge_task_cancel {reason}``; they are mapped in :mod:`paos.phyagentos_shapes`. The
other shapes (``skill``, ``goal``/``contract``, ``gateway_url``, ``record_id``) are
doraforge's documented extensions (README, "Agent tools: PhyAgentOS and doraforge").

Every answer also carries PhyAgentOS's answer fields for the same call, with its names,
types and status words (:mod:`paos.phyagentos_answers`): a task tool's data is an
``AgentTaskRecord``, a Forge tool's data the Gateway's own fields, and ``activate_skill``
answers ``activation``, ``skill`` and ``applicable_lessons`` at the top of the envelope, as
PhyAgentOS does, besides ``data``. doraforge's richer fields stay beside them.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from doraforge.paos import finalize as finishing
from doraforge.paos import phyagentos_answers as answers
from doraforge.paos.binding import BindingCandidate, FrozenBinding
from doraforge.paos.errors import PaosError
from doraforge.paos.phyagentos_shapes import (
    activations,
    contract_from_phyagentos,
    record_of_invocation,
    skill_document,
)
from doraforge.paos.tasks import TaskService
from doraforge.wire.json_schema import LocalValidator, local_validator

log = logging.getLogger(__name__)

type Handler = Callable[[TaskService, dict[str, Any]], Awaitable[Any]]
type SideEffect = Literal["read", "write"]
type Risk = Literal["low", "medium", "high", "critical"]

_ID = {"type": "string", "minLength": 1, "maxLength": 200}
_ARGS = {"type": "object"}
_TIMEOUT = {"type": "integer", "minimum": 1, "maximum": 86_400_000}
#: The step an Action or Session performs ("descend", "lift"): it captions its evidence.
_STEP = {
    "type": "string",
    "minLength": 1,
    "maxLength": 80,
    "description": "the step this call performs (e.g. 'descend'); it captions the task's "
    "evidence frames and reports",
}
_URL = {"type": "string", "pattern": "^https?://", "maxLength": 2048}
_TEXT = {"type": "string", "minLength": 1}
#: A skill name as the Skill Runtime spells it (PhyAgentOS's kebab-case names included).
_SKILL = {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"}
_ACTIVATION_ID = {"type": "string", "pattern": "^activation_[a-z0-9]+$", "maxLength": 200}
_STRINGS = {"type": "array", "items": {"type": "string"}, "maxItems": 64}
#: PhyAgentOS's ``TaskVerificationContract`` (criteria and constraints are sentences).
_PHYAGENTOS_VERIFICATION = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "version": {"const": "task_verification_contract_v1"},
        "mode": {"enum": ["off", "audit", "enforce", "recovery"]},
        "goal": {"type": "string", "maxLength": 2000},
        "success_criteria": _STRINGS,
        "constraints": _STRINGS,
        "evidence_policy": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "profile": {"type": "string"},
                "required_kinds": _STRINGS,
                "required_sources": _STRINGS,
                "minimum_association": {"enum": ["best_effort", "authoritative"]},
            },
        },
    },
}


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
    #: Keys of the data also set at the envelope's top level (PhyAgentOS's
    #: ``activate_skill`` answers without a ``data`` envelope).
    lifted: tuple[str, ...] = ()

    validator: LocalValidator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Compiled once, local references only (doraforge.wire.json_schema).
        object.__setattr__(self, "validator", local_validator(self.input_schema))

    async def __call__(self, service: TaskService, arguments: Any) -> dict[str, Any]:
        errors = sorted(
            self.validator.iter_errors(arguments),
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
            data = await self.handler(service, arguments)
        except PaosError as exc:
            return {"ok": False, "error": _error_of(exc)}
        except (sqlite3.Error, OSError) as exc:
            log.error("agent tool %s: unclassified %r", self.name, exc)
            return {"ok": False, "error": _unclassified(exc)}
        return {"ok": True, "data": data, **{key: data[key] for key in self.lifted}}


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
    status_code = getattr(exc, "status_code", None)
    if isinstance(status_code, int):  # the Gateway's HTTP status, as PhyAgentOS reports it
        error["status_code"] = status_code
    remote_state = getattr(exc, "remote_state", None)
    if remote_state is not None:
        error["remote_state"] = remote_state
    if remote_state == "unknown":
        error["stopped"] = False  # PhyAgentOS's word: nothing says the robot stopped
    for name in (*_IDS, *_CELL):
        if exc.details.get(name) is not None:
            error[name] = exc.details[name]
    return error


_IDS = ("invocation_id", "attempt_id", "record_id")
#: What names a cell in a refusal: which task and runtime hold a slot, which cells an
#: ambiguous call could have meant.
_CELL = ("active_task_id", "skill", "runtime_instance_id", "task_slots", "candidates")


def _unclassified(exc: sqlite3.Error | OSError) -> dict[str, Any]:
    # Where it struck is not known, so a request may already have reached the robot:
    # reported as unknown and not retryable, never as a plain failure worth repeating.
    return {
        "type": "UnclassifiedFault",
        "code": "PAOS_UNCLASSIFIED_FAULT",
        "message": f"{type(exc).__name__}: {exc}; the outcome is unknown: reconcile, do not retry",
        "retryable": False,
        "remote_state": "unknown",
        "stopped": False,
    }


def _default_gateway(service: TaskService) -> str:
    """PhyAgentOS's shape names no Gateway: the active task's, else the latest activation's.

    With several active tasks (``per_runtime`` task slots, several cells at work) no task
    is "the" task: ``PAOS_CELL_AMBIGUOUS`` lists the candidates instead of a guess.
    """
    active = service.store.active_tasks()
    if len(active) > 1:
        candidates = [_candidate(service, task) for task in active]
        raise PaosError(
            "PAOS_CELL_AMBIGUOUS",
            f"{len(active)} tasks are active on different cells "
            f"({', '.join(str(c['skill']) for c in candidates)}); pass task_id",
            details={"candidates": candidates},
        )
    if active:
        return service.binding(active[0]).gateway_url
    latest = activations(service).latest()
    if latest is None:
        raise PaosError(
            "PAOS_NO_GATEWAY",
            "no task and no activation: pass task_id or gateway_url, or call activate_skill",
        )
    return str(latest.skill.candidate.gateway_url)


def _candidate(service: TaskService, task: Any) -> dict[str, Any]:
    """One active task as an ambiguity's candidate: its id and the cell it is bound to."""
    binding = service.binding(task)
    return {
        "task_id": task.task_id,
        "skill": binding.skill,
        "runtime_instance_id": binding.runtime_instance,
    }


async def _context(service: TaskService, a: dict[str, Any]) -> Any:
    if "task_id" in a:
        task = service.store.task(a["task_id"])
        gateway_url = service.binding(task).gateway_url
    else:
        gateway_url = a.get("gateway_url") or _default_gateway(service)
    client = service.client(gateway_url)
    spec, sha256 = await client.tool_spec(a["tool_id"])
    return answers.context_answer(spec, sha256, await client.context(a["tool_id"]))


async def _query(service: TaskService, a: dict[str, Any]) -> Any:
    return await service.query(
        a["tool_id"],
        a.get("arguments", {}),
        task_id=a.get("task_id"),
        gateway_url=a.get("gateway_url") or (None if "task_id" in a else _default_gateway(service)),
        timeout_ms=a.get("timeout_ms"),
    )


def _running_skill(service: TaskService, name: str) -> Any:
    if service.activate_skill is None:
        raise PaosError("PAOS_NO_SKILL_RUNTIME", "no Skill Runtime is configured")
    return service.activate_skill(name)


async def _activate(service: TaskService, a: dict[str, Any]) -> Any:
    """PhyAgentOS's answer (``activation``, ``skill``, ``applicable_lessons``) and
    doraforge's (``activation_id``, ``verification`` template, ``skill_document_available``)."""
    activation = activations(service).add(
        _running_skill(service, a["name"]), a.get("role", "primary")
    )
    document = skill_document(activation.skill)
    candidate = activation.skill.candidate
    return {
        "activation_id": activation.activation_id,
        "activation": activation.public(),
        "skill": document or "",
        "skill_document_available": document is not None,
        "applicable_lessons": _lessons(service, candidate.skill, candidate.version),
        "verification": activation.skill.contract,
    }


def _lessons(service: TaskService, skill: str, version: str) -> list[dict[str, Any]]:
    """The lessons of this skill version from the experience store, as PhyAgentOS's.

    Advisory, like finalize's: a store that cannot be read yields none, never a failed
    activation.
    """
    from doraforge.paos.experience import lessons

    try:
        found = lessons(service.store.episodes(skill, version), skill, version)
    except (PaosError, sqlite3.Error, OSError):
        log.exception("could not read the lessons of %s %s", skill, version)
        return []
    return [answers.lesson(item) for item in found]


async def _create(service: TaskService, a: dict[str, Any]) -> Any:
    if "activation_id" in a:
        return _task_answer(await _create_activated(service, a))
    return _task_answer(await _create_doraforge(service, a))


async def _create_activated(service: TaskService, a: dict[str, Any]) -> Any:
    skill = activations(service).primary(a["activation_id"]).skill
    description = a["task_description"]
    if "contract" in a:
        contract = a["contract"]
    elif "verification" in a or skill.contract is None:
        contract = contract_from_phyagentos(a.get("verification"), description, skill.contract)
    else:
        contract = {**skill.contract, "goal": skill.contract.get("goal") or description}
    return await service.create_task(description, contract, skill.candidate)


async def _create_doraforge(service: TaskService, a: dict[str, Any]) -> Any:
    if "skill" in a:
        activation = _running_skill(service, a["skill"])
        contract = a.get("contract") or activation.contract
        if contract is None:
            raise PaosError("PAOS_NO_CONTRACT", "the skill has no verification contract")
        goal = a.get("goal") or contract.get("goal", a["skill"])
        return await service.create_task(goal, contract, activation.candidate)
    candidate = BindingCandidate.adhoc(a["gateway_url"], a["required_tools"])
    return await service.create_task(a["goal"], a["contract"], candidate)


def _task_answer(described: dict[str, Any]) -> dict[str, Any]:
    """A task tool's answer: PhyAgentOS's ``AgentTaskRecord`` fields (``status`` is the task
    state; ``revisions`` widened to PlanRevisions) beside doraforge's full description."""
    return {**described, **answers.task_record(described)}


def _record_id(service: TaskService, a: dict[str, Any], semantics: str) -> str:
    """doraforge's ``record_id``, or the record of PhyAgentOS's ``invocation_id``."""
    record_id: str = a.get("record_id") or record_of_invocation(
        service, a["task_id"], a["invocation_id"], semantics
    )
    return record_id


def _frozen(service: TaskService, task_id: str) -> FrozenBinding | None:
    """The task's frozen binding, read once per call; ``None`` when it cannot be read."""
    try:
        return service.binding(service.store.task(task_id))
    except PaosError:
        return None


async def _gateway_reading(
    service: TaskService, binding: FrozenBinding | None, record: dict[str, Any]
) -> dict[str, Any] | None:
    """The Gateway's status of ``record``'s invocation, read only (nothing is accounted);
    ``None`` when it has none or the Gateway cannot answer: the record then speaks."""
    if binding is None or record.get("invocation_id") is None:
        return None
    try:
        reading: dict[str, Any] = await service.client(binding.gateway_url).invocation(
            record["invocation_id"]
        )
    except PaosError:
        return None
    return reading


def _bound_tool(binding: FrozenBinding | None, tool_id: str) -> dict[str, Any] | None:
    """``tool_id`` as the task's binding froze it (endpoint, operation), if it can be read."""
    tool = None if binding is None else binding.tools.get(tool_id)
    return None if tool is None else tool.model_dump()


def _start(method: str) -> Handler:
    """A start tool: doraforge's record with the Gateway's admission fields over it."""

    async def handler(service: TaskService, a: dict[str, Any]) -> Any:
        options = {"ownership": a["ownership"]} if method == "start_session" else {}
        if "step" in a:
            options["step"] = a["step"]
        record = await getattr(service, method)(
            a["task_id"], a["tool_id"], a["arguments"], timeout_ms=a.get("timeout_ms"), **options
        )
        reading = None
        if record.get("invocation_id") is not None:
            binding = _frozen(service, a["task_id"])
            reading = await _gateway_reading(service, binding, record)
        return answers.admission(record, reading)

    return handler


def _status_call(semantics: str) -> Handler:
    async def handler(service: TaskService, a: dict[str, Any]) -> Any:
        read = await service.status(a["task_id"], _record_id(service, a, semantics))
        record, invocation = read["record"], read["invocation"]
        binding = _frozen(service, a["task_id"])  # one store read for both uses below
        if invocation is None:  # doraforge did not read the Gateway; PhyAgentOS would have
            invocation = await _gateway_reading(service, binding, record)
        shaped = answers.status_answer(record, invocation, _bound_tool(binding, record["tool_id"]))
        return {**shaped, "invocation": read["invocation"]}

    return handler


def _result_call(semantics: str) -> Handler:
    async def handler(service: TaskService, a: dict[str, Any]) -> Any:
        read = await service.result(a["task_id"], _record_id(service, a, semantics))
        return answers.result_answer(read["status"], read["record"])

    return handler


def _control_call(method: str, semantics: str) -> Handler:
    async def handler(service: TaskService, a: dict[str, Any]) -> Any:
        done = await getattr(service, method)(a["task_id"], _record_id(service, a, semantics))
        return answers.control_answer(done["record"], done["control"])

    return handler


def _record_schema() -> dict[str, Any]:
    return {
        **_schema(["task_id"], task_id=_ID, record_id=_ID, invocation_id=_ID),
        "oneOf": [{"required": ["record_id"]}, {"required": ["invocation_id"]}],
    }


def _unless_ended(step: Handler) -> Handler:
    """Finalize or cancel ``step``, answering a task that has already ended as it is.

    PhyAgentOS's coordinator returns an ended task unchanged from both calls; an agent that
    cancels after finalizing (or finalizes twice) must not see an error here either.
    """

    async def handler(service: TaskService, a: dict[str, Any]) -> Any:
        if service.store.task(a["task_id"]).terminal:
            return _task_answer(service.describe(a["task_id"]))
        return _task_answer(await step(service, a))

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
    lifted: tuple[str, ...] = (),
) -> None:
    if name in TOOLS:
        raise ValueError(f"agent tool {name!r} registered twice")
    TOOLS[name] = AgentTool(name, description, schema, handler, side_effect, risk, lifted)


_register(
    "forge_tool_context",
    "Read a tool's ToolSpec and live context (readiness, binding, frames). No task needed; "
    "with neither task_id nor gateway_url, the active task's or latest activation's Gateway.",
    {
        **_schema(["tool_id"], tool_id=_ID, task_id=_ID, gateway_url=_URL),
        "not": {"required": ["task_id", "gateway_url"]},
    },
    _context,
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_query",
    "Run a Query: bound to task_id (recorded), or diagnostic (no record) on gateway_url, "
    "else the active task's or latest activation's Gateway.",
    {
        **_schema(
            ["tool_id"],
            tool_id=_ID,
            arguments=_ARGS,
            task_id=_ID,
            gateway_url=_URL,
            timeout_ms=_TIMEOUT,
        ),
        "not": {"required": ["task_id", "gateway_url"]},
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
        step=_STEP,
    ),
    _start("start_action"),
    side_effect="write",
    risk="high",
)
_register(
    "forge_tool_action_status",
    "Read an Action's phase and status.",
    _record_schema(),
    _status_call("action"),
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_action_result",
    "Read an Action's pending or terminal result.",
    _record_schema(),
    _result_call("action"),
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_cancel_action",
    "Request cancellation of an Action; acceptance is not a stop — read the status.",
    _record_schema(),
    _control_call("cancel", "action"),
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
        step=_STEP,
    ),
    _start("start_session"),
    side_effect="write",
    risk="high",
)
_register(
    "forge_tool_session_status",
    "Read a Session's phase and status.",
    _record_schema(),
    _status_call("session"),
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_session_result",
    "Read a Session's pending or terminal result.",
    _record_schema(),
    _result_call("session"),
    side_effect="read",
    risk="low",
)
_register(
    "forge_tool_stop_session",
    "Stop a Session the task owns.",
    _record_schema(),
    _control_call("stop", "session"),
    side_effect="write",
    risk="medium",
)
_register(
    "activate_skill",
    "Activate a running skill before a task: answers the activation (its activation_id is "
    "what forge_task_create binds to), the skill document, the lessons of this skill "
    "version and its verification contract template.",
    _schema(["name"], name=_SKILL, role={"enum": ["primary", "supporting"]}),
    _activate,
    side_effect="write",
    risk="low",
    lifted=("activation", "skill", "applicable_lessons"),
)
_register(
    "forge_task_create",
    "Create the active task bound to an activate_skill result (task_description, "
    "activation_id, verification); or to a running skill, or a Gateway URL and tools.",
    {
        **_schema(
            [],
            task_description=_TEXT,
            activation_id=_ACTIVATION_ID,
            verification=_PHYAGENTOS_VERIFICATION,
            skill=_ID,
            goal=_TEXT,
            contract={"type": "object"},
            gateway_url=_URL,
            required_tools={"type": "array", "items": _ID, "minItems": 1, "maxItems": 64},
        ),
        "oneOf": [
            {
                "required": ["task_description", "activation_id"],
                "not": {"anyOf": [{"required": [k]} for k in ("skill", "goal", "gateway_url")]},
            },
            {"required": ["skill"], "not": {"required": ["gateway_url"]}},
            {"required": ["goal", "contract", "gateway_url", "required_tools"]},
        ],
        "not": {"required": ["contract", "verification"]},
    },
    _create,
    side_effect="write",
    risk="medium",
)
_register(
    "forge_task_get",
    "Read the task, revisions, records, evidence and verdicts.",
    _schema(["task_id"], task_id=_ID),
    lambda s, a: _sync(_task_answer(s.describe(a["task_id"]))),
    side_effect="read",
    risk="low",
)
_register(
    "forge_task_begin_revision",
    "Append a revision after a recovery verdict (within the replan budget and deadline).",
    _schema(["task_id", "reason"], task_id=_ID, reason=_TEXT),
    lambda s, a: _answered(finishing.begin_revision(s, a["task_id"], a["reason"])),
    side_effect="write",
    risk="medium",
)
_register(
    "forge_task_finalize",
    "Capture evidence, verify, and end (or replan) the task; an ended task is answered as is.",
    _schema(["task_id"], task_id=_ID),
    _unless_ended(lambda s, a: finishing.finalize(s, a["task_id"])),
    side_effect="write",
    risk="medium",
)
_register(
    "forge_task_cancel",
    "Cancel live Actions, stop owned Sessions, end the task (the reason is recorded).",
    _schema(["task_id"], task_id=_ID, reason=_TEXT),
    _unless_ended(
        lambda s, a: finishing.cancel_task(
            s, a["task_id"], reason=a.get("reason", "agent_requested")
        )
    ),
    side_effect="write",
    risk="medium",
)


async def _sync(value: Any) -> Any:
    return value


async def _answered(described: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    return _task_answer(await described)
