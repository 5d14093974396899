"""The one cut of a structured result to the result budgets, held to the tool's output
schema: members the schema requires stay, lists are capped, optional members go first
(largest first), then long strings are shortened; a cut that no longer validates is never
returned (:class:`ResultTooLarge`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from doraforge.registry.context.budgets import dumps
from doraforge.wire.json_schema import LocalValidator, local_validator

type Schema = Mapping[str, Any]
type Path = tuple[str | int, ...]

#: Characters kept free for the markers a cut adds (``truncated``, ``originalChars``, …).
MARKER_RESERVE = 256
#: Paths a cut names, at most (the rest are counted, not listed).
MAX_NAMED_PATHS = 20
_OPEN: Schema = {"type": "object"}
# A string whose schema says what it must look like is never shortened: a cut id or
# timestamp would be worse than leaving the whole member out.
_SHAPED_STRING = ("enum", "const", "pattern", "format", "contentEncoding")


class ResultTooLarge(Exception):
    """No cut of the result fits the budget and still matches its output schema."""

    def __init__(self, original_chars: int, max_chars: int) -> None:
        super().__init__(f"{original_chars} characters do not fit {max_chars}")
        self.original_chars, self.max_chars = original_chars, max_chars


@dataclass
class Cut:
    """A result within the budget: ``value``, and what was cut to get there."""

    value: dict[str, Any]
    original_chars: int
    elided: list[str] = field(default_factory=list)
    capped: list[str] = field(default_factory=list)
    shortened: bool = False

    @property
    def truncated(self) -> bool:
        return bool(self.elided or self.capped or self.shortened)

    def meta(self) -> dict[str, Any]:
        """The cut's record for ``_meta["doraforge/cut"]`` (empty when nothing was cut)."""
        if not self.truncated:
            return {}
        return {
            "originalChars": self.original_chars,
            "elided": self.elided[:MAX_NAMED_PATHS],
            "cappedLists": self.capped[:MAX_NAMED_PATHS],
            "shortenedStrings": self.shortened,
        }


def cut(
    value: dict[str, Any],
    schema: Schema | None = None,
    *,
    max_chars: int,
    max_items: int,
) -> Cut:
    """``value`` with lists capped at ``max_items`` and its JSON within ``max_chars``, still
    valid against ``schema`` (default: any object).

    A cut result carries ``truncated: true``, ``originalChars`` and ``elided`` (the paths
    left out) at its top level when the schema admits them; :meth:`Cut.meta` says the same
    for ``_meta``. Raises :class:`ResultTooLarge` when no valid cut fits."""
    schema = schema or _OPEN
    original = len(dumps(value))
    result = Cut({}, original)
    result.value = _cap_lists(result, value, schema, (), max_items)
    if not result.truncated and original <= max_chars:
        return result
    budget = max_chars - MARKER_RESERVE
    validator = _validator(dumps(schema))
    for shrink in (_elide_optional, _shorten_lists, _shorten_strings):
        if len(dumps(result.value)) > budget:
            shrink(result, schema, budget)
        if len(dumps(result.value)) <= budget and validator.is_valid(result.value):
            return _marked(result, validator, max_chars)
    raise ResultTooLarge(original, max_chars)


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> LocalValidator:
    """The compiled validator of one output schema (bounded patterns, local references),
    compiled once: the image path cuts the same result again at each smaller limit."""
    return local_validator(json.loads(schema_json))


def _marked(result: Cut, validator: LocalValidator, max_chars: int) -> Cut:
    """The cut with its markers at the top level, where the schema admits them and they
    fit; else unmarked there (``_meta`` still says it)."""
    markers: dict[str, Any] = {"truncated": True, "originalChars": result.original_chars}
    if result.elided:
        markers["elided"] = result.elided[:MAX_NAMED_PATHS]
    # A closed schema may still name ``truncated`` (an API tool's own flag): say that much.
    for marks in (markers, {"truncated": True}):
        marked = {**result.value, **marks}
        if len(dumps(marked)) <= max_chars and validator.is_valid(marked):
            result.value = marked
            break
    return result


# -- schema navigation: only the plain keywords; a cut judged by anything subtler is
# -- checked by the validator in the end anyway.


