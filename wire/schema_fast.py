"""A JSON Schema subset compiled once into plain Python checks, for the valid-call path.

The Gateway checks every Query's arguments and outputs against its ToolSpec's schemas,
and the registry every call's arguments against the tool's input schema; ``jsonschema``
walks a schema keyword by keyword through its generic machinery, about 10 µs for the
smallest one, on each of them. The ToolSpecs shipped here use a small
subset of Draft 2020-12 (types, properties, required, additionalProperties, bounds,
lengths, string enums, items), which :func:`compile_schema` turns into a predicate
that is exactly ``Draft202012Validator(schema).is_valid`` for that subset. A schema
with any other keyword (``$ref``, ``oneOf``, ``pattern`` ...) does not compile and keeps
``jsonschema`` alone; a failing instance is always re-checked by ``jsonschema`` for its
message (:class:`~doraforge.gateway.catalog.CompiledSchema`, and the registry's
``RegisteredTool.arguments_valid``). ``tests/wire/test_schema_fast.py`` holds the
predicate to ``jsonschema`` on random schemas and instances.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

type Check = Callable[[Any], bool]

# Keywords that only annotate: Draft202012Validator without a format checker asserts none.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
    }
)
_TYPES: dict[str, Check] = {
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (
        not isinstance(v, bool)
        and (isinstance(v, int) or (isinstance(v, float) and v.is_integer()))
    ),
    "null": lambda v: v is None,
    "number": lambda v: not isinstance(v, bool) and isinstance(v, numbers.Number),
    "object": lambda v: isinstance(v, dict),
    "string": lambda v: isinstance(v, str),
}
# Each bound as jsonschema words its failure (``instance < minimum`` ...), negated.
_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": lambda v, b: not v < b,
    "maximum": lambda v, b: not v > b,
    "exclusiveMinimum": lambda v, b: not v <= b,
    "exclusiveMaximum": lambda v, b: not v >= b,
}


class NotCompiled(Exception):
    """The schema uses a keyword (or a form of one) outside the compiled subset."""


def compile_schema(schema: Any) -> Check | None:
    """A predicate equal to Draft 2020-12 validity of ``schema``, or ``None`` when the
    schema is outside the subset this module compiles."""
    try:
        return _compile(schema)
    except NotCompiled:
        return None


def _compile(schema: Any) -> Check:
    if schema is True or schema is False:
        return (lambda _v: True) if schema else (lambda _v: False)
    if not isinstance(schema, Mapping):
        raise NotCompiled
    unknown = set(schema) - _ANNOTATIONS - _KEYWORDS.keys()
    if unknown:
        raise NotCompiled
    checks = [_KEYWORDS[name](schema[name], schema) for name in schema if name not in _ANNOTATIONS]
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _type(names: Any, _schema: Mapping[str, Any]) -> Check:
    listed = [names] if isinstance(names, str) else names
    if not isinstance(listed, list) or not listed or any(n not in _TYPES for n in listed):
        raise NotCompiled
    tests = [_TYPES[name] for name in listed]
    return lambda value: any(test(value) for test in tests)


def _properties(properties: Any, _schema: Mapping[str, Any]) -> Check:
    if not isinstance(properties, Mapping):
        raise NotCompiled
    compiled = {name: _compile(sub) for name, sub in properties.items()}

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        return all(sub(value[name]) for name, sub in compiled.items() if name in value)

    return check


def _additional(additional: Any, schema: Mapping[str, Any]) -> Check:
    known = frozenset(schema.get("properties") or ())
    sub = _compile(additional)

    def check(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        return all(sub(item) for key, item in value.items() if key not in known)

    return check


def _required(names: Any, _schema: Mapping[str, Any]) -> Check:
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise NotCompiled
    return lambda value: not isinstance(value, dict) or all(n in value for n in names)


def _items(items: Any, _schema: Mapping[str, Any]) -> Check:
    sub = _compile(items)
    return lambda value: not isinstance(value, list) or all(sub(item) for item in value)


def _size(
    kind: type[list[Any]] | type[str] | type[dict[str, Any]], at_least: bool
) -> Callable[[Any, Mapping[str, Any]], Check]:
    """``minItems``/``maxLength``-like: a bound on ``len`` of values of ``kind``."""

    def keyword(bound: Any, _schema: Mapping[str, Any]) -> Check:
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
            raise NotCompiled
        if at_least:
            return lambda value: not isinstance(value, kind) or len(value) >= bound
        return lambda value: not isinstance(value, kind) or len(value) <= bound

    return keyword


def _bound(name: str) -> Callable[[Any, Mapping[str, Any]], Check]:
    compare = _BOUNDS[name]

    def keyword(bound: Any, _schema: Mapping[str, Any]) -> Check:
        if isinstance(bound, bool) or not isinstance(bound, int | float):
            raise NotCompiled
        number = _TYPES["number"]
        return lambda value: not number(value) or compare(value, bound)

    return keyword


def _enum(members: Any, _schema: Mapping[str, Any]) -> Check:
    # Only string members: jsonschema's equality then is plain ``==`` on strings, and no
    # other value equals a string (bool/int/float subtleties never arise).
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        raise NotCompiled
    allowed = frozenset(members)
    return lambda value: isinstance(value, str) and value in allowed


_KEYWORDS: dict[str, Callable[[Any, Mapping[str, Any]], Check]] = {
    "type": _type,
    "properties": _properties,
    "additionalProperties": _additional,
    "required": _required,
    "items": _items,
    "minItems": _size(list, True),
    "maxItems": _size(list, False),
    "minLength": _size(str, True),
    "maxLength": _size(str, False),
    "minProperties": _size(dict, True),
    "maxProperties": _size(dict, False),
    "enum": _enum,
    **{name: _bound(name) for name in _BOUNDS},
}
