"""`doraforge tools describe` offers example arguments its own tool's schema accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from doraforge.cli.tools_describe import example_arguments
from doraforge.gateway.config import load_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted(
    [*ROOT.glob("dataflows/*.gateway.yml"), *ROOT.glob("skills/*/profiles/*/gateway.yml")]
)


def _shipped_tools() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{path.relative_to(ROOT)}:{tool.tool_id}", tool.input_schema)
        for path in CONFIGS
        for tool in load_config(path).tools
    ]


TOOLS = _shipped_tools()


@pytest.mark.parametrize(("where", "schema"), TOOLS, ids=[where for where, _ in TOOLS])
def test_the_example_of_every_shipped_tool_passes_its_input_schema(
    where: str, schema: dict[str, Any]
) -> None:
    assert CONFIGS, "no shipped gateway configs found"
    jsonschema.validate(example_arguments(schema), schema)


def test_an_array_example_has_as_many_items_as_the_schema_requires() -> None:
    schema = {
        "type": "object",
        "required": ["position", "speed"],
        "properties": {
            "position": {
                "type": "array",
                "items": {"type": "number", "minimum": -2, "maximum": 2},
                "minItems": 3,
                "maxItems": 3,
            },
            "speed": {"type": "number", "exclusiveMinimum": 0, "maximum": 1.0},
        },
    }
    example = example_arguments(schema)
    assert example == {"position": [-2, -2, -2], "speed": 1.0}
    jsonschema.validate(example, schema)


def test_a_one_of_example_is_its_first_alternative_with_its_minimum_properties() -> None:
    positions = {
        "oneOf": [
            {"type": "object", "minProperties": 1, "properties": {"elbow": {"type": "number"}}},
            {"type": "array", "items": {"type": "number"}, "minItems": 6, "maxItems": 6},
        ]
    }
    schema = {"type": "object", "required": ["positions"], "properties": {"positions": positions}}
    example = example_arguments(schema)
    assert example == {"positions": {"elbow": 0}}
    jsonschema.validate(example, schema)
