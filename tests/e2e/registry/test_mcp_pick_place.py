"""End to end: an official MCP SDK client with the robot grants runs the pick-and-place on
the installed sim skill through the forge.* tools of ``doraforge serve``'s app."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.cli.demos.pick_place import plan_steps
from doraforge.paos.home import PaosHome
from doraforge.registry.robot_tools import RobotTools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.e2e.sim_skill import SKILL, started_sim, task_service
from tests.paths import PROJECT_ROOT
from tests.registry.server_support import running
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.e2e

SOURCE = PROJECT_ROOT / "skills" / SKILL
STEP_TIMEOUT_S = 90.0


@pytest.fixture
def sim_home(tmp_path: Path) -> Iterator[tuple[PaosHome, Any]]:
    yield from started_sim(tmp_path)


async def _call(session: ClientSession, name: str, arguments: dict[str, Any]) -> Any:
    result = await session.call_tool(name, arguments)
    assert result.isError is False, result.content
    assert result.structuredContent is not None
    return result.structuredContent


async def _action(
    session: ClientSession, task_id: str, tool_id: str, args: dict[str, Any]
) -> dict[str, Any]:
    started = await _call(
        session,
        "forge_tool_start_action",
        {"task_id": task_id, "tool_id": tool_id, "arguments": args},
    )
    query = {"task_id": task_id, "record_id": started["record_id"]}

    async def finished() -> dict[str, Any] | None:
        answer = await _call(session, "forge_tool_action_result", query)
        return answer["record"] if answer["status"] == "available" else None

    return await eventually_async(
        finished, within=STEP_TIMEOUT_S, what=f"{tool_id} to finish", interval=0.05
    )


async def _pick_place(url: str) -> dict[str, Any]:
    async with (
        streamable_http_client(url) as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"forge_task_create", "forge_tool_start_action", "forge_task_finalize"} <= names
        installed = await _call(session, "forge_skills_installed", {})
        assert [s["name"] for s in installed["skills"]] == [SKILL]
        contexts = await _call(session, "forge_tool_contexts", {"skill": SKILL})
        assert "truncated" not in contexts
        assert "world.scene_state" in {tool["tool_id"] for tool in contexts["tools"]}
        runtimes = await _call(session, "forge_runtime_status", {"skill": SKILL})
        assert runtimes["runtimes"][0]["state"] == "running"
        created = await _call(session, "forge_task_create", {"skill": SKILL})
        task_id = created["task"]["task_id"]
        scene = await _call(
            session, "forge_tool_query", {"task_id": task_id, "tool_id": "world.scene_state"}
        )
        outputs = scene["response"]["result"]["outputs"]
        for _label, tool_id, arguments in plan_steps(outputs, say=lambda _m: None):
            record = await _action(session, task_id, tool_id, arguments)
            assert record["state"] == "completed", record
        finalized: dict[str, Any] = await _call(
            session, "forge_task_finalize", {"task_id": task_id}
        )
        return finalized


def test_an_mcp_client_with_the_write_grant_runs_and_finalizes_the_pick_and_place(
    sim_home: tuple[PaosHome, Any],
) -> None:
    home, runtime = sim_home
    settings = ServerSettings(
        grants=frozenset({"robot.read", "robot.write"}),
        approvals=frozenset({"*"}),
        mcp_enabled=True,
    )
    robot = RobotTools(home, lambda: task_service(home, runtime), lambda: runtime)
    app = build_app(new_service(settings), settings, robot=robot)
    with running(app) as base:
        described = asyncio.run(_pick_place(f"{base}/mcp"))
    assert "task" in described, sorted(described)
    assert described["task"]["state"] == "succeeded"
