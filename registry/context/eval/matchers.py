"""JSON pointers with ``*`` and the declarative matchers of an :class:`Expectation`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from doraforge.registry.context import budgets
from doraforge.registry.context.eval.schema import Expectation, expand

#: What a pointer selects where nothing exists.
MISSING: Any = object()


def select(document: Any, pointer: str) -> list[tuple[str, Any]]:
    """Every ``(concrete pointer, value)`` that ``pointer`` selects in ``document``; a ``*``
    segment selects each member of an array or object; a value that does not exist is
    :data:`MISSING` (only without ``*`` is a missing value selected at all)."""
    found: list[tuple[str, Any]] = [("", document)]
    for token in tokens(pointer):
        found = [pair for where, value in found for pair in _step(where, value, token)]
    return found


def tokens(pointer: str) -> list[str]:
    """The unescaped reference tokens of an RFC 6901 pointer (``*`` is the wildcard, so a
    member literally named ``*`` cannot be addressed)."""
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _escaped(token: object) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def _step(where: str, value: Any, token: str) -> Iterator[tuple[str, Any]]:
    if token == "*":
        members: list[tuple[object, Any]] = []
        if isinstance(value, list):
            members = list(enumerate(value))
        elif isinstance(value, dict):
            members = list(value.items())
        yield from ((f"{where}/{_escaped(key)}", member) for key, member in members)
        return
    here = f"{where}/{_escaped(token)}"
    if isinstance(value, dict):
        yield here, value.get(token, MISSING)
    elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
        yield here, value[int(token)]
    else:
        yield here, MISSING


def dumps(value: Any) -> str:
    """Canonical compact JSON (sorted keys): what values are compared and measured as."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def same(left: Any, right: Any) -> bool:
    """JSON equality that tells ``true`` from ``1`` and ``1`` from ``1.0``."""
    return dumps(left) == dumps(right)


def brief_text(text: str, limit: int = 80) -> str:
    """``text`` on one line, cut to ``limit`` characters (a report line stays short)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def brief(value: Any, limit: int = 80) -> str:
    """``value`` as compact JSON (strings quoted) for a reason, cut to ``limit``."""
    return brief_text(dumps(value), limit)


def estimate_tokens(value: Any) -> int:
    """The contract's own documented estimate (``limits.tokenEstimator`` of
    ``context_profile``) of the tokens ``value``'s compact JSON takes."""
    return budgets.estimate_tokens(budgets.dumps(value))


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}


def _type_problem(name: str, value: Any) -> str | None:
    # bool is an int subclass in Python, but not a number in JSON
    numeric_bool = name in {"integer", "number"} and isinstance(value, bool)
    ok = isinstance(value, _TYPES[name]) and not numeric_bool
    return None if ok else f"is {brief(value)}, not of type {name}"


def _contains(value: Any, wanted: Any) -> bool:
    if isinstance(value, str):
        return isinstance(wanted, str) and wanted in value
    if isinstance(value, list):
        return any(same(member, wanted) for member in value)
    if isinstance(value, dict):
        return isinstance(wanted, str) and wanted in value
    return False


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(dumps(value))


def value_problem(expectation: Expectation, value: Any) -> str | None:
    """Why one selected ``value`` fails ``expectation``'s per-value matchers, or ``None``."""
    e, given = expectation, expectation.given
    if value is MISSING:
        return "does not exist"
    if given("equals") and not same(value, expand(e.equals)):
        return f"is {brief(value)}, expected {brief(expand(e.equals))}"
    if given("not_equals") and same(value, expand(e.not_equals)):
        return f"is {brief(value)}, which it must not be"
    if e.type is not None and (problem := _type_problem(e.type, value)):
        return problem
    if given("contains") and not _contains(value, expand(e.contains)):
        return f"is {brief(value)}, which does not contain {brief(expand(e.contains))}"
    if e.not_contains is not None and e.not_contains in dumps(value):
        return f"contains {brief(e.not_contains)}, which must never appear"
    if e.matches is not None and not (isinstance(value, str) and re.search(e.matches, value)):
        return f"is {brief(value)}, which does not match /{e.matches}/"
    return _size_problem(e, value)


def _size_problem(e: Expectation, value: Any) -> str | None:
    if e.max_chars is not None and _size(value) > e.max_chars:
        return f"is {_size(value)} characters long, over {e.max_chars}"
    length = len(value) if isinstance(value, list | dict) else None
    if (e.min_items is not None or e.max_items is not None) and length is None:
        return f"is {brief(value)}, not an array"
    if e.min_items is not None and length is not None and length < e.min_items:
        return f"has {length} items, fewer than {e.min_items}"
    if e.max_items is not None and length is not None and length > e.max_items:
        return f"has {length} items, more than {e.max_items}"
    if e.max_tokens is not None and estimate_tokens(value) > e.max_tokens:
        return f"is about {estimate_tokens(value)} tokens, over {e.max_tokens}"
    return _bound_problem(e, value)


def _bound_problem(e: Expectation, value: Any) -> str | None:
    if e.min is None and e.max is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return f"is {brief(value)}, not a number"
    if e.min is not None and value < e.min:
        return f"is {value}, below {e.min:g}"
    if e.max is not None and value > e.max:
        return f"is {value}, above {e.max:g}"
    return None


def collection(selected: list[tuple[str, Any]], pointer: str) -> list[Any]:
    values = [value for _, value in selected if value is not MISSING]
    if "*" not in tokens(pointer) and len(values) == 1 and isinstance(values[0], list):
        return list(values[0])
    return values


def collection_problem(expectation: Expectation, values: list[Any]) -> str | None:
    """Why the selected values together fail ``setEquals`` or ``includes``, or ``None``."""
    have = {dumps(value) for value in values}
    if expectation.set_equals is not None:
        wanted = {dumps(value) for value in expand(expectation.set_equals)}
        if have != wanted:
            missing, extra = _decoded(wanted - have), _decoded(have - wanted)
            return f"selects {brief(_decoded(have))}: lacks {brief(missing)}, extra {brief(extra)}"
    if expectation.includes is not None:
        missing = [v for v in expand(expectation.includes) if dumps(v) not in have]
        if missing:
            return f"selects {brief(_decoded(have))}, which lacks {brief(missing)}"
    return None


def _decoded(encoded: set[str] | list[str]) -> list[Any]:
    return [json.loads(text) for text in sorted(encoded)]
