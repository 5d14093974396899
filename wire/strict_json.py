"""One strict JSON reader for everything that arrives.

Refused, each with its own code: malformed text or bytes that are not UTF-8, duplicate
object keys, ``NaN``/``Infinity`` and numbers that overflow to infinity, integers outside
±(2^53-1) (checked on the digits before any conversion, so a 100,000-digit integer costs
nothing), and nesting deeper than ``max_depth``. Every refusal is a :class:`JSONRefused`
(a ``ValueError``) that never escapes as anything else: not ``RecursionError``, not the
interpreter's integer-digit limit.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from doraforge.wire.errors import StructuredError

MAX_SAFE_INTEGER = 2**53 - 1
MAX_DEPTH = 64
# 2^53 - 1 has 16 digits; anything longer (sign aside) is out of range without parsing.
_MAX_INT_DIGITS = 16
# A JSON escape of a UTF-16 surrogate: the only way a parsed string can hold a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class JSONRefused(StructuredError, ValueError):
    """JSON that the wire rules refuse; ``code`` names the rule.

    A duplicate key names itself in ``details["key"]`` (its first 64 characters).
    """


def loads(data: str | bytes, *, max_depth: int = MAX_DEPTH, structure: bool = True) -> Any:
    """Parse ``data`` under the wire rules; raises :class:`JSONRefused`.

    ``structure=False`` leaves nesting depth (past what the parser itself can reach) and
    lone surrogates to the caller: the ToolMessage codec holds those two to forge-tool's
    own walk, whose error codes the Provider Wire prescribes.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONRefused("INVALID_JSON", "the body is not UTF-8") from exc
    try:
        value = json.loads(
            data,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_int=_safe_int,
            parse_float=_finite_float,
        )
    except JSONRefused:
        raise
    except RecursionError as exc:
        raise JSONRefused("JSON_TOO_DEEP", f"nesting exceeds {max_depth} levels") from exc
    except ValueError as exc:  # json.JSONDecodeError included
        raise JSONRefused("INVALID_JSON", f"malformed JSON: {exc}") from exc
    if not structure:
        return value
    # Cheap pre-filter: only text with enough brackets can be too deep.
    if data.count("{") + data.count("[") > max_depth and depth(value) > max_depth:
        raise JSONRefused("JSON_TOO_DEEP", f"nesting exceeds {max_depth} levels")
    if escapes_a_surrogate(data) and _has_lone_surrogate(value):
        raise JSONRefused("JSON_LONE_SURROGATE", "a string holds a lone UTF-16 surrogate")
    return value


def escapes_a_surrogate(text: str) -> bool:
    """Whether JSON ``text`` holds a ``\\uD800``-``\\uDFFF`` escape: the only way a string
    parsed from it can hold a lone surrogate (a cheap filter before walking the value)."""
    return "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None


def depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level + 1)
        stack.extend((child, level + 1) for child in children)
    return deepest


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, item in pairs:
        if key in result:
            raise JSONRefused(
                "JSON_DUPLICATE_KEY",
                f"duplicate object key {key[:64]!r}",
                details={"key": key[:64]},
            )
        result[key] = item
    return result


def _no_constant(name: str) -> None:
    raise JSONRefused("JSON_NON_FINITE", f"non-finite number {name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):  # "1e999" parses to infinity without passing parse_constant
        raise JSONRefused("JSON_NON_FINITE", f"number {text[:32]} is not finite")
    return number


def _safe_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS or abs(number := int(text)) > MAX_SAFE_INTEGER:
        raise JSONRefused(
            "JSON_UNSAFE_INTEGER", "an integer exceeds the interoperable range ±(2^53-1)"
        )
    return number
