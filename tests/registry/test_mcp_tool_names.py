"""One name per tool: what ``tools/list`` shows (``demo_arm``) is the name an approval, an
error and a denial show, the name ``--approve`` takes, and a name the official MCP SDK
client can call and validate without warning; the canonical ``demo.arm`` stays accepted."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import TOKEN
from tests.registry.test_approvals_http import LISTED, TOOL, Arm, approvals_server
from tests.support.mcp_errors import error_of
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

BEARER = {"Authorization": f"Bearer {TOKEN}"}
WRITES = frozenset({"robot.read", "robot.write"})
#: What the SDK logs when a result comes from a tool its tools/list did not show.
UNLISTED = "not listed by server"


@asynccontextmanager
async def _agent(base: str) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(headers=BEARER, timeout=httpx.Timeout(30, read=60)) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _listed(session: ClientSession) -> set[str]:
    return {tool.name for tool in (await session.list_tools()).tools}


async def _pending(base: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base, headers=BEARER, timeout=30) as operator:

        async def one() -> dict[str, Any] | None:
            answer = await operator.get("/api/approvals", params={"state": "pending"})
            approvals: list[dict[str, Any]] = answer.json()["approvals"]
            return approvals[0] if approvals else None

        return await eventually_async(one, within=10.0, what="the pending approval")


async def _deny(base: str, approval_id: str) -> None:
    async with httpx.AsyncClient(base_url=base, headers=BEARER, timeout=30) as operator:
        body = {"reason": "someone is in the cell"}
        answer = await operator.post(f"/api/approvals/{approval_id}/deny", json=body)
        assert answer.status_code == 200, answer.text


async def test_an_approval_and_its_denial_name_the_tool_as_tools_list_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = ServerSettings(grants=WRITES, token=TOKEN, mcp_enabled=True)
    with approvals_server(settings, Arm()) as (base, _service), caplog.at_level(logging.WARNING):
        async with _agent(base) as session:
            assert LISTED in await _listed(session)
            waiting = asyncio.create_task(session.call_tool(LISTED, {"x": 0.3}))
            pending = await _pending(base)
            assert pending["tool"] == LISTED
            await _deny(base, pending["id"])
            denied = await waiting
    error = error_of(denied)
    assert error["code"] == "TOOL_APPROVAL_DENIED"
    assert error["message"].startswith(f"an operator denied {LISTED}: ")
    assert UNLISTED not in caplog.text


async def test_an_error_names_a_listed_tool_the_sdk_then_calls_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rule = frozenset({TOOL})  # a standing rule by the canonical name still holds
    settings = ServerSettings(grants=WRITES, token=TOKEN, mcp_enabled=True, approvals=rule)
    arm = Arm()
    with approvals_server(settings, arm) as (base, _service):
        async with _agent(base) as session:
            listed = await _listed(session)
            refused = await session.call_tool(LISTED, {"x": "far"})
            found = re.search(r"do not match (\S+)'s input schema", error_of(refused)["message"])
            assert found is not None, error_of(refused)
            named = found.group(1)
            with caplog.at_level(logging.WARNING):
                moved = await session.call_tool(named, {"x": 0.3})
    assert error_of(refused)["code"] == "TOOL_INVALID_ARGUMENTS"
    assert named == LISTED
    assert named in listed
    assert moved.structuredContent == {"moved_to": 0.3}
    assert UNLISTED not in caplog.text


@pytest.mark.parametrize("rule", [LISTED, TOOL])
async def test_a_standing_approval_takes_the_listed_name_or_the_canonical_one(rule: str) -> None:
    settings = ServerSettings(
        grants=WRITES, token=TOKEN, mcp_enabled=True, approvals=frozenset({rule})
    )
    arm = Arm()
    with approvals_server(settings, arm) as (base, service):
        async with _agent(base) as session:
            moved = await session.call_tool(LISTED, {"x": 0.3})
        assert service.approvals is not None
        assert service.approvals.approvals() == []  # nobody was asked
    assert moved.isError is False, moved.content
    assert moved.structuredContent == {"moved_to": 0.3}
    assert arm.runs == [{"x": 0.3}]
