"""End to end: a real ``doraforge serve --mcp`` process over the installed, running sim
skill holds an official MCP SDK client's high-risk ``forge_tool_start_action`` calls for an
operator. The waiting call is listed by ``GET /api/approvals``; approving it runs it on the
robot and the agent gets the admission; approving call A never releases call B with other
arguments; B denied reaches the agent as ``denied`` with the reason; a call nobody decides
is denied ``TOOL_APPROVAL_TIMEOUT``; an agent that disconnects withdraws its request."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from doraforge.paos.home import PaosHome
from tests.e2e.sim_skill import SKILL, started_sim
from tests.support.live_server import ServeProcess, serve_process
from tests.support.mcp_errors import error_of
from tests.support.waiting import eventually_async

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(360)]

TOKEN = "approvals-e2e-token-0123456789"
#: Long enough for the test to decide A and B, short enough to wait out for C.
APPROVAL_TIMEOUT_S = 8.0
ACTION_TIMEOUT_S = 90.0


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServeProcess]:
    """The sim skill running in a home, and ``doraforge serve`` over that same home."""
    started = started_sim(tmp_path)
    home, _runtime = next(started)
    assert isinstance(home, PaosHome)
    options = (
        "--mcp",
        "--grant",
        "robot.read",
        "--grant",
        "robot.write",
        "--token-env",
        "APPROVALS_E2E_TOKEN",
        "--approval-timeout",
        str(APPROVAL_TIMEOUT_S),
    )
    try:
        with serve_process(
            tmp_path, *options, token=TOKEN, env={"APPROVALS_E2E_TOKEN": TOKEN}
        ) as running:
            yield running
        assert "Traceback" not in running.errors(), running.errors()
    finally:
        with contextlib.suppress(StopIteration):
            next(started)  # stops the skill


@contextlib.asynccontextmanager
async def _agent(serve: ServeProcess) -> AsyncIterator[ClientSession]:
    headers = dict(serve.bearer())
    async with (
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as http,
        streamable_http_client(f"{serve.base_url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def _pending(operator: httpx.AsyncClient, count: int) -> list[dict[str, Any]]:
    async def listed() -> list[dict[str, Any]] | None:
        answer = await operator.get("/api/approvals", params={"state": "pending"})
        approvals: list[dict[str, Any]] = answer.json()["approvals"]
        return approvals if len(approvals) == count else None

    return await eventually_async(listed, within=20.0, what=f"{count} pending approval(s)")


async def _state(operator: httpx.AsyncClient, approval_id: str) -> str:
    state: str = (await operator.get(f"/api/approvals/{approval_id}")).json()["state"]
    return state


def _start(session: ClientSession, task_id: str, tool_id: str) -> asyncio.Task[CallToolResult]:
    arguments = {"task_id": task_id, "tool_id": tool_id, "arguments": {}}
    return asyncio.create_task(session.call_tool("forge_tool_start_action", arguments))


def _error(result: CallToolResult) -> dict[str, Any]:
    return error_of(result)


async def _finished(session: ClientSession, task_id: str, record_id: str) -> dict[str, Any]:
    query = {"task_id": task_id, "record_id": record_id}

    async def available() -> dict[str, Any] | None:
        answer = await session.call_tool("forge_tool_action_result", query)
        assert answer.structuredContent is not None
        record = answer.structuredContent
        return record if record.get("status") == "available" else None

    return await eventually_async(available, within=ACTION_TIMEOUT_S, what="arm.home to finish")


async def _scenario(serve: ServeProcess) -> None:
    async with (
        httpx.AsyncClient(
            base_url=serve.base_url, headers=dict(serve.bearer()), timeout=30
        ) as operator,
        _agent(serve) as session,
    ):
        created = await session.call_tool("forge_task_create", {"skill": SKILL})
        assert created.isError is False, created.content  # medium risk: nobody is asked
        assert created.structuredContent is not None
        task_id = created.structuredContent["task"]["task_id"]
        assert (await operator.get("/api/approvals")).json() == {"approvals": []}

        # A and B wait side by side; approving A releases A only.
        call_a = _start(session, task_id, "arm.home")
        (record_a,) = await _pending(operator, 1)
        call_b = _start(session, task_id, "gripper.release")
        record_b = next(r for r in await _pending(operator, 2) if r["id"] != record_a["id"])
        assert record_a["tool"] == record_b["tool"] == "forge_tool_start_action"
        assert record_a["caller"] == "doraforge-agent"
        assert record_a["risk"] == "high"
        assert record_a["arguments"]["tool_id"] == "arm.home"
        assert record_b["arguments"]["tool_id"] == "gripper.release"
        assert record_a["fingerprint"] != record_b["fingerprint"]
        approved = await operator.post(
            f"/api/approvals/{record_a['id']}/approve", json={"reason": "cell is clear"}
        )
        assert approved.status_code == 200
        result_a = await call_a
        assert result_a.isError is False, result_a.content
        assert result_a.structuredContent is not None
        record_id = result_a.structuredContent["record_id"]
        assert not call_b.done()
        assert await _state(operator, record_b["id"]) == "pending"
        again = await operator.post(
            f"/api/approvals/{record_a['id']}/approve", json={"reason": "once more"}
        )
        assert again.status_code == 409

        # B denied: the agent reads the operator's reason.
        await operator.post(
            f"/api/approvals/{record_b['id']}/deny", json={"reason": "gripper is serviced"}
        )
        result_b = await call_b
        error_b = _error(result_b)
        assert error_b["code"] == "TOOL_APPROVAL_DENIED"
        assert error_b["details"]["reason"] == "gripper is serviced"
        assert "gripper is serviced" in getattr(result_b.content[0], "text", "")

        finished = await _finished(session, task_id, record_id)
        assert finished["record"]["state"] == "completed", finished

        # C: nobody decides in time.
        call_c = _start(session, task_id, "arm.home")
        (record_c,) = await _pending(operator, 1)
        error_c = _error(await call_c)
        assert error_c["code"] == "TOOL_APPROVAL_TIMEOUT"
        assert await _state(operator, record_c["id"]) == "expired"

    # D: an agent that goes away withdraws its request.
    async with httpx.AsyncClient(
        base_url=serve.base_url, headers=dict(serve.bearer()), timeout=30
    ) as operator:
        async with _agent(serve) as leaving:
            call_d = _start(leaving, task_id, "arm.home")
            (record_d,) = await _pending(operator, 1)
            call_d.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call_d

        async def withdrawn() -> bool:
            return await _state(operator, record_d["id"]) == "withdrawn"

        await eventually_async(withdrawn, within=20.0, what="D's approval to be withdrawn")
        events = [r["state"] for r in (await operator.get("/api/approvals")).json()["approvals"]]
    assert sorted(events) == ["approved", "denied", "expired", "withdrawn"]


def test_an_operator_decides_each_high_risk_mcp_call_of_a_real_serve(
    serve: ServeProcess,
) -> None:
    asyncio.run(_scenario(serve))
