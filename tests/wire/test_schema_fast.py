"""The compiled schema checks say exactly what jsonschema says, on every schema they compile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from doraforge.gateway.catalog import Catalog
from doraforge.gateway.config import load_config
from doraforge.wire.schema_fast import compile_schema

DATAFLOWS = Path(__file__).resolve().parents[2] / "dataflows"

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(-5, 5, allow_nan=False)
    | st.sampled_from([1.0, 2.0, -0.0])
    | st.sampled_from(["", "a", "ab", "abc", "succeed", "fail"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
    ),
    max_leaves=8,
)
types = st.sampled_from(["array", "boolean", "integer", "null", "number", "object", "string"])
small = st.integers(0, 3)
bound = st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False)


def schemas() -> st.SearchStrategy[Any]:
    """Schemas built from the compiled subset only."""
    keywords = st.fixed_dictionaries(
        {},
        optional={
            "type": types | st.lists(types, min_size=1, max_size=3, unique=True),
            "minLength": small,
            "maxLength": small,
            "minItems": small,
            "maxItems": small,
            "minProperties": small,
            "maxProperties": small,
            "minimum": bound,
            "maximum": bound,
            "exclusiveMinimum": bound,
            "exclusiveMaximum": bound,
            "enum": st.lists(st.sampled_from(["a", "ab", "succeed", "fail"]), max_size=3),
            "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
            "description": st.just("annotation only"),
            "format": st.just("email"),
        },
    )

    def nested(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        children = st.fixed_dictionaries(
            {},
            optional={
                "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=2),
                "additionalProperties": inner,
                "items": inner,
            },
        )
        return st.tuples(keywords, children).map(lambda pair: {**pair[0], **pair[1]})

    return st.recursive(st.booleans() | keywords, nested, max_leaves=4)


# Generation is slow on a loaded 2-core machine; that is not a disagreement.
@settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(schemas(), json_values)
def test_a_compiled_schema_agrees_with_jsonschema(schema: Any, instance: Any) -> None:
    check = compile_schema(schema)
    assert check is not None, schema
    assert check(instance) == Draft202012Validator(schema).is_valid(instance)


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/$defs/x"},
        {"oneOf": [{"type": "string"}]},
        {"pattern": "^a"},
        {"enum": [1, "a"]},
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
        {"patternProperties": {"^a": {}}, "additionalProperties": False},
        {"type": "integr"},
        {"$schema": "https://json-schema.org/draft/2020-12/schema"},
    ],
)
def test_a_schema_outside_the_subset_is_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_schema(schema) is None


@pytest.mark.parametrize("config", sorted(DATAFLOWS.glob("*.gateway.yml")), ids=lambda p: p.name)
def test_the_shipped_toolspecs_mostly_compile(config: Path) -> None:
    specs = Catalog(load_config(config).tools).all()
    compiled = [
        spec for spec in specs if spec.input_schema._conforms and spec.output_schema._conforms
    ]
    assert len(compiled) >= len(specs) // 2


def test_a_failing_instance_still_gets_jsonschema_s_message() -> None:
    spec = Catalog(load_config(DATAFLOWS / "mock.gateway.yml").tools).get("mock.echo")
    assert spec is not None
    assert spec.input_schema.first_violation({"message": "hi"}) is None
    violation = spec.input_schema.first_violation({"message": 7})
    assert violation is not None
    assert violation.path == "$.message"
    assert violation.message == "7 is not of type 'string'"
