"""Every JSON Schema from outside compiles here, against local references only: a remote,
dangling or looping ``$ref`` is refused with a code at compile time, and the validator's own
reference registry refuses retrieval, so no schema ever makes doraforge dial; a ``pattern``
is matched with a time bound (per string and per validation) and must stay small once its
repetitions are counted out, so no argument can hold the event loop or crash the matcher."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from re import _parser as sre_parser  # the stdlib's own parser, for a pattern's shape
from typing import TYPE_CHECKING, Any, NoReturn

import regex
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator

# The bundled meta-schemas jsonschema itself resolves from; the package ships no py.typed.
from jsonschema_specifications import REGISTRY as SPECIFICATIONS  # type: ignore[import-untyped]
from referencing import Registry
from referencing.exceptions import Unresolvable, Unretrievable
from referencing.jsonschema import DRAFT202012

from doraforge.wire.errors import StructuredError

if TYPE_CHECKING:  # referencing names its resolver type only in a private module
    from referencing._core import Resolved, Resolver

#: The keywords a Draft 2020-12 validator follows to another schema.
REFERENCE_KEYWORDS = ("$ref", "$dynamicRef")
MAX_MESSAGE_CHARS = 200
#: How long one ``pattern`` may take on one string: a backtracking pattern from outside
#: (``^(a|aa)+$``) would otherwise hold the registry's event loop for minutes.
PATTERN_TIMEOUT_S = 0.05
#: How long all the patterns of one validation may take together: a thousand near-misses of
#: 50 ms each would otherwise hold the loop for a minute.
VALIDATION_PATTERN_BUDGET_S = 0.2
#: How large a pattern may be once its repetitions are counted out (``(?:(?:ab|c){1000}){1000}``
#: makes the ``regex`` library unroll millions of nodes and crash the process).
MAX_PATTERN_WEIGHT = 100_000
#: How deeply a pattern's groups may nest (the ``regex`` parser recurses three frames a level).
MAX_PATTERN_DEPTH = 50


class SchemaRefused(StructuredError, ValueError):
    """A schema that cannot be compiled here; ``code`` says why:

    - ``SCHEMA_INVALID``: not a Draft 2020-12 schema;
    - ``SCHEMA_REF_REMOTE``: a reference to a document outside it (``details["ref"]``);
    - ``SCHEMA_REF_UNRESOLVABLE``: a local reference to nothing;
    - ``SCHEMA_REF_CYCLE``: references that loop without a step into the instance."""


class _RetrievalRefused(Exception):
    """Raised by the registry's retrieve hook: nothing outside a schema is ever fetched."""


def _refuse_retrieval(uri: str) -> NoReturn:
    raise _RetrievalRefused(uri)


#: References resolve against the schema itself and the bundled meta-schemas only.
LOCAL_REGISTRY: Registry[Any] = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
_RESOLVING: Registry[Any] = SPECIFICATIONS.combine(LOCAL_REGISTRY)


#: When the patterns of the validation under way must be done (``None``: no budget set).
_DEADLINE: ContextVar[float | None] = ContextVar("pattern_deadline", default=None)


