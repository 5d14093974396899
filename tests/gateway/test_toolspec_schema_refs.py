"""A ToolSpec's schemas compile locally: one that points outside itself is refused when the
catalog loads, naming the spec and the code, and its URL is never fetched."""

from __future__ import annotations

from typing import Any

import pytest

from doraforge.gateway.catalog import Catalog
from doraforge.gateway.config import ToolSpecConfig
from doraforge.gateway.errors import ConfigError
from tests.registry.listeners import counting_http


def _spec(**schemas: Any) -> ToolSpecConfig:
    return ToolSpecConfig.model_validate(
        {
            "tool_id": "arm.move_to",
            "implementation_id": "doraforge.arm/1",
            "endpoint_id": "arm",
            "operation": "move_to",
            "semantics": "action",
            "description": "Move the tool to a pose.",
            "input_schema": {"type": "object"},
            "output_schema": {"type": "object"},
            "readiness": ["endpoint_registered"],
            **schemas,
        }
    )


@pytest.mark.parametrize("field", ["input_schema", "output_schema"])
def test_a_toolspec_schema_with_a_remote_ref_is_refused_at_load_without_a_fetch(
    field: str,
) -> None:
    with counting_http() as upstream:
        schema = {"type": "object", "properties": {"x": {"$ref": upstream.url("/redir")}}}
        spec = _spec(**{field: schema})

        with pytest.raises(ConfigError, match="SCHEMA_REF_REMOTE") as refused:
            Catalog([spec])

        assert "tools.arm.move_to" in str(refused.value)
        assert upstream.hits == 0


def test_a_toolspec_with_local_refs_loads_and_checks_through_them() -> None:
    schema = {
        "type": "object",
        "$defs": {"speed": {"type": "number", "maximum": 1.5}},
        "properties": {"speed": {"$ref": "#/$defs/speed"}},
    }
    spec = Catalog([_spec(input_schema=schema)]).get("arm.move_to")
    assert spec is not None

    violation = spec.input_schema.first_violation({"speed": 3})

    assert violation is not None
    assert violation.path == "$.speed"
