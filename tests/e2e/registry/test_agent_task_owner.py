"""End to end: an agent's task, opened over MCP through the registry on the real sim skill,
ends with the registry. Its orderly stop cancels the running Action and finalizes the task
``owner_stopped``, so the next registry's agent opens its own task instead of being refused
``PAOS_TASK_ACTIVE``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.cli.demos.pick_place import plan_steps
from doraforge.paos.home import PaosHome
from doraforge.paos.owners import OwnerLocks
from doraforge.paos.store import AgentTaskStore
from doraforge.registry.robot_tools import RobotTools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from doraforge.registry.task_owner import TaskOwnership
from tests.e2e.sim_skill import SKILL, started_sim, task_service
from tests.registry.server_support import running

pytestmark = pytest.mark.e2e

SETTINGS = ServerSettings(
    grants=frozenset({"robot.read", "robot.write"}), approvals=frozenset({"*"}), mcp_enabled=True
)


@pytest.fixture
def sim_home(tmp_path: Path) -> Iterator[tuple[PaosHome, Any]]:
    yield from started_sim(tmp_path)


def registry(home: PaosHome, runtime: Any) -> FastAPI:
    """The app ``doraforge serve`` builds, owning the tasks its agents open."""
    ownership = TaskOwnership(OwnerLocks(home.root / "owners"), SETTINGS.task_idle_timeout_s)
    robot = RobotTools(home, lambda: task_service(home, runtime), lambda: runtime, ownership)
    return build_app(new_service(SETTINGS), SETTINGS, robot=robot)


async def _call(session: ClientSession, name: str, arguments: dict[str, Any]) -> Any:
    result = await session.call_tool(name, arguments)
    assert result.isError is False, result.content
    return result.structuredContent


async def _open_and_move(url: str) -> tuple[str, str]:
    """Open a task and start its first move; leave without waiting for it."""
    async with (
        streamable_http_client(url) as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        task_id = (await _call(session, "forge_task_create", {"skill": SKILL}))["task"]["task_id"]
        scene = await _call(
            session, "forge_tool_query", {"task_id": task_id, "tool_id": "world.scene_state"}
        )
        _label, tool_id, arguments = plan_steps(
            scene["response"]["result"]["outputs"], say=lambda _m: None
        )[0]
        started = await _call(
            session,
            "forge_tool_start_action",
            {"task_id": task_id, "tool_id": tool_id, "arguments": arguments},
        )
        return task_id, started["record_id"]


async def _open_and_cancel(url: str) -> dict[str, Any]:
    async with (
        streamable_http_client(url) as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        created = await _call(session, "forge_task_create", {"skill": SKILL})
        cancel = {"task_id": created["task"]["task_id"], "reason": "test over"}
        await _call(session, "forge_task_cancel", cancel)
        return dict(created)


def test_an_agents_task_ends_with_its_registry_and_the_next_agent_is_not_refused(
    sim_home: tuple[PaosHome, Any],
) -> None:
    home, runtime = sim_home
    with running(registry(home, runtime)) as base:
        task_id, record_id = asyncio.run(_open_and_move(f"{base}/mcp"))
    store = AgentTaskStore(home.store_path)
    try:
        task, record = store.task(task_id), store.record(record_id)
    finally:
        store.close()
    assert task.state == "cancelled"
    assert task.outcome is not None
    assert task.outcome["reason"] == "owner_stopped"
    # Cancelled by the stop, or it reached its pose first: as the provider reported it.
    assert record.state in ("cancelled", "completed"), record
    with running(registry(home, runtime)) as base:
        created = asyncio.run(_open_and_cancel(f"{base}/mcp"))
    assert created["task"]["task_id"] != task_id