@contextlib.contextmanager
def _pattern_budget() -> Iterator[None]:
    """One validation's budget for its patterns (an enclosing one's, when nested)."""
    if _DEADLINE.get() is not None:
        yield
        return
    token = _DEADLINE.set(time.monotonic() + VALIDATION_PATTERN_BUDGET_S)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _matches(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` finds a match in ``text``; ``None`` when it ran out of time."""
    timeout = PATTERN_TIMEOUT_S
    if (deadline := _DEADLINE.get()) is not None:
        timeout = min(timeout, deadline - time.monotonic())
        if timeout <= 0:
            return None
    try:
        return regex.search(pattern, text, timeout=timeout) is not None
    except TimeoutError:
        return None


def _no_match(pattern: str, text: str) -> ValidationError | None:
    found = _matches(pattern, text)
    if found:
        return None
    shown = repr(text[:40]) + ("…" if len(text) > 40 else "")
    why = "took too long to match" if found is None else "does not match"
    return ValidationError(f"{shown} {why} {pattern[:MAX_MESSAGE_CHARS]!r}")


# The keyword callbacks receive an instance of the class extend() builds from Draft 2020-12
# (it has every method of Draft202012Validator; the protocol names fewer).
def _pattern(
    validator: Draft202012Validator, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and (error := _no_match(pattern, instance)):
        yield error


def _pattern_properties(
    validator: Draft202012Validator,
    patterns: Mapping[str, Any],
    instance: Any,
    schema: Mapping[str, Any],
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            found = _matches(pattern, name)
            if found is None:  # one error says it; the other pairs would only add to the wait
                yield ValidationError(f"property {name[:40]!r} took too long to match {pattern!r}")
                return
            if found:
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _matches_any(patterns: list[str], name: str) -> bool | None:
    """Whether any of ``patterns`` matches ``name``; ``None`` when one ran out of time."""
    for pattern in patterns:
        found = _matches(pattern, name)
        if found is None or found:
            return found
    return False


#: jsonschema's own ``additionalProperties``, for a schema without ``patternProperties``.
_DRAFT_ADDITIONAL = Draft202012Validator.VALIDATORS["additionalProperties"]


def _additional_properties(
    validator: Draft202012Validator,
    additional: Any,
    instance: Any,
    schema: Mapping[str, Any],
) -> Iterator[ValidationError]:
    """jsonschema's ``additionalProperties`` (its messages too), with ``patternProperties``
    matched under the time bound (jsonschema's own uses Python's ``re``, with none)."""
    if "patternProperties" not in schema:
        yield from _DRAFT_ADDITIONAL(validator, additional, instance, schema) or ()
        return
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema["patternProperties"])
    extras = []
    for name in instance:
        found = False if name in known else _matches_any(patterns, name)
        if found is None:
            yield ValidationError(f"property {name[:40]!r} took too long to match its patterns")
            return
        if name not in known and not found:
            extras.append(name)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        verb = "does" if len(extras) == 1 else "do"
        joined = ", ".join(repr(each) for each in sorted(extras))
        shown = ", ".join(repr(each) for each in sorted(patterns))
        yield ValidationError(f"{joined} {verb} not match any of the regexes: {shown}")


#: Draft 2020-12 with every pattern matched under a time bound.
BoundedValidator: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)


@dataclass(frozen=True)
class LocalValidator:
    """A compiled schema: each validation's patterns share one time budget
    (:data:`VALIDATION_PATTERN_BUDGET_S`), on top of each string's own bound."""

    compiled: Validator

    @property
    def schema(self) -> Mapping[str, Any] | bool:
        """The schema it checks."""
        schema: Mapping[str, Any] | bool = self.compiled.schema
        return schema

    def is_valid(self, instance: Any) -> bool:
        """Whether ``instance`` is valid."""
        with _pattern_budget():
            return self.compiled.is_valid(instance)

    def iter_errors(self, instance: Any) -> Iterator[ValidationError]:
        """Every error in ``instance`` (found within the budget, then handed out)."""
        with _pattern_budget():
            errors = list(self.compiled.iter_errors(instance))
        return iter(errors)


def local_validator(schema: Mapping[str, Any] | bool) -> LocalValidator:
    """A Draft 2020-12 validator for ``schema`` (any ``$schema`` in it dropped) that
    resolves references locally only and bounds the time its patterns may take
    (:data:`PATTERN_TIMEOUT_S` per string, :data:`VALIDATION_PATTERN_BUDGET_S` in all).

    Raises :class:`SchemaRefused` for an invalid schema (a ``pattern`` that does not
    compile or is too large included) or a reference that is remote or resolves to
    nothing; nothing is fetched either way."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        message = exc.message[:MAX_MESSAGE_CHARS]
        raise SchemaRefused("SCHEMA_INVALID", message, details={"path": _path(exc)}) from exc
    except RecursionError as exc:  # a pattern nested past the stdlib parser's recursion
        raise SchemaRefused("SCHEMA_INVALID", "the schema is nested too deeply") from exc
    try:
        schema = one_dialect(schema)
    except RecursionError as exc:
        raise SchemaRefused("SCHEMA_INVALID", "the schema is nested too deeply") from exc
    check_references(schema)
    return LocalValidator(BoundedValidator(schema, registry=LOCAL_REGISTRY))


def one_dialect[T](value: T) -> T:
    """``value`` without any ``$schema`` dialect string, at any depth: jsonschema switches
    to the validator a subschema's ``$schema`` names (draft-07's, with Python's unbounded
    ``re``) wherever it descends, and every schema here is Draft 2020-12. Data under
    ``const``, ``enum`` or ``default`` loses such a key too (a ``$ref`` may point there)."""
    if isinstance(value, Mapping):
        kept = {k: one_dialect(v) for k, v in value.items()}
        if isinstance(kept.get("$schema"), str):
            del kept["$schema"]
        return kept  # type: ignore[return-value]
    if isinstance(value, list):
        return [one_dialect(item) for item in value]  # type: ignore[return-value]
    return value


def check_references(schema: Mapping[str, Any] | bool) -> None:
    """Raise :class:`SchemaRefused` unless every reference in ``schema`` resolves inside it
    or to a bundled meta-schema, as a Draft 2020-12 validator would follow it, and no chain
    of references comes back to where it started without a step into the instance (the
    validator would recurse until the interpreter's stack runs out)."""
    resource = DRAFT202012.create_resource(schema)
    try:
        _walk(schema, _RESOLVING.resolver_with_root(resource), set(), ())
        _check_patterns(schema, _Keywords())
    except RecursionError as exc:
        raise SchemaRefused("SCHEMA_INVALID", "the schema is nested too deeply") from exc


@dataclass
class _Keywords:
    """What the walk over a whole schema saw, for the checks that span subschemas."""

    pattern_properties: bool = False
    unevaluated_properties: bool = False


def _check_patterns(schema: Any, seen: _Keywords) -> None:
    """Refuse a pattern too large once its repetitions are counted out, and
    ``unevaluatedProperties`` alongside ``patternProperties`` (jsonschema matches those
    with Python's ``re``, which has no time bound)."""
    if not isinstance(schema, Mapping):
        return
    patterns = [schema.get("pattern")]
    if isinstance(by_name := schema.get("patternProperties"), Mapping):
        patterns += list(by_name)
        seen.pattern_properties = True
    seen.unevaluated_properties |= "unevaluatedProperties" in schema
    if seen.pattern_properties and seen.unevaluated_properties:
        message = "unevaluatedProperties cannot be combined with patternProperties here"
        raise SchemaRefused("SCHEMA_INVALID", message)
    for pattern in patterns:
        if (
            isinstance(pattern, str)
            and _weight(sre_parser.parse(pattern), 1, 0) > MAX_PATTERN_WEIGHT
        ):
            message = f"pattern {pattern[:MAX_MESSAGE_CHARS]!r} is too large or too deeply nested"
            raise SchemaRefused("SCHEMA_INVALID", message)
    for sub in DRAFT202012.subresources_of(schema):
        _check_patterns(sub, seen)


def _too_large(pattern: str) -> bool:
    return _weight(sre_parser.parse(pattern), 1, 0) > MAX_PATTERN_WEIGHT


_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


def _weight(parsed: Any, times: int, depth: int) -> int:
    """How many nodes ``parsed`` (the stdlib parser's tree) holds with each counted
    repetition written out, ``times`` over; stops counting past the bound, and counts a
    tree nested past :data:`MAX_PATTERN_DEPTH` as past it."""
    if depth > MAX_PATTERN_DEPTH:
        return MAX_PATTERN_WEIGHT + 1
    total = 0
    for op, value in parsed:
        total += times
        for inner, factor in _children(str(op), value):
            total += _weight(inner, times * factor, depth + 1)
        if total > MAX_PATTERN_WEIGHT:
            break
    return total


def _children(op: str, value: Any) -> list[tuple[Any, int]]:
    """The subpatterns of one node of the parse tree, each with its repetition count."""
    if op in _REPEATS:
        low, high, inner = value
        return [(inner, max(1, high if high != sre_parser.MAXREPEAT else low))]
    if op == "SUBPATTERN":
        return [(value[3], 1)]
    if op == "BRANCH":
        return [(branch, 1) for branch in value[1]]
    if op == "ATOMIC_GROUP":
        return [(value, 1)]
    if op in ("ASSERT", "ASSERT_NOT"):
        return [(value[1], 1)]
    if op == "GROUPREF_EXISTS":
        return [(branch, 1) for branch in value[1:] if branch is not None]
    return []


# Keywords whose subschemas apply to the same instance: a cycle through them never ends.
_IN_PLACE_ARRAYS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_VALUES = ("not", "if", "then", "else")


def _in_place(schema: Mapping[str, Any]) -> set[int]:
    found = [schema.get(k) for k in _IN_PLACE_VALUES]
    for keyword in _IN_PLACE_ARRAYS:
        value = schema.get(keyword)
        found += value if isinstance(value, list) else []
    dependent = schema.get("dependentSchemas")
    found += list(dependent.values()) if isinstance(dependent, Mapping) else []
    return {id(sub) for sub in found if sub is not None}


def _walk(schema: Any, resolver: Resolver[Any], seen: set[int], chain: tuple[int, ...]) -> None:
    """Follow ``schema``'s references and subschemas the way the validator's ``descend``
    does: a subschema may move the base URI (``$id``), a reference target keeps its own.
    ``chain``: the schemas applied to the current instance on the way here."""
    if not isinstance(schema, Mapping):
        return
    here = (*chain, id(schema))
    for keyword in REFERENCE_KEYWORDS:
        ref = schema.get(keyword)
        if isinstance(ref, str):
            target = _lookup(resolver, ref)
            if id(target.contents) in here:
                message = f"$ref {ref[:MAX_MESSAGE_CHARS]!r} refers back to itself"
                raise SchemaRefused("SCHEMA_REF_CYCLE", message, details={"ref": ref[:500]})
            if id(target.contents) not in seen:
                seen.add(id(target.contents))
                _walk(target.contents, target.resolver, seen, here)
    in_place = _in_place(schema)
    for sub in DRAFT202012.subresources_of(schema):
        inner = resolver.in_subresource(DRAFT202012.create_resource(sub))
        _walk(sub, inner, seen, here if id(sub) in in_place else ())


def _lookup(resolver: Resolver[Any], ref: str) -> Resolved[Any]:
    try:
        return resolver.lookup(ref)
    except Unresolvable as exc:
        remote = isinstance(exc.__cause__, Unretrievable)
        code = "SCHEMA_REF_REMOTE" if remote else "SCHEMA_REF_UNRESOLVABLE"
        why = "points outside the schema; write it out in full" if remote else "resolves to nothing"
        raise SchemaRefused(
            code, f"$ref {ref[:MAX_MESSAGE_CHARS]!r} {why}", details={"ref": ref[:500]}
        ) from None


def _path(error: SchemaError) -> str:
    return "/".join(str(part) for part in error.absolute_path) or "(schema)"
