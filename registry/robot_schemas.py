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
