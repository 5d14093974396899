"""``doraforge tools describe TOOL``: a tool's description, input schema and an example
``tools call`` line whose arguments are built from the schema (every required property)."""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Mapping
from typing import Any

from doraforge.cli.context import Context

_PLACEHOLDERS: dict[str, Any] = {
    "string": "text",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "array": [],
    "null": None,
}


def example_value(schema: Mapping[str, Any]) -> Any:
    """A value ``schema`` accepts, for an example call: its ``const``, ``default``, first
    ``examples`` or ``enum`` value, else its first ``oneOf``/``anyOf`` alternative's, an
    object of its required properties, an array of ``minItems`` examples of its items, a
    number within its bounds, or a placeholder of its type."""
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    for key in ("examples", "enum"):
        if schema.get(key):
            return schema[key][0]
    for key in ("oneOf", "anyOf"):
        if schema.get(key):
            return example_value(schema[key][0])
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object" or "properties" in schema:
        return example_arguments(schema)
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return [example_value(schema["items"])] * int(schema.get("minItems", 0))
    if kind in ("integer", "number"):
        return _example_number(schema)
    return _PLACEHOLDERS.get(str(kind), "…")


def _example_number(schema: Mapping[str, Any]) -> Any:
    """The lower bound of a number, else (a bound it must exceed) its upper bound or one
    above that exclusive bound, else 0."""
    if "minimum" in schema:
        return schema["minimum"]
    if "exclusiveMinimum" in schema:
        return schema.get("maximum", schema["exclusiveMinimum"] + 1)
    return 0


def example_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An example object with every required property of ``schema``, and its first
    properties besides while it has fewer than ``minProperties``."""
    properties = schema.get("properties", {})
    names = list(schema.get("required", []))
    spare = (name for name in properties if name not in names)
    while len(names) < int(schema.get("minProperties", 0)) and (name := next(spare, None)):
        names.append(name)
    return {name: example_value(properties.get(name, {})) for name in names}


def example_command(tool_id: str, where: str, arguments: Mapping[str, Any]) -> str:
    """The ``doraforge tools call`` line running ``tool_id`` with ``arguments``."""
    text = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    return f"doraforge tools call {tool_id} {where} --args {shlex.quote(text)}"


def register(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``tools describe`` to the ``tools`` subcommands; returns its parser."""
    command = tools.add_parser(
        "describe",
        help="a tool's description, input schema and an example call",
        description="Print TOOL's kind, full description, input schema and a `tools call` "
        "line with example arguments built from the schema.",
    )
    command.add_argument("tool_id")
    command.set_defaults(handler=run_describe)
    return command


def run_describe(ctx: Context, args: argparse.Namespace) -> int:
    """The ``tools describe`` handler."""
    from doraforge.cli.errors import where
    from doraforge.cli.task_commands import gateway_client

    async def read(client: Any) -> Any:
        spec, _ = await client.tool_spec(args.tool_id)
        return spec

    spec = gateway_client(ctx, args, read)
    schema = spec.get("input_schema") or {}
    arguments = example_arguments(schema)
    command = example_command(args.tool_id, where(args), arguments)
    if ctx.out.as_json:
        ctx.out.data({"tool": spec, "example_arguments": arguments, "example_command": command})
        return 0
    ctx.out.say(f"{spec['tool_id']} ({spec.get('semantics')})")
    ctx.out.say(str(spec.get("description") or ""))
    ctx.out.say("input schema:")
    print(json.dumps(schema, indent=2, sort_keys=True))
    ctx.out.say("example:")
    print(command)
    return 0
