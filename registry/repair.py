"""Schema-driven repair of near-miss tool arguments.

Models often get arguments almost right. Driven by the compiled validator's own errors, the
repair renames one mislabelled argument, wraps a scalar for an array property, turns a
numeric string into a number, ``"true"``/``"false"`` into booleans, a number into a string,
and clamps numbers to ``minimum``/``maximum``. The caller always re-validates: a repair can
only turn a near miss into a valid call, never make an invalid call pass. Repairs record
paths and kinds, never values, so they are safe to return and to audit.
"""

from __future__ import annotations

import copy
import difflib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from jsonschema.exceptions import ValidationError

from doraforge.wire.json_schema import LocalValidator

MAX_PASSES = 4
_MISSING = object()

type Repair = dict[str, Any]


def _path(parts: Sequence[Any]) -> str:
    return ".".join(str(p) for p in parts) or "(arguments)"


def _set(arguments: dict[str, Any], parts: Sequence[Any], value: Any) -> None:
    target: Any = arguments
    for part in parts[:-1]:
        target = target[part]
    target[parts[-1]] = value


def _number(text: str, integer: bool) -> int | float | object:
    try:
        value = float(text.strip())
    except ValueError:
        return _MISSING
    if not math.isfinite(value):
        return _MISSING
    if integer or value.is_integer():
        return int(value) if value.is_integer() else _MISSING
    return value


def _coerce(value: Any, expected: str | list[str]) -> Any:
    """``value`` converted toward one of the ``expected`` JSON types, or ``_MISSING``."""
    for kind in [expected] if isinstance(expected, str) else expected:
        if kind == "array" and not isinstance(value, list):
            return [value]
        if kind in ("number", "integer") and isinstance(value, str):
            number = _number(value, kind == "integer")
            if number is not _MISSING:
                return number
        if kind == "boolean" and isinstance(value, str) and value.strip() in ("true", "false"):
            return value.strip() == "true"
        if (
            kind == "string"
            and isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
        ):
            return str(value)
    return _MISSING


def _fix_value(arguments: dict[str, Any], error: ValidationError) -> Repair | None:
    parts = list(error.absolute_path)
    if not parts:
        return None
    if error.validator == "type":
        expected = error.validator_value  # a "type" keyword names one type or a list
        if not isinstance(expected, str | list):
            return None
        value = _coerce(error.instance, expected)
        if value is _MISSING:
            return None
        _set(arguments, parts, value)
        return {"kind": "coerce", "path": _path(parts), "to": error.validator_value}
    if error.validator in ("minimum", "maximum") and isinstance(error.instance, int | float):
        _set(arguments, parts, error.validator_value)
        return {"kind": "clamp", "path": _path(parts), "bound": error.validator}
    return None


def _rename(
    arguments: dict[str, Any], schema: bool | Mapping[str, Any], errors: list[ValidationError]
) -> Repair | None:
    """Rename the single unknown top-level key to the one known key it most likely meant."""
    if not isinstance(schema, Mapping):  # a true/false schema names no keys
        return None
    known = schema.get("properties", {})
    unknown = [key for key in arguments if key not in known]
    if len(unknown) != 1 or not any(e.validator == "additionalProperties" for e in errors):
        return None
    missing = [key for key in schema.get("required", []) if key not in arguments]
    if len(missing) == 1:
        target = missing[0]
    else:
        absent = [key for key in known if key not in arguments]
        matches = difflib.get_close_matches(unknown[0], absent, n=2, cutoff=0.6)
        if len(matches) != 1:
            return None
        target = matches[0]
    arguments[target] = arguments.pop(unknown[0])
    return {"kind": "rename", "from": unknown[0], "to": target}


def repair(
    validator: LocalValidator, arguments: dict[str, Any]
) -> tuple[dict[str, Any], list[Repair]]:
    """Arguments repaired as far as the schema allows, and the repairs made.

    The input is never mutated. The result may still be invalid; validate it again.
    """
    schema = validator.schema
    repairs: list[Repair] = []
    current = arguments
    for _ in range(MAX_PASSES):
        errors = list(validator.iter_errors(current))
        if not errors:
            break
        if current is arguments:
            current = copy.deepcopy(arguments)
        made = [r for r in (_fix_value(current, e) for e in errors) if r is not None]
        if not made and (renamed := _rename(current, schema, errors)) is not None:
            made.append(renamed)
        if not made:
            break
        repairs.extend(made)
    return current, repairs
