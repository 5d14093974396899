"""SkillGateways keeps one passed health check per skill start for a short lifetime, and
sees a stop or a restart at once (the runtime state file is read on every call). With a
lister, an expired check is renewed by the Gateway's identity alone while the runtime's
full check stands, and each listing that passed is vouched for."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from doraforge.paos.errors import ForgeTransportError
from doraforge.paos.home import PaosHome
from doraforge.registry.errors import ToolFailure
from doraforge.registry.skill_gateway import (
    FULL_CHECK_LIFETIME_S,
    HEALTH_CHECK_LIFETIME_S,
    SkillGateways,
)
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.runtime_state import RuntimeState, read_state, write_state
from doraforge.skills import source as skill_source

SKILL = "pick-place"

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9201"
IDENTITY = {"gateway_id": "g", "instance_id": "gwinst-1", "catalog_revision": "c1"}


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


def _write(
    home: PaosHome,
    *,
    state: str = "running",
    instance: str = "i1",
    identity: dict[str, Any] | None = None,
) -> None:
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
            gateway_identity=identity,
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


class Listing:
    """A Gateway's ``GET /tools`` as the pooled client reads it, counting reads; the
    identity it answers with can change (a restarted or foreign Gateway)."""

    def __init__(self) -> None:
        self.identity: dict[str, Any] = dict(IDENTITY)
        self.reads = 0
        self.fails = False
        self.vouched: list[tuple[str, float]] = []

    async def __call__(self, url: str) -> Mapping[str, Any]:
        self.reads += 1
        if self.fails:
            raise ForgeTransportError("FORGE_CLIENT_TRANSPORT", "refused")
        return {"gateway": self.identity, "gateway_identity": self.identity["instance_id"]}

    def vouch(self, url: str, listing: Mapping[str, Any], trusted_for_s: float) -> None:
        self.vouched.append((url, trusted_for_s))


def _renewing(tmp_path: Path) -> tuple[SkillGateways, CountingRuntime, Listing, list[float]]:
    """SkillGateways with a lister; the home is the runtime's (``runtime.home``)."""
    home = PaosHome(tmp_path / "home")
    shutil.copytree(skill_source(SKILL), home.skills_dir / SKILL / "current")
    _write(home, identity=IDENTITY)
    now = [0.0]
    runtime, listing = CountingRuntime(home), Listing()
    gateways = SkillGateways(
        home, lambda: runtime, clock=lambda: now[0], lister=listing, vouch=listing.vouch
    )
    return gateways, runtime, listing, now


async def test_an_expired_check_is_renewed_by_identity_until_the_full_check_expires(
    tmp_path: Path,
) -> None:
    gateways, runtime, listing, now = _renewing(tmp_path)
    await gateways.url(SKILL)
    assert (runtime.checks, listing.reads) == (1, 1)  # the full check's listing is vouched
    for _ in range(3):
        now[0] += HEALTH_CHECK_LIFETIME_S
        assert await gateways.url(SKILL) == URL
    assert (runtime.checks, listing.reads) == (1, 4)
    assert listing.vouched == [(URL, HEALTH_CHECK_LIFETIME_S)] * 4
    now[0] = FULL_CHECK_LIFETIME_S
    await gateways.url(SKILL)
    assert runtime.checks == 2


async def test_another_identity_at_the_url_runs_the_full_check_and_vouches_nothing(
    tmp_path: Path,
) -> None:
    gateways, runtime, listing, now = _renewing(tmp_path)
    await gateways.url(SKILL)
    listing.identity = {**IDENTITY, "instance_id": "gwinst-squatter"}
    now[0] += HEALTH_CHECK_LIFETIME_S
    await gateways.url(SKILL)
    assert runtime.checks == 2
    assert len(listing.vouched) == 1


async def test_a_gateway_that_does_not_answer_the_renewal_runs_the_full_check(
    tmp_path: Path,
) -> None:
    gateways, runtime, listing, now = _renewing(tmp_path)
    await gateways.url(SKILL)
    listing.fails = True
    now[0] += HEALTH_CHECK_LIFETIME_S
    await gateways.url(SKILL)
    assert runtime.checks == 2
    assert len(listing.vouched) == 1


async def test_a_restart_runs_the_full_check_even_within_its_lifetime(tmp_path: Path) -> None:
    gateways, runtime, _listing, now = _renewing(tmp_path)
    await gateways.url(SKILL)
    _write(runtime.home, instance="i2", identity=IDENTITY)
    now[0] += HEALTH_CHECK_LIFETIME_S
    await gateways.url(SKILL)
    assert runtime.checks == 2


async def test_a_runtime_with_no_recorded_identity_is_never_renewed_by_listing(
    tmp_path: Path,
) -> None:
    gateways, runtime, listing, now = _renewing(tmp_path)
    _write(runtime.home, identity=None)
    await gateways.url(SKILL)
    now[0] += HEALTH_CHECK_LIFETIME_S
    await gateways.url(SKILL)
    assert (runtime.checks, listing.reads) == (2, 0)
