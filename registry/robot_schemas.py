"""What agents see of the PAOS tools: the same tools with ``skill`` where PAOS takes a URL.

The PAOS agent tools keep ``gateway_url`` for the operator's Python API and CLI. Through
the registry (HTTP and MCP) an agent never names a URL: the diagnostic forms of
``forge_tool_context`` and ``forge_tool_query`` take the name of a running skill instead,
and ``forge_task_create`` binds only to a running skill (by name, or by the
``activation_id`` of an ``activate_skill`` result). :func:`agent_form` gives the
description and input schema an agent is offered, and refuses any schema that would
still take a URL, so a new PAOS tool with one cannot slip through unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: A skill name as the Skill Runtime spells it (also a safe path component).
SKILL: dict[str, Any] = {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"}
_CLOSED = {"type": "object", "additionalProperties": False}

type Schema = dict[str, Any]


def _skill_or_task(schema: Schema) -> Schema:
    """Diagnostic on a running skill's Gateway (``skill``) or bound to ``task_id``; with
    neither (PhyAgentOS's shape), the active task's or the latest activation's Gateway."""
    properties = {k: v for k, v in schema["properties"].items() if k != "gateway_url"}
    return {
        **_CLOSED,
        "required": list(schema.get("required", [])),
        "properties": {**properties, "skill": SKILL},
        "not": {"required": ["task_id", "skill"]},
    }


def _skill_only(schema: Schema) -> Schema:
    """A task bound to a running skill: PhyAgentOS's form (``task_description``,
    ``activation_id`` of an ``activate_skill`` result, its ``verification``) or doraforge's
    (``skill``; goal and contract default to the skill's own). Never a Gateway URL."""
    kept = ("task_description", "activation_id", "verification", "goal", "contract")
    properties = {k: schema["properties"][k] for k in kept}
    return {
        **_CLOSED,
        "properties": {"skill": SKILL, **properties},
        "oneOf": [
            {"required": ["skill"], "not": {"required": ["activation_id"]}},
            {"required": ["task_description", "activation_id"], "not": {"required": ["skill"]}},
        ],
        "not": {"required": ["contract", "verification"]},
    }


_FORMS: Mapping[str, tuple[str, Callable[[Schema], Schema]]] = {
    "forge_tool_context": (
        "Read a tool's ToolSpec and live context (readiness, binding, frames) on the "
        "Gateway of a task (task_id) or of a running skill (skill).",
        _skill_or_task,
    ),
    "forge_tool_query": (
        "Run a Query: diagnostic on a running skill's Gateway (skill, no record), or bound "
        "to task_id (recorded).",
        _skill_or_task,
    ),
    "forge_task_create": (
        "Create the active task bound to an activate_skill result (task_description, "
        "activation_id, verification) or to a running skill (skill; goal and contract "
        "default to the skill's).",
        _skill_only,
    ),
}

#: The tools whose ``skill`` argument the registry resolves to a Gateway URL itself.
SKILL_ROUTED = frozenset({"forge_tool_context", "forge_tool_query"})


def agent_form(provider: str, description: str, schema: Schema) -> tuple[str, Schema]:
    """The description and input schema offered to agents for one PAOS tool.

    Raises ``ValueError`` when the result would still accept a URL-valued argument.
    """
    form = _FORMS.get(provider)
    if form is not None:
        description, schema = form[0], form[1](schema)
    urls = sorted(_url_arguments(schema))
    if urls:
        raise ValueError(f"{provider}: an agent-facing schema must not take a URL ({urls})")
    return description, schema


def _url_arguments(schema: Any) -> set[str]:
    """Every property name, at any depth, that reads as a URL (``url``, ``*_url``)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for name in schema.get("properties", {}) or {}:
            if name == "url" or name.endswith("_url"):
                found.add(name)
        for value in schema.values():
            found |= _url_arguments(value)
    elif isinstance(schema, list):
        for item in schema:
            found |= _url_arguments(item)
    return found


# -- the frame tools (registry.frames): closed inputs, and outputs within the frame budgets.
# A result's top level stays open: an edge may add its own budget flags (``truncated``).

_TEXT_ID = {"type": "string", "minLength": 1, "maxLength": 200}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_STATE_COUNT = {"type": ["integer", "null"], "minimum": 0}

#: ``forge.camera.frame``: a running skill and optionally one of its camera sources.
CAMERA_FRAME_INPUT: Schema = {
    **_CLOSED,
    "required": ["skill"],
    "properties": {
        "skill": SKILL,
        "source": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"},
    },
}
#: ``forge.evidence.frame``: a task's evidence artifact by reference (never a path).
EVIDENCE_FRAME_INPUT: Schema = {
    **_CLOSED,
    "required": ["task_id", "artifact_id"],
    "properties": {"task_id": _TEXT_ID, "artifact_id": _TEXT_ID},
}


def _frame_image(max_width: int, max_height: int, max_bytes: int) -> Schema:
    base64_chars = 4 * -(-max_bytes // 3)
    # Over MCP ``data`` moves into the result's image block and ``dataInContent`` names the
    # block's index; through /api/tools/call it is here.
    return {
        **_CLOSED,
        "required": ["mediaType", "width", "height", "bytes", "sha256"],
        "properties": {
            "mediaType": {"const": "image/jpeg"},
            "data": {"type": "string", "contentEncoding": "base64", "maxLength": base64_chars},
            "dataInContent": {"type": "integer", "minimum": 0},
            "width": {"type": "integer", "minimum": 1, "maximum": max_width},
            "height": {"type": "integer", "minimum": 1, "maximum": max_height},
            "bytes": {"type": "integer", "minimum": 1, "maximum": max_bytes},
            "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "originalWidth": {"type": "integer", "minimum": 1},
            "originalHeight": {"type": "integer", "minimum": 1},
        },
    }


_STAMPS: Schema = {
    "seq": {"type": "integer", "minimum": 0},
    "capturedAt": {"type": "string", "format": "date-time"},
    "capturedAtNs": {"type": "string", "pattern": "^[0-9]{1,20}$"},
}
_ROBOT_STATE: Schema = {
    **_CLOSED,
    "required": ["arm", "gripper"],
    "properties": {
        "arm": {
            **_CLOSED,
            "properties": {
                "joints": {"type": "object", "additionalProperties": {"type": "number"}},
                "position": {
                    "type": ["array", "null"],
                    "items": {"type": "number"},
                    "minItems": 3,
                    "maxItems": 3,
                },
                "yaw": _NUMBER_OR_NULL,
                "moving": {"type": ["boolean", "null"]},
                "stale_ms": _STATE_COUNT,
            },
        },
        "gripper": {
            **_CLOSED,
            "properties": {
                "width": _NUMBER_OR_NULL,
                "holding": {"type": ["boolean", "null"]},
                "stale_ms": _STATE_COUNT,
            },
        },
    },
}


def camera_frame_output(max_width: int, max_height: int, max_bytes: int) -> Schema:
    """What ``forge.camera.frame`` returns: the image, its frame stamps, the robot state
    (``null`` with ``stateError`` when it could not be read)."""
    return {
        "type": "object",
        "required": ["image", "source", "seq", "capturedAt", "capturedAtNs", "state"],
        "properties": {
            "image": _frame_image(max_width, max_height, max_bytes),
            "source": {"type": "string"},
            **_STAMPS,
            "state": {"oneOf": [{"type": "null"}, _ROBOT_STATE]},
            "stateError": {
                **_CLOSED,
                "required": ["code", "toolId", "message"],
                "properties": {
                    "code": {"type": "string"},
                    "toolId": {"type": "string"},
                    "message": {"type": "string"},
                },
            },
        },
    }


def evidence_frame_output(max_width: int, max_height: int, max_bytes: int) -> Schema:
    """What ``forge.evidence.frame`` returns: the image, the artifact's identity and stamps
    and the SHA-256 of the retained bytes it was re-encoded from (never their path)."""
    required = ["image", "taskId", "artifactId", "source", "phase", "seq", "capturedAt"]
    return {
        "type": "object",
        "required": [*required, "capturedAtNs", "evidenceSha256"],
        "properties": {
            "image": _frame_image(max_width, max_height, max_bytes),
            "taskId": _TEXT_ID,
            "artifactId": _TEXT_ID,
            "source": {"type": "string"},
            "phase": {"enum": ["before", "after"]},
            **_STAMPS,
            "evidenceSha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        },
    }


# -- the task tools' answer: what a caller reads to know where the task stands is required,
# -- so a result cut to a budget (registry.result_budget) keeps it whole.

_VERDICT: Schema = {"type": ["object", "null"], "required": ["status"]}

#: What every task tool answers (``forge.task_create``, ``_get``, ``_begin_revision``,
#: ``_finalize``, ``_cancel``): doraforge's task description beside PhyAgentOS's
#: ``AgentTaskRecord`` fields. Open at every level: PAOS may add fields.
TASK_ANSWER_OUTPUT: Schema = {
    "type": "object",
    "required": ["task", "revisions", "task_id", "status", "active_revision_id"],
    "properties": {
        "task": {"type": "object", "required": ["task_id", "state", "goal"]},
        "revisions": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["revision_id", "ordinal", "verdict"],
                "properties": {"verdict": _VERDICT},
            },
        },
        "task_id": {"type": "string"},
        "status": {"type": "string"},
        "active_revision_id": {"type": "string"},
    },
}
TASK_TOOLS = frozenset(
    {
        "forge_task_create",
        "forge_task_get",
        "forge_task_begin_revision",
        "forge_task_finalize",
        "forge_task_cancel",
    }
)


def output_of(provider: str) -> Schema:
    """The output schema offered for one PAOS tool (an open object unless it is declared)."""
    return TASK_ANSWER_OUTPUT if provider in TASK_TOOLS else {"type": "object"}
