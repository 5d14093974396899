"""``doraforge serve --grant callToolRecipes`` as a process: a recipe over the robot tools
saved with ``doraforge recipes save`` is an MCP tool an SDK client runs, it is kept under
``<home>/recipes`` and offered again by the next ``serve`` over the same home."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.cli import main
from tests.support.live_server import serve_process

OPTIONS = ("--mcp", "--grant", "robot.read", "--grant", "callToolRecipes")
RECIPE = {
    "name": "recipe.cell-overview",
    "description": "The installed skills and every recorded runtime, in one call.",
    "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
    "steps": [
        {"tool": "forge.skills.installed", "arguments": {}},
        {"tool": "forge.runtime.status", "arguments": {}},
    ],
    "output": [1, 2],
}
RECIPE_TOOLS = ["forge.skills.installed", "forge.runtime.status"]


async def _run_over_mcp(url: str) -> tuple[list[str], Any]:
    async with (
        streamable_http_client(f"{url}/mcp") as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = await session.list_tools()
        names = [tool.name for tool in listed.tools]
        if "recipe_cell-overview" not in names:
            return names, None
        return names, await session.call_tool("recipe_cell-overview", {})


def test_a_recipe_saved_by_the_cli_runs_over_mcp_and_survives_a_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    definition = tmp_path / "overview.json"
    definition.write_text(json.dumps(RECIPE))
    with serve_process(tmp_path / "first", *OPTIONS) as serve:
        code = main(["recipes", "save", str(definition), "--url", serve.base_url])
        assert (code, capsys.readouterr().out) == (0, "saved recipe.cell-overview rev 1\n")
        names, result = asyncio.run(_run_over_mcp(serve.base_url))
        assert "recipe_cell-overview" in names
        assert result is not None
        assert result.isError is False, result.content
        steps = result.structuredContent["results"]
        assert [step["tool"] for step in steps] == [
            "forge.skills.installed",
            "forge.runtime.status",
        ]
        assert "Traceback" not in serve.errors()
    stored = tmp_path / "first" / "home" / "recipes" / "cell-overview.json"
    assert json.loads(stored.read_text())["active"] == 1
    with serve_process(tmp_path / "first", *OPTIONS) as serve:  # the same home again
        names, result = asyncio.run(_run_over_mcp(serve.base_url))
    assert "recipe_cell-overview" in names
    assert result is not None
    assert result.isError is False
