"""The five context tools on POST /mcp over a real socket, through the official MCP SDK
client: listed read-only beside the granted tools, each called (its structured result
checked by the SDK against the advertised output schema), errors as ``isError`` results,
and every call audited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.registry.settings import ServerSettings
from tests.registry.context.fake_sources import SECRET, cell, context_app, failing
from tests.registry.server_support import TOKEN, running
from tests.support.context_tools import CONTEXT_TOOLS
from tests.support.mcp_errors import error_of

ACCEPT = "application/json, text/event-stream"
READ = frozenset({"robot.read"})


@pytest.fixture
def app() -> FastAPI:
    return context_app(ServerSettings(grants=READ, mcp_enabled=True))


@pytest.fixture
def base(app: FastAPI) -> Iterator[str]:
    with running(app) as url:
        yield url


@pytest.mark.anyio
async def test_the_sdk_client_lists_the_context_tools_beside_the_granted_ones(base: str) -> None:
    async with (
        streamable_http_client(f"{base}/mcp") as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == CONTEXT_TOOLS | {"demo_echo", "demo_big", "demo_fail"}
    for name in CONTEXT_TOOLS:
        annotations = tools[name].annotations
        assert annotations is not None
        hints = (annotations.readOnlyHint, annotations.idempotentHint)
        assert hints == (True, True), name
        assert (annotations.destructiveHint, annotations.openWorldHint) == (False, False), name
        assert tools[name].outputSchema is not None
        assert tools[name].inputSchema["additionalProperties"] is False


@pytest.mark.anyio
async def test_the_sdk_client_orients_itself_profile_search_get_list_navigate(base: str) -> None:
    async with (
        streamable_http_client(f"{base}/mcp") as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        # call_tool validates each structured result against the advertised outputSchema.
        profile = await session.call_tool("context_profile", {})
        searched = await session.call_tool("search_context", {"query": "pick place"})
        assert searched.structuredContent is not None
        ref = searched.structuredContent["items"][0]["ref"]
        got = await session.call_tool("get_context", {"ref": ref})
        listed = await session.call_tool("list_context", {"scope": "tools", "limit": 2})
        navigated = await session.call_tool("resolve_navigation", {"query": "approvals"})
    results = [profile, searched, got, listed, navigated]
    assert all(result.isError is False for result in results)
    assert profile.structuredContent is not None
    assert profile.structuredContent["enabledScopes"] == [
        "navigation",
        "skills",
        "tools",
        "runtime",
    ]
    assert searched.structuredContent["items"][0]["label"] == "pick-place"
    assert got.structuredContent == {
        "item": searched.structuredContent["items"][0],
        "truncated": False,
        "sourceTruncated": False,
        "sourceStatus": "fresh",
    }
    assert listed.structuredContent is not None
    assert listed.structuredContent["nextCursor"] == 2
    assert navigated.structuredContent is not None
    assert navigated.structuredContent["item"]["route"] == "/console/approvals"
    for result in results:
        text = result.content[0]
        assert text.type == "text"
        assert json.loads(text.text) == result.structuredContent
        assert SECRET not in text.text


@pytest.mark.anyio
async def test_argument_and_scope_errors_are_is_error_results_with_a_structured_error(
    base: str,
) -> None:
    async with (
        streamable_http_client(f"{base}/mcp") as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        long = await session.call_tool("search_context", {"query": "x" * 201})
        disabled = await session.call_tool("list_context", {"scope": "tasks"})
    for result, code in ((long, "CONTEXT_INVALID_ARGUMENTS"), (disabled, "CONTEXT_SCOPE_DISABLED")):
        error = error_of(result)
        assert error["code"] == code
        assert set(error) == {"code", "message", "retryable", "details"}
        assert error["retryable"] is False
    assert "enabled: navigation, skills, tools, runtime" in disabled.content[0].text  # type: ignore[union-attr]


def _post(base: str, body: Any, **headers: str) -> httpx.Response:
    sent = {"accept": ACCEPT, "content-type": "application/json", **headers}
    return httpx.post(f"{base}/mcp", json=body, headers=sent, timeout=10)


def _call(base: str, name: str, arguments: dict[str, Any], **headers: str) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    answer = _post(base, {**message, "params": {"name": name, "arguments": arguments}}, **headers)
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()["result"]
    return result


def test_a_source_failure_is_a_tool_error_never_an_empty_result() -> None:
    sources = cell()
    sources["skills"] = failing("skills")
    with running(context_app(ServerSettings(mcp_enabled=True), sources)) as url:
        result = _call(url, "search_context", {"query": "pick"})
    error = error_of(result)
    assert error["code"] == "CONTEXT_SOURCE_FAILED"
    assert error["retryable"] is True
    assert error["details"] == {"scope": "skills", "sourceCode": "SKILLS_UNREADABLE"}


def test_every_context_call_is_audited_with_argument_keys_only(app: FastAPI, base: str) -> None:
    _call(base, "search_context", {"query": "secret words"}, **{"idempotency-key": "ctx-1"})
    _call(base, "list_context", {"scope": "tasks"})
    records = [r for r in app.state.service.audit.records() if r["name"] in CONTEXT_TOOLS]
    assert [(r["name"], r["state"], r["errorCode"]) for r in records] == [
        ("search_context", "completed", None),
        ("list_context", "failed", "CONTEXT_SCOPE_DISABLED"),
    ]
    assert records[0]["requestId"] == "ctx-1"
    assert records[0]["argumentKeys"] == ["query"]
    assert "secret words" not in json.dumps(records)


def test_context_calls_pass_the_same_transport_rules() -> None:
    settings = ServerSettings(token=TOKEN, mcp_enabled=True)
    with running(context_app(settings)) as url:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        call = {**message, "params": {"name": "context_profile", "arguments": {}}}
        assert _post(url, call).status_code == 401
        assert _post(url, call, origin="https://evil.example").status_code in (401, 403)
        bearer = {"authorization": f"Bearer {TOKEN}"}
        assert _call(url, "context_profile", {}, **bearer)["isError"] is False
    with running(context_app(ServerSettings(mcp_enabled=False))) as url:
        off = _post(url, call)
    assert off.status_code == 403
    assert off.json()["error"]["data"]["code"] == "MCP_DISABLED"


def test_without_any_context_source_the_context_tools_are_not_offered() -> None:
    with running(context_app(ServerSettings(mcp_enabled=True), sources={})) as url:
        listed = _post(url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).json()
        called = _call(url, "context_profile", {})
    assert not CONTEXT_TOOLS & {tool["name"] for tool in listed["result"]["tools"]}
    assert error_of(called)["code"] == "TOOL_NOT_FOUND"


def test_the_summaries_profile_is_served_when_configured() -> None:
    settings = ServerSettings(mcp_enabled=True, context_profile="summaries")
    with running(context_app(settings)) as url:
        found = _call(url, "search_context", {"query": "pick-place"})["structuredContent"]
    summary = found["items"][0]["summary"]
    assert summary.startswith("Pick a cube")
    assert SECRET not in summary
