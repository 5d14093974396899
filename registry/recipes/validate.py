"""A definition checked against the tools registered now, and each step tool's fingerprint.

At save every step tool must exist under its listed name (or its catalog id), be a read,
be offered to the ``agent`` scope (an agent runs the recipe, so a tool it could not call
itself is refused even when the operator could), not be a recipe itself, and take the
step's arguments:
each binding is replaced by a placeholder drawn from the schema it comes from (a recipe
input's own schema), or, where none can be drawn (a pattern, a step result), left
unchecked at that spot while everything around it is still checked (required arguments,
unknown ones, literals). The fingerprint of each step tool's contract is recorded with the
revision; a later difference is schema drift and the recipe fails closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from doraforge.registry.errors import Unprocessable
from doraforge.registry.model import ToolEntry
from doraforge.registry.recipes.definition import (
    MAX_REPORTED_ERRORS,
    ArgPath,
    Definition,
    InputBinding,
    Step,
    binding_of,
    invalid,
)
from doraforge.wire.canonical import sha256_hex
from doraforge.wire.json_schema import SchemaRefused, local_validator

if TYPE_CHECKING:
    from doraforge.registry.service import RegistryService

AGENT_SCOPE = "agent"
MAX_MESSAGE_CHARS = 300


class _Unchecked:
    """Stands where a binding's value cannot be drawn from a schema."""


UNCHECKED = _Unchecked()


def fingerprint(entry: ToolEntry) -> str:
    """SHA-256 of what a recipe relies on in a tool: its version, schemas and side effect."""
    return sha256_hex(
        {
            "version": entry.version,
            "input_schema": entry.input_schema,
            "output_schema": entry.output_schema,
            "sideEffect": entry.policy.sideEffect,
        }
    )


def validate(definition: Definition, service: RegistryService) -> dict[str, str]:
    """Check ``definition`` against the tools registered on ``service`` and return the
    fingerprint of each step tool by name. Raises :class:`Unprocessable` with
    ``RECIPE_TOOL_UNKNOWN``, ``RECIPE_NESTED``, ``RECIPE_WRITE_TOOL``,
    ``RECIPE_TOOL_OUT_OF_SCOPE`` or ``RECIPE_INVALID`` (a schema or arguments that do not
    fit), naming the step."""
    _check_input_schema(definition.input_schema)
    prints: dict[str, str] = {}
    for number, step in enumerate(definition.steps, start=1):
        entry = step_tool(step, number, service)
        _check_arguments(definition, step, number, entry)
        prints[entry.name] = fingerprint(entry)
    return prints


#: Keywords that point a schema elsewhere: a recipe's own schema must be whole in itself,
#: so checking an agent's arguments never looks anything up.
REFERENCES = frozenset({"$ref", "$dynamicRef", "$recursiveRef", "$id", "$anchor", "$dynamicAnchor"})


def _check_input_schema(schema: dict[str, Any]) -> None:
    used = sorted(_references(schema))
    if used:
        raise invalid(f"input_schema may not use {used[0]}: write the schema out in full")
    try:
        local_validator(schema)
    except SchemaRefused as exc:
        raise invalid(f"input_schema is not a valid JSON Schema: {exc.message}") from exc


def _references(value: Any) -> set[str]:
    """Every reference keyword used anywhere in ``value``."""
    found: set[str] = set()
    if isinstance(value, dict):
        found = {key for key in value if key in REFERENCES}
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found |= _references(item)
    return found


def _refuse(code: str, message: str, number: int, tool: str) -> Unprocessable:
    return Unprocessable(code, message, details={"step": number, "tool": tool})


def step_tool(step: Step, number: int, service: RegistryService) -> ToolEntry:
    """The registered tool step ``number`` calls, if a recipe may call it (see
    :func:`validate` for the refusals)."""
    entry = service.resolve(step.tool)
    tool = step.tool
    where = f"step {number}: {tool}"
    if entry is None:
        raise _refuse("RECIPE_TOOL_UNKNOWN", f"{where} is not a registered tool", number, tool)
    if tool not in (entry.listed_name, entry.name):
        message = f"{where} is another name of {entry.listed_name}; use that"
        raise _refuse("RECIPE_INVALID", message, number, tool)
    if entry.origin is not None:
        raise _refuse("RECIPE_NESTED", f"{where} is a recipe; inline its steps", number, tool)
    if entry.policy.sideEffect != "read":
        message = f"{where} writes; a recipe calls read tools only"
        raise _refuse("RECIPE_WRITE_TOOL", message, number, tool)
    if AGENT_SCOPE not in entry.policy.scopes:
        message = f"{where} is not offered to agents (scopes {entry.policy.scopes})"
        raise _refuse("RECIPE_TOOL_OUT_OF_SCOPE", message, number, tool)
    return entry


def placeholder(schema: Any) -> Any:
    """A value that ``schema`` accepts, or :data:`UNCHECKED` when none is evident."""
    if not isinstance(schema, Mapping):
        return UNCHECKED
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    for key in ("enum", "examples"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema[key][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return _typed(kind, schema)


def _typed(kind: Any, schema: Mapping[str, Any]) -> Any:
    if kind == "string" and not {"pattern", "format"} & set(schema):
        length = schema.get("minLength", 1)
        return "x" * length if isinstance(length, int) and length <= 64 else UNCHECKED
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)
        return low if isinstance(low, int | float) and not isinstance(low, bool) else UNCHECKED
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array" and not schema.get("minItems"):
        return []
    if kind == "object" and not schema.get("required"):
        return {}
    return UNCHECKED


def _with_placeholders(
    value: Any, inputs: Mapping[str, Any], number: int, path: ArgPath, unchecked: list[ArgPath]
) -> Any:
    """``value`` with each binding replaced by its placeholder; records unchecked spots."""
    binding = binding_of(value, number) if isinstance(value, dict) else None
    if binding is not None:
        drawn = (
            placeholder(inputs.get(binding.field))
            if isinstance(binding, InputBinding)
            else UNCHECKED
        )
        if drawn is UNCHECKED:
            unchecked.append(path)
            return None
        return drawn
    if isinstance(value, dict):
        return {
            k: _with_placeholders(v, inputs, number, (*path, k), unchecked)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            _with_placeholders(v, inputs, number, (*path, i), unchecked)
            for i, v in enumerate(value)
        ]
    return value


def _check_arguments(definition: Definition, step: Step, number: int, entry: ToolEntry) -> None:
    inputs = definition.input_schema.get("properties", {})
    unchecked: list[ArgPath] = []
    instance = _with_placeholders(step.arguments, inputs, number, (), unchecked)
    try:
        validator = local_validator(entry.input_schema)
    except SchemaRefused as exc:  # a registered tool's schema passed this at registration
        raise _refuse(exc.code, f"step {number}: {exc.message}", number, entry.name) from exc
    errors = [
        error
        for error in validator.iter_errors(instance)
        if not any(tuple(error.absolute_path)[: len(spot)] == spot for spot in unchecked)
    ]
    if not errors:
        return
    raise Unprocessable(
        "RECIPE_INVALID",
        f"step {number}: the arguments do not fit {entry.name}'s input schema: "
        f"{errors[0].message[:MAX_MESSAGE_CHARS]}",
        details={
            "step": number,
            "tool": entry.name,
            "errors": [
                {
                    "path": ".".join(str(p) for p in e.absolute_path) or "(arguments)",
                    "message": e.message[:MAX_MESSAGE_CHARS],
                }
                for e in errors[:MAX_REPORTED_ERRORS]
            ],
        },
    )
