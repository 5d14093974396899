"""End to end: a lab of four sim cells behind one registry.

Four copies of the pick-place skill (``cell-1`` … ``cell-4``) run in one PAOS home, each
started by the Skill Runtime with its own Gateway on a port it chose (``AUTO_PORT``, the
CLI's ``--port auto``) and its cameras slowed
to 2 frames a second. One real ``doraforge serve --mcp --task-slots per_runtime`` fronts
them, and an official MCP SDK client drives two cells at once: a task on each, an
approved ``arm.home`` on both side by side, both finalized to a verdict. A diagnostic
call naming no skill is refused ``SKILL_AMBIGUOUS`` with the four cells as candidates, a
second task on a busy cell ``PAOS_TASK_ACTIVE`` naming it; every approval and audit
record of those calls names its own cell (skill, runtime instance, robot). Switched back
to the spec's global slot, a task on a third cell refuses one on the fourth, naming the
third's cell.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.skill_runtime.dora_run import dora_environment
from tests.paths import PROJECT_ROOT
from tests.support.live_server import ServeProcess, serve_process
from tests.support.mcp_errors import error_of
from tests.support.waiting import eventually_async

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

CELLS = ("cell-1", "cell-2", "cell-3", "cell-4")
SOURCE = PROJECT_ROOT / "skills" / "pick-place"
#: Slow cameras: four MuJoCo renderers on a shared 2-core machine would starve the rest.
CAMERA_HZ = "2"
ACTION_TIMEOUT_S = 120.0


@dataclass
class Fleet:
    home: PaosHome
    runtime: Any
    instances: dict[str, str]  # skill -> runtime_instance_id


def _install_copies(home: PaosHome, work: Path) -> None:
    from doraforge.skill_runtime.archive import pack
    from doraforge.skill_runtime.installer import Installer

    for name in CELLS:
        source = work / "src" / name
        shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns("__pycache__"))
        manifest = source / "skill.yaml"
        text = manifest.read_text(encoding="utf-8")
        assert "\nname: pick-place\n" in text
        manifest.write_text(text.replace("\nname: pick-place\n", f"\nname: {name}\n"))
        packed = pack(source, work / f"{name}.tar.gz")
        Installer(home).install(str(packed.path), yes=True)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, ServeProcess]]:
    """Four sim cells in one home and one ``doraforge serve`` (per-runtime task slots)
    over it; serve starts first, while the machine is quiet, and stops last."""
    from doraforge.skill_runtime.runtime import AUTO_PORT, RuntimeManager

    work = tmp_path_factory.mktemp("fleet")
    home = PaosHome(work / "home")
    _install_copies(home, work)
    options = ["--mcp", "--grant", "robot.read", "--grant", "robot.write"]
    options += ["--task-slots", "per_runtime", "--approval-timeout", "120"]
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    environ = dora_environment(os.environ, DORAFORGE_SIM_CAMERA_HZ=CAMERA_HZ)
    runtime = RuntimeManager(home, environ=environ)
    with serve_process(work, *options, env=env) as serve:
        started: list[str] = []
        try:
            instances, urls = {}, set()
            for name in CELLS:
                started.append(name)
                state = runtime.start(name, "sim", port=AUTO_PORT)  # a free port each
                instances[name] = state.runtime_instance_id
                urls.add(state.gateway_url)
            assert len(urls) == len(CELLS)  # four Gateways, one port each
            yield Fleet(home, runtime, instances), serve
        finally:
            for name in reversed(started):
                try:
                    runtime.stop(name)
                except Exception:  # a guard tripped by a failed run: stop anyway, audited
                    runtime.stop(name, force=True)
    assert "Traceback" not in serve.errors(), serve.errors()


@contextlib.asynccontextmanager
async def _agent(serve: ServeProcess) -> AsyncIterator[ClientSession]:
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(30, read=300)) as http,
        streamable_http_client(f"{serve.base_url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class Operator:
    """Approves every pending approval, keeping each record as it was asked."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.approved: list[dict[str, Any]] = []

    async def run(self) -> None:
        while True:
            answer = await self.client.get("/api/approvals", params={"state": "pending"})
            for record in answer.json()["approvals"]:
                decided = await self.client.post(
                    f"/api/approvals/{record['id']}/approve", json={"reason": "cell is clear"}
                )
                assert decided.status_code == 200, decided.text
                self.approved.append(record)
            await asyncio.sleep(0.05)  # an operator's polling, not a synchronisation


def _data(result: CallToolResult) -> dict[str, Any]:
    assert result.isError is False, result.content
    assert result.structuredContent is not None
    return result.structuredContent


def _error(result: CallToolResult) -> dict[str, Any]:
    return error_of(result)


