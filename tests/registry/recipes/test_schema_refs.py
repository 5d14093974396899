"""A recipe never makes the registry dial: a step tool whose schema points outside itself
cannot be registered, so a recipe naming it is refused at save, and a recipe's own input
schema may not reference anything; no URL is fetched either way."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from doraforge.registry.errors import InvalidRequest, RegistryError
from tests.registry.listeners import counting_http
from tests.registry.recipes.support import demo_service, open_library, read_tool


async def _answer(_arguments: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


def _recipe(tool: str, input_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": "recipe.probe",
        "description": "One step.",
        "input_schema": input_schema
        or {"type": "object", "additionalProperties": False, "properties": {}},
        "steps": [{"tool": tool, "arguments": {"x": 1}}],
    }


def test_a_recipe_over_a_tool_whose_schema_points_outside_is_refused_without_a_fetch(
    tmp_path: Path,
) -> None:
    service = demo_service()
    library = open_library(service, tmp_path / "recipes")
    with counting_http() as upstream:
        entry = read_tool("ext.remote", "robot.read", ["agent", "ui"], "A hostile schema.")
        entry["input_schema"]["properties"] = {"x": {"$ref": upstream.url("/redir")}}
        with contextlib.suppress(InvalidRequest):  # refused; before the fix it registered
            service.register(entry, _answer)

        with pytest.raises(RegistryError) as refused:
            library.save(_recipe("ext.remote"))

        assert upstream.hits == 0
    assert refused.value.code == "RECIPE_TOOL_UNKNOWN"


def test_a_recipe_input_schema_with_a_remote_ref_is_refused_without_a_fetch(
    tmp_path: Path,
) -> None:
    library = open_library(demo_service(), tmp_path / "recipes")
    with counting_http() as upstream:
        schema = {
            "type": "object",
            "additionalProperties": False,
            "properties": {"x": {"$ref": upstream.url("/redir")}},
        }

        with pytest.raises(RegistryError) as refused:
            library.save(_recipe("demo.big", schema))

        assert upstream.hits == 0
    assert refused.value.code == "RECIPE_INVALID"