def _member(schema: Schema, key: str) -> Schema:
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and isinstance(properties.get(key), Mapping):
        found: Schema = properties[key]
        return found
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else {}


def _items(schema: Schema) -> Schema:
    items = schema.get("items")
    return items if isinstance(items, Mapping) else {}


def _required(schema: Schema) -> frozenset[str]:
    required = schema.get("required")
    return frozenset(required) if isinstance(required, list) else frozenset()


def _min_items(schema: Schema) -> int:
    least = schema.get("minItems")
    return least if isinstance(least, int) else 0


def _named(path: Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(result)"


# -- the stages


def _cap_lists(result: Cut, value: Any, schema: Schema, path: Path, max_items: int) -> Any:
    """A copy of ``value`` with every list cut to ``max_items`` (never below its
    ``minItems``); what is cut is never copied."""
    if isinstance(value, dict):
        return {
            key: _cap_lists(result, member, _member(schema, key), (*path, key), max_items)
            for key, member in value.items()
        }
    if isinstance(value, list):
        keep = max(max_items, _min_items(schema))
        if len(value) > keep:
            result.capped.append(_named(path))
        items = _items(schema)
        return [
            _cap_lists(result, item, items, (*path, index), max_items)
            for index, item in enumerate(value[:keep])
        ]
    return value


def _optional_members(
    value: Any, schema: Schema, path: Path
) -> Iterator[tuple[int, Path, dict[str, Any], str]]:
    """``(size, path, parent, key)`` of every member the schema does not require, reached
    through required members and list items only (an optional container is a candidate
    itself, and always larger than its parts)."""
    if isinstance(value, dict):
        required = _required(schema)
        for key, member in value.items():
            if key in required:
                yield from _optional_members(member, _member(schema, key), (*path, key))
            else:
                yield len(dumps(member)), (*path, key), value, key
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _optional_members(item, _items(schema), (*path, index))


def _elide_optional(result: Cut, schema: Schema, budget: int) -> None:
    """Leave out optional members, the largest first, until the value fits ``budget``.

    A big answer (a task with its records and evidence) keeps its small, decisive fields
    (``status``, ``verdict``, ids) whole, and everything its schema requires."""
    while len(dumps(result.value)) > budget:
        largest = max(_optional_members(result.value, schema, ()), default=None, key=lambda f: f[0])
        if largest is None:
            return
        _size, path, parent, key = largest
        del parent[key]
        result.elided.append(_named(path))


def _lists(value: Any, schema: Schema, path: Path) -> Iterator[tuple[int, Path, list[Any], int]]:
    """``(size, path, list, minItems)`` of every list in ``value``."""
    if isinstance(value, dict):
        for key, member in value.items():
            yield from _lists(member, _member(schema, key), (*path, key))
    elif isinstance(value, list):
        yield len(dumps(value)), path, value, _min_items(schema)
        for index, item in enumerate(value):
            yield from _lists(item, _items(schema), (*path, index))


def _shorten_lists(result: Cut, schema: Schema, budget: int) -> None:
    """Halve the largest list that can still shrink (never below its ``minItems``, nor
    below one item) until the value fits ``budget``."""
    while len(dumps(result.value)) > budget:
        shrinkable = [
            found for found in _lists(result.value, schema, ()) if len(found[2]) > max(1, found[3])
        ]
        if not shrinkable:
            return
        _size, path, items, least = max(shrinkable, key=lambda found: found[0])
        del items[max(1, least, len(items) // 2) :]
        name = _named(path)
        if name not in result.capped:
            result.capped.append(name)


def _shorten_strings(result: Cut, schema: Schema, budget: int) -> None:
    """Cut free-text strings to a halving limit until the value fits ``budget``."""
    limit = budget
    while len(dumps(result.value)) > budget and limit > 16:
        limit //= 2
        result.value = _capped_strings(result.value, schema, limit)
        result.shortened = True


def _capped_strings(value: Any, schema: Schema, limit: int) -> Any:
    if isinstance(value, str):
        shaped = any(word in schema for word in _SHAPED_STRING)
        return value if shaped or len(value) <= limit else value[:limit]
    if isinstance(value, list):
        return [_capped_strings(item, _items(schema), limit) for item in value]
    if isinstance(value, dict):
        return {k: _capped_strings(v, _member(schema, k), limit) for k, v in value.items()}
    return value
