"""A JSON Schema refusal in words: where it failed (a missing property at its own path)
and what belongs there, for the Gateway's and the registry's argument errors alike."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jsonschema.exceptions import ValidationError


def expected_text(schema: Mapping[str, Any]) -> str:
    """A sub-schema in a few words: its type or enum, and its bounds (``number 0..3600``)."""
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(value) for value in schema["enum"])
    kind = schema.get("type")
    words = "/".join(kind) if isinstance(kind, list) else str(kind or "")
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        words += f" {'' if low is None else low}..{'' if high is None else high}"
    if kind == "object" and schema.get("required"):
        words += f" with {', '.join(schema['required'])}"
    return words.strip()


def located(error: ValidationError, instance: Any) -> tuple[list[Any], dict[str, Any]]:
    """The failing location and its sub-schema; a missing required property is located at
    the property itself (``$.target``), not at the object that lacks it."""
    where = list(error.path)
    schema: Any = error.schema
    if error.validator == "required" and isinstance(schema, Mapping):
        node: Any = instance
        for part in where:
            node = node[part]
        required: list[str] = list(error.validator_value)  # type: ignore[arg-type]
        missing = [name for name in required if isinstance(node, Mapping) and name not in node]
        if missing:
            found = schema.get("properties", {}).get(missing[0], {})
            return [*where, missing[0]], dict(found) if isinstance(found, Mapping) else {}
    return where, dict(schema) if isinstance(schema, Mapping) else {}


def json_path(parts: Sequence[Any]) -> str:
    """``$.a[0].b`` for the path parts ``["a", 0, "b"]``."""
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts)