async def _drive(session: ClientSession, task_id: str) -> dict[str, Any]:
    """One approved ``arm.home`` on the task's cell to its end, then the task finalized."""
    started = _data(
        await session.call_tool(
            "forge_tool_start_action",
            {"task_id": task_id, "tool_id": "arm.home", "arguments": {}},
        )
    )
    query = {"task_id": task_id, "record_id": started["record_id"]}

    async def finished() -> dict[str, Any]:
        answer = _data(await session.call_tool("forge_tool_action_result", query))
        ended: dict[str, Any] = answer["record"] if answer["status"] == "available" else {}
        return ended

    record: dict[str, Any] = await eventually_async(
        finished,
        within=ACTION_TIMEOUT_S,
        what="arm.home to end",
    )
    assert record["state"] == "completed", record
    return _data(await session.call_tool("forge_task_finalize", {"task_id": task_id}))


async def _per_runtime(session: ClientSession, fleet: Fleet) -> dict[str, str]:
    ambiguous = _error(await session.call_tool("forge_tool_query", {"tool_id": "arm.state"}))
    assert ambiguous["code"] == "SKILL_AMBIGUOUS"
    candidates = {c["skill"]: c["runtimeInstanceId"] for c in ambiguous["details"]["candidates"]}
    assert candidates == fleet.instances
    tasks = {}
    for name in CELLS[:2]:
        created = _data(await session.call_tool("forge_task_create", {"skill": name}))
        tasks[name] = created["task"]["task_id"]
    busy = _error(await session.call_tool("forge_task_create", {"skill": CELLS[0]}))
    assert busy["code"] == "PAOS_TASK_ACTIVE"
    assert busy["details"]["active_task_id"] == tasks[CELLS[0]]
    assert busy["details"]["runtime_instance_id"] == fleet.instances[CELLS[0]]
    described = await asyncio.gather(*(_drive(session, tasks[name]) for name in CELLS[:2]))
    for name, answer in zip(CELLS[:2], described, strict=True):
        # A verdict: done, failed, or a recovery asked for (ended here, not replanned).
        assert answer["task"]["state"] in ("succeeded", "failed", "awaiting_replan")
        assert answer["binding"]["skill"] == name
        assert answer["binding"]["runtime_instance"] == fleet.instances[name]
        if answer["task"]["state"] == "awaiting_replan":
            ended = {"task_id": tasks[name], "reason": "verdict reached"}
            _data(await session.call_tool("forge_task_cancel", ended))
    return tasks


async def _global(session: ClientSession, fleet: Fleet) -> None:
    store = AgentTaskStore(fleet.home.store_path)  # the home's setting, as another process
    try:
        store.set_task_slots("global")
    finally:
        store.close()
    first = _data(await session.call_tool("forge_task_create", {"skill": CELLS[2]}))
    refused = _error(await session.call_tool("forge_task_create", {"skill": CELLS[3]}))
    assert refused["code"] == "PAOS_TASK_ACTIVE"
    details = refused["details"]
    assert (details["skill"], details["task_slots"]) == (CELLS[2], "global")
    assert details["runtime_instance_id"] == fleet.instances[CELLS[2]]
    assert details["active_task_id"] == first["task"]["task_id"]
    cancelled = await session.call_tool(
        "forge_task_cancel", {"task_id": first["task"]["task_id"], "reason": "test over"}
    )
    assert _data(cancelled)["task"]["state"] == "cancelled"


async def _scenario(serve: ServeProcess, fleet: Fleet) -> tuple[list[Any], list[Any]]:
    async with (
        httpx.AsyncClient(base_url=serve.base_url, timeout=30) as operator_http,
        _agent(serve) as session,
    ):
        operator = Operator(operator_http)
        approving = asyncio.create_task(operator.run())
        try:
            await _per_runtime(session, fleet)
            await _global(session, fleet)
        finally:
            approving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await approving
        audit = (await operator_http.get("/console/api/audit", params={"limit": 1000})).json()
    return operator.approved, audit["records"]


def test_an_agent_drives_two_of_four_cells_at_once_and_every_record_names_its_cell(
    lab: tuple[Fleet, ServeProcess],
) -> None:
    fleet, serve = lab
    approved, audit = asyncio.run(_scenario(serve, fleet))
    # Each approved arm.home was shown to the operator with its own cell and robot.
    assert sorted(record["cell"]["skill"] for record in approved) == list(CELLS[:2])
    for record in approved:
        cell = record["cell"]
        assert cell["runtimeInstanceId"] == fleet.instances[cell["skill"]]
        assert cell["robot"] == "sim_arm"
    starts = [r for r in audit if r.get("name") == "forge.tool_start_action"]
    assert sorted(r["cell"]["skill"] for r in starts if r.get("kind") != "approval") == list(
        CELLS[:2]
    )
    events = [r for r in starts if r.get("kind") == "approval"]
    assert {(r["event"], r["cell"]["skill"]) for r in events} == {
        (event, name) for event in ("requested", "approved") for name in CELLS[:2]
    }
    creates = [r for r in audit if r.get("name") == "forge.task_create"]
    assert {r["cell"]["skill"] for r in creates} == set(CELLS)
    assert all(
        r["cell"]["runtimeInstanceId"] == fleet.instances[r["cell"]["skill"]] for r in creates
    )
