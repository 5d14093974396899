"""SkillGateways keeps one passed health check per skill start for a short lifetime, and
sees a stop or a restart at once (the runtime state file is read on every call)."""

from __future__ import annotations

import asyncio
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.registry.errors import ToolFailure
from doraforge.registry.skill_gateway import HEALTH_CHECK_LIFETIME_S, SkillGateways
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.runtime_state import RuntimeState, read_state, write_state
from doraforge.skills import source as skill_source

SKILL = "pick-place"

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9201"


class CountingRuntime:
    """``healthy_runtime`` as the state file says, counting calls."""

    def __init__(self, home: PaosHome) -> None:
        self.home, self.checks = home, 0

    def healthy_runtime(self, name: str) -> RuntimeState:
        self.checks += 1
        state = read_state(self.home.runtime_dir, name)
        if state is None or state.state != "running":
            raise RuntimeStateError("SKILL_NOT_RUNNING", "not running")
        return state


def _write(home: PaosHome, *, state: str = "running", instance: str = "i1") -> None:
    now = datetime.now(UTC)
    home.runtime_dir.mkdir(parents=True, exist_ok=True)
    write_state(
        home.runtime_dir,
        RuntimeState(
            name=SKILL,
            version="0.1.0",
            profile="sim",
            state=state,
            runtime_instance_id=instance,
            dataflow_name="d",
            coordinator_port=1,
            gateway_url=URL,
            started_at=now,
            updated_at=now,
        ),
    )


def _gateways(tmp_path: Path) -> tuple[SkillGateways, CountingRuntime, PaosHome, list[float]]:
    home = PaosHome(tmp_path / "home")
    shutil.copytree(skill_source(SKILL), home.skills_dir / SKILL / "current")
    _write(home)
    now = [0.0]
    runtime = CountingRuntime(home)
    return SkillGateways(home, lambda: runtime, clock=lambda: now[0]), runtime, home, now


async def test_calls_within_the_lifetime_share_one_check_and_expiry_rechecks(
    tmp_path: Path,
) -> None:
    gateways, runtime, _, now = _gateways(tmp_path)
    assert [await gateways.url(SKILL) for _ in range(5)] == [URL] * 5
    assert runtime.checks == 1
    now[0] += HEALTH_CHECK_LIFETIME_S + 0.01
    await gateways.url(SKILL)
    assert runtime.checks == 2


async def test_a_stop_is_refused_at_once_and_a_restart_is_rechecked(tmp_path: Path) -> None:
    gateways, runtime, home, _ = _gateways(tmp_path)
    await gateways.url(SKILL)
    _write(home, state="stopped")
    with pytest.raises(ToolFailure) as caught:
        await gateways.url(SKILL)
    assert caught.value.code == "SKILL_NOT_RUNNING"
    _write(home, instance="i2")
    await gateways.url(SKILL)
    assert runtime.checks == 3


async def test_forget_after_a_transport_failure_rechecks(tmp_path: Path) -> None:
    gateways, runtime, _, _ = _gateways(tmp_path)
    await gateways.url(SKILL)
    gateways.forget(SKILL)
    await gateways.url(SKILL)
    assert runtime.checks == 2


async def test_concurrent_calls_share_one_check(tmp_path: Path) -> None:
    gateways, runtime, _, _ = _gateways(tmp_path)
    urls = await asyncio.gather(*(gateways.url(SKILL) for _ in range(8)))
    assert urls == [URL] * 8
    assert runtime.checks == 1


async def test_a_robot_tool_whose_gateway_is_gone_drops_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transport failure of a skill-routed call: the next call checks the skill again."""
    from doraforge.paos.agent_tools import TOOLS
    from doraforge.registry.robot_tools import RobotTools

    gateways, runtime, home, _ = _gateways(tmp_path)
    robot = RobotTools(home, lambda: None, lambda: runtime)
    robot.gateways = gateways
    codes = iter(["FORGE_CLIENT_TRANSPORT", *["FORGE_TOOL_INVALID_ARGUMENTS"] * 2])

    def failing(_tool: object) -> object:
        async def adapter(_arguments: dict[str, object]) -> object:
            raise ToolFailure(next(codes), "failed", retryable=True)

        return adapter

    monkeypatch.setattr(robot, "agent_adapter", failing)
    query = robot.skill_adapter(TOOLS["forge_tool_query"])
    for expected_checks in (1, 2, 2):  # gone: re-checked; a refused argument: kept
        with pytest.raises(ToolFailure):
            await query({"skill": SKILL, "tool_id": "world.scene_state", "arguments": {}})
        assert runtime.checks == expected_checks
