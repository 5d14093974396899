"""Recipes to an agent through the official MCP SDK client on a real socket: listed in
``tools/list`` with their origin suffix, callable, and gone or denied as the library and
the grants say."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.registry.recipes.support import GRANTS, READ, echo_twice
from tests.registry.server_support import DemoTools, running

pytestmark = pytest.mark.anyio
PROVIDER = "recipe_echo-twice"


def _served(directory: Path, grants: frozenset[str]) -> Any:
    settings = ServerSettings(grants=grants, mcp_enabled=True)
    service = new_service(settings)
    DemoTools().register(service)
    return running(build_app(service, settings, recipes_dir=directory))


@pytest.fixture
def base(tmp_path: Path) -> Iterator[str]:
    with _served(tmp_path, GRANTS) as url:
        saved = httpx.post(f"{url}/api/recipes", json=echo_twice(), timeout=10)
        assert saved.status_code == 201
        yield url


async def _operator(method: str, url: str, body: Any = None) -> httpx.Response:
    """One request to the recipe routes (this server has no token: anyone local operates)."""
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.request(method, url, json=body)


async def _list_and_call(url: str, arguments: dict[str, Any]) -> tuple[list[Any], Any]:
    async with (
        streamable_http_client(f"{url}/mcp") as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = await session.list_tools()
        result = await session.call_tool(PROVIDER, arguments)
        return listed.tools, result


async def test_a_recipe_is_listed_with_its_suffix_and_runs_for_an_mcp_agent(base: str) -> None:
    tools, result = await _list_and_call(base, {"text": "from mcp"})
    recipe = next(tool for tool in tools if tool.name == PROVIDER)
    assert recipe.description == f"{echo_twice()['description']} [local recipe, rev 1]"
    assert recipe.annotations is not None
    assert recipe.annotations.readOnlyHint is True
    assert recipe.annotations.destructiveHint is False
    assert recipe.inputSchema == echo_twice()["input_schema"]
    assert result.isError is False
    assert result.structuredContent is not None
    steps = result.structuredContent["results"]
    assert [step["result"] for step in steps] == [{"text": "from mcp"}] * 2
    listing = (await _operator("GET", f"{base}/api/recipes")).json()
    assert listing["recipes"][0]["availability"]["available"] is True


async def test_an_archived_recipe_leaves_tools_list_and_a_call_is_an_error(base: str) -> None:
    assert (await _operator("POST", f"{base}/api/recipes/recipe.echo-twice/archive")).is_success
    tools, result = await _list_and_call(base, {"text": "x"})
    assert PROVIDER not in [tool.name for tool in tools]
    assert result.isError is True
    assert "TOOL_NOT_FOUND" in result.content[0].text


@pytest.mark.parametrize(
    ("grants", "missing"), [(frozenset({READ}), "callToolRecipes"), (GRANTS - {READ}, READ)]
)
async def test_without_a_needed_grant_the_recipe_call_is_denied(
    tmp_path: Path, grants: frozenset[str], missing: str
) -> None:
    with _served(tmp_path, grants) as url:
        saved = await _operator("POST", f"{url}/api/recipes", echo_twice())
        assert saved.status_code == 201
        tools, result = await _list_and_call(url, {"text": "x"})
    listed = PROVIDER in [tool.name for tool in tools]
    assert listed is ("callToolRecipes" in grants)  # listed by its own grant alone
    assert result.isError is True
    text = result.content[0].text
    assert "TOOL_CAPABILITY_DENIED" in text
    assert missing in text
