"""Every JSON Schema from outside compiles here, against local references only: a remote,
dangling or looping ``$ref`` is refused with a code at compile time, and the validator's own
reference registry refuses retrieval, so no schema ever makes doraforge dial; a ``pattern``
is matched with a time bound, so no argument can hold the event loop."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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


def _matches(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` finds a match in ``text``; ``None`` when it ran out of time."""
    try:
        return regex.search(pattern, text, timeout=PATTERN_TIMEOUT_S) is not None
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
            if found is None:
                yield ValidationError(f"property {name[:40]!r} took too long to match {pattern!r}")
            elif found:
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


#: Draft 2020-12 with ``pattern`` and ``patternProperties`` matched under a time bound.
BoundedValidator: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties}
)


def local_validator(schema: Mapping[str, Any] | bool) -> Validator:
    """A Draft 2020-12 validator for ``schema`` that resolves references locally only and
    bounds the time each ``pattern`` may take (:data:`PATTERN_TIMEOUT_S` per string).

    Raises :class:`SchemaRefused` for an invalid schema (a ``pattern`` that does not
    compile included) or a reference that is remote or resolves to nothing; nothing is
    fetched either way."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        message = exc.message[:MAX_MESSAGE_CHARS]
        raise SchemaRefused("SCHEMA_INVALID", message, details={"path": _path(exc)}) from exc
    check_references(schema)
    return BoundedValidator(schema, registry=LOCAL_REGISTRY)


def check_references(schema: Mapping[str, Any] | bool) -> None:
    """Raise :class:`SchemaRefused` unless every reference in ``schema`` resolves inside it
    or to a bundled meta-schema, as a Draft 2020-12 validator would follow it, and no chain
    of references comes back to where it started without a step into the instance (the
    validator would recurse until the interpreter's stack runs out)."""
    resource = DRAFT202012.create_resource(schema)
    try:
        _walk(schema, _RESOLVING.resolver_with_root(resource), set(), ())
    except RecursionError as exc:
        raise SchemaRefused("SCHEMA_INVALID", "the schema is nested too deeply") from exc


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
