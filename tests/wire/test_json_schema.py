"""Every JSON Schema from outside compiles against local references only: a remote, dangling
or endless reference is refused with its code, what resolves locally still checks, and the
validator's own registry fetches nothing even when asked to."""

from __future__ import annotations

import time
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


def test_many_near_misses_share_one_budget_so_a_validation_ends_in_time() -> None:
    validator = local_validator({"type": "array", "items": {"pattern": BACKTRACKING}})
    started = time.monotonic()

    errors = list(validator.iter_errors([NEAR_MISS] * 200))  # 200 x 50 ms before the fix

    assert time.monotonic() - started < 2.0
    assert len(errors) == 200
    assert all("took too long to match" in error.message for error in errors)
    assert validator.is_valid(["aa"] * 200)


def test_additional_properties_match_pattern_properties_under_the_bound_too() -> None:
    schema = {"patternProperties": {BACKTRACKING: {}}, "additionalProperties": False}
    validator = local_validator(schema)
    started = time.monotonic()

    errors = list(validator.iter_errors({"a" * 38 + "b": 1}))  # re.search: seconds

    assert time.monotonic() - started < 1.0
    assert {error.validator for error in errors} == {"patternProperties", "additionalProperties"}
    assert validator.is_valid({"aa": 1})
    assert not validator.is_valid({"b": 1})


@pytest.mark.parametrize(
    "schema",
    [
        # the regex library unrolls counted repeats: this one crashed the process (SIGSEGV)
        {"pattern": "(?:(?:ab|c){1000}){1000}"},
        {"patternProperties": {"(?:a{1000,}){1000,}": {}}},
        {"propertyNames": {"pattern": "(" * 60 + "a" + ")" * 60}},  # its parser recurses
        {"pattern": "(" * 3000 + ")" * 3000},  # the stdlib parser's RecursionError
        # jsonschema matches these with Python's re, which has no time bound
        {"patternProperties": {"^a": {}}, "unevaluatedProperties": False},
    ],
    ids=["nested-repeats", "unbounded-repeats", "deep-groups", "deeper-groups", "unevaluated"],
)
def test_a_pattern_the_matcher_cannot_bound_is_refused_at_compile_time(
    schema: dict[str, Any],
) -> None:
    assert _refusal(schema).code == "SCHEMA_INVALID"


def test_ordinary_patterns_with_counted_repeats_still_compile() -> None:
    uuid = "^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$"
    validator = local_validator({"pattern": uuid, "maxLength": 36})

    assert validator.is_valid("123e4567-e89b-12d3-a456-426614174000")
    assert not validator.is_valid("not-a-uuid")


DIALECTS = (
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-04/schema#",
    "https://json-schema.org/draft/2019-09/schema",
)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("where", ["subschema", "root-reached-by-ref", "ref-into-const"])
def test_a_dialect_named_anywhere_does_not_switch_to_an_unbounded_validator(
    dialect: str, where: str
) -> None:
    slow: dict[str, Any] = {"$schema": dialect, "type": "string", "pattern": BACKTRACKING}
    schema: dict[str, Any] = {
        "subschema": {"properties": {"x": slow}},
        "root-reached-by-ref": {
            **slow,
            "type": ["string", "object"],
            "properties": {"x": {"$ref": "#"}},
        },
        "ref-into-const": {
            "properties": {"x": {"$ref": "#/$defs/d/const"}},
            "$defs": {"d": {"const": slow}},
        },
    }[where]
    validator = local_validator(schema)
    started = time.monotonic()

    # jsonschema's draft-07/04/2019-09 validators match with Python's re: about 2 s here
    # (and hours at 60 characters), where the bound is 50 ms.
    errors = list(validator.iter_errors({"x": "a" * 36 + "b"}))

    assert time.monotonic() - started < 1.0
    assert any("took too long to match" in error.message for error in errors)


def test_a_schema_nested_past_the_meta_schema_checks_reach_is_refused_with_a_code() -> None:
    deep: dict[str, Any] = {"type": "integer"}
    for _ in range(150):  # an MCP server's tools/list has no nesting limit; HTTP bodies do
        deep = {"type": "object", "properties": {"a": deep}}

    # Before: RecursionError out of check_schema, which ended the whole source's listing.
    assert _refusal(deep).code == "SCHEMA_INVALID"


def test_many_names_against_many_patterns_end_within_the_budget() -> None:
    patterns: dict[str, Any] = {f"^q{i}(a|aa)+$": {} for i in range(1000)}
    validator = local_validator({"patternProperties": patterns, "additionalProperties": False})
    names = {f"q1{'a' * 40}b{i}": 1 for i in range(1000)}
    started = time.monotonic()

    errors = list(validator.iter_errors(names))  # a million pairs: an error each, before

    assert time.monotonic() - started < 1.5
    assert 1 <= len(errors) <= 2
    assert all("took too long to match" in error.message for error in errors)
