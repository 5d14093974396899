"""End to end: an official MCP SDK client with the robot grants runs the pick-and-place on
the installed sim skill through the forge_* tools of ``doraforge serve``'s app; and the
README's "An MCP client runs the pick-and-place" runs as written, against a real
``doraforge serve`` process, to ``succeeded success``."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.cli.demos.pick_place import plan_steps
from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.registry.robot_tools import RobotTools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.e2e.sim_skill import SKILL, started_sim, task_service
from tests.paths import PROJECT_ROOT
from tests.registry.server_support import running
from tests.support.live_server import serve_process
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
    # Cut to the MCP budget, the answer keeps what its output schema requires.
    assert described["revisions"][-1]["verdict"]["status"] == "success"


README = PROJECT_ROOT / "README.md"
EXAMPLE_SECTION = "### An MCP client runs the pick-and-place"
#: The run of nine motions and a finalize, with room for a loaded machine.
EXAMPLE_TIMEOUT_S = 420.0


def readme_example() -> list[list[str]]:
    """The commands of the README's MCP pick-and-place block, split as a shell would."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(EXAMPLE_SECTION) :]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the section lost its bash block"
    commands = [shlex.split(line, comments=True) for line in block.group(1).splitlines()]
    return [words[:-1] if words[-1] == "&" else words for words in commands if words]


@pytest.mark.slow
@pytest.mark.timeout(EXAMPLE_TIMEOUT_S + 120)
def test_the_readme_mcp_example_runs_as_written_to_a_succeeded_task(tmp_path: Path) -> None:
    pack, install, start, serve, example, stop = readme_example()
    # Pack, install, start and stop as the README does, through the same API, on a free port.
    assert (pack[:3], install[:3], start[:3], stop[:3]) == (
        ["doraforge", "skill", "pack"],
        ["doraforge", "skill", "install"],
        ["doraforge", "skill", "start"],
        ["doraforge", "skill", "stop"],
    )
    assert serve[:2] == ["doraforge", "serve"]
    assert example[:2] == ["python", "examples/mcp_pick_place.py"]
    started = started_sim(tmp_path)
    home, _runtime = next(started)
    try:
        with serve_process(tmp_path, *serve[2:]) as registry:
            done = subprocess.run(
                [sys.executable, *example[1:], f"{registry.base_url}/mcp"],
                cwd=PROJECT_ROOT,
                capture_output=True,
                text=True,
                timeout=EXAMPLE_TIMEOUT_S,
                check=False,
                env={k: v for k, v in os.environ.items() if k != "DORAFORGE_REGISTRY_TOKEN"},
            )
    finally:
        next(started, None)  # stops the skill
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "succeeded success", done.stdout
    motions = [line for line in lines if line.endswith(" completed")]
    assert len(motions) == 9, done.stdout
    assert "not listed by server" not in done.stderr
    assert "Traceback" not in done.stderr
    # Each Action was started with its step's name, so the report captions its frames.
    store = AgentTaskStore(home.store_path)
    (task,) = store.tasks()
    labels = [line.removesuffix(" completed") for line in motions]
    assert sorted(store.steps(task.task_id).values()) == sorted(labels)
