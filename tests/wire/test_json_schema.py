"""Every JSON Schema from outside compiles against local references only: a remote, dangling
or endless reference is refused with its code, what resolves locally still checks, and the
validator's own registry fetches nothing even when asked to."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing.exceptions import Unresolvable

from doraforge.wire.json_schema import LOCAL_REGISTRY, SchemaRefused, local_validator
from tests.registry.listeners import counting_http


def _refusal(schema: Any) -> SchemaRefused:
    with pytest.raises(SchemaRefused) as refused:
        local_validator(schema)
    return refused.value


@pytest.mark.parametrize(
    "schema_of",
    [
        lambda url: {"properties": {"x": {"$ref": url}}},
        lambda url: {"$id": url, "properties": {"x": {"$ref": "other"}}},
        lambda url: {"properties": {"x": {"$dynamicRef": url}}},
        lambda url: {"$defs": {"a": {"$ref": url}}, "properties": {"x": {"$ref": "#/$defs/a"}}},
        lambda url: {"items": {"anyOf": [{"type": "null"}, {"$ref": url}]}},
    ],
    ids=["ref", "relative-to-remote-id", "dynamic-ref", "through-a-local-ref", "nested"],
)
def test_a_reference_outside_the_schema_is_refused_and_never_fetched(schema_of: Any) -> None:
    with counting_http() as upstream:
        refused = _refusal(schema_of(upstream.url("/redir")))

        assert upstream.hits == 0
    assert refused.code == "SCHEMA_REF_REMOTE"
    assert "ref" in refused.details


@pytest.mark.parametrize(
    ("schema", "code"),
    [
        ({"properties": {"x": {"$ref": "#/$defs/missing"}}}, "SCHEMA_REF_UNRESOLVABLE"),
        ({"properties": {"x": {"$ref": "#no-such-anchor"}}}, "SCHEMA_REF_UNRESOLVABLE"),
        ({"$ref": "#"}, "SCHEMA_REF_CYCLE"),
        ({"allOf": [{"$ref": "#"}]}, "SCHEMA_REF_CYCLE"),
        ({"type": 3}, "SCHEMA_INVALID"),
    ],
    ids=["pointer", "anchor", "self", "through-allOf", "invalid"],
)
def test_a_schema_that_cannot_compile_locally_is_refused_with_its_code(
    schema: dict[str, Any], code: str
) -> None:
    assert _refusal(schema).code == code


def test_local_pointers_anchors_embedded_ids_and_the_meta_schema_resolve() -> None:
    schema = {
        "$defs": {
            "name": {"$anchor": "name", "type": "string"},
            "inner": {"$id": "urn:example:inner", "type": "integer"},
        },
        "properties": {
            "a": {"$ref": "#/$defs/name"},
            "b": {"$ref": "#name"},
            "c": {"$ref": "urn:example:inner"},
            "d": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
            "tree": {"type": "object", "properties": {"child": {"$ref": "#/properties/tree"}}},
        },
    }

    validator = local_validator(schema)

    assert validator.is_valid({"a": "x", "b": "y", "c": 1, "d": {"type": "string"}})
    assert not validator.is_valid({"c": "one"})
    assert not validator.is_valid({"tree": {"child": {"child": 1}}})
    assert validator.is_valid({"tree": {"child": {"child": {}}}})


def test_the_local_registry_refuses_to_fetch_what_a_validator_asks_for() -> None:
    with counting_http() as upstream:
        schema = {"properties": {"x": {"$ref": upstream.url("/redir")}}}
        validator = Draft202012Validator(schema, registry=LOCAL_REGISTRY)

        with pytest.raises(Unresolvable):
            validator.is_valid({"x": 1})

        assert upstream.hits == 0


#: A pattern that backtracks exponentially on a near-miss (Python's re takes minutes here).
BACKTRACKING = "^(a|aa)+$"
NEAR_MISS = "a" * 60 + "b"


def test_a_backtracking_pattern_gives_up_in_time_and_refuses_the_value() -> None:
    validator = local_validator({"type": "string", "pattern": BACKTRACKING})

    (error,) = validator.iter_errors(NEAR_MISS)

    assert "took too long to match" in error.message
    assert validator.is_valid("aaaa")
    assert not validator.is_valid("aab")


def test_a_backtracking_pattern_property_gives_up_in_time_too() -> None:
    schema = {"type": "object", "patternProperties": {BACKTRACKING: {"type": "integer"}}}
    validator = local_validator(schema)

    (error,) = validator.iter_errors({NEAR_MISS: 1})

    assert "took too long to match" in error.message
    assert validator.is_valid({"aa": 1})
    assert not validator.is_valid({"aa": "x"})


def test_a_pattern_that_does_not_compile_is_refused_at_compile_time() -> None:
    assert _refusal({"properties": {"x": {"type": "string", "pattern": "(a"}}}).code == (
        "SCHEMA_INVALID"
    )
