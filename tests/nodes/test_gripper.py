"""Behaviour of the ``gripper`` endpoint through forge-tool's handler, against a fake robot."""

from __future__ import annotations

from typing import Any

import pytest

from doraforge.nodes.gripper.config import GripperConfig
from doraforge.nodes.gripper.endpoint import definition
from tests.nodes.provider_harness import HandlerHarness
from tests.nodes.robot_fakes import FakeRobot, TickTiming

pytestmark = pytest.mark.anyio

CUBE_WIDTH = 0.04


def config() -> GripperConfig:
    # One joint per finger opening; the other finger mirrors it, as in the sim profile.
    return GripperConfig(
        joints=("finger",), open_width=0.08, closed_width=0.0, max_width=0.08, scale=0.5
    )


@pytest.fixture
def timing() -> TickTiming:
    return TickTiming()


@pytest.fixture
def robot(timing: TickTiming) -> FakeRobot:
    robot = FakeRobot(("shoulder", "finger"), (0.3, 0.04))  # the arm joint is not ours
    timing.robots.append(robot)
    return robot


@pytest.fixture
def gripper(timing: TickTiming, robot: FakeRobot) -> HandlerHarness:
    built = definition(config(), timing=timing, endpoint_instance_id="ep-g")
    robot.connect(built.data_plane)  # type: ignore[arg-type]
    robot.report()
    return HandlerHarness(built)


async def finished(
    gripper: HandlerHarness, operation: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    invoke = await gripper.invoke(operation, arguments)
    assert invoke.payload["outcome"] == "accepted", invoke.payload
    await gripper.wait_event(invoke, "executor_completed")
    result: dict[str, Any] = (await gripper.result(invoke))["result"]
    return result


async def test_grasp_on_an_object_reports_holding_at_the_object_width(
    gripper: HandlerHarness, robot: FakeRobot
) -> None:
    robot.block("finger", CUBE_WIDTH / 2, side=-1)
    result = await finished(gripper, "grasp", {})
    assert result["outputs"]["holding"] is True
    assert result["outputs"]["width"] == pytest.approx(CUBE_WIDTH, abs=1e-3)
    # Commands name the gripper joint only, and keep squeezing past the object.
    assert {tuple(c.name) for c in robot.commands} == {("finger",)}
    assert robot.commands[-1].position[0] < CUBE_WIDTH / 2
    state = (await gripper.invoke("gripper_state", {})).payload["result"]["outputs"]
    assert state["holding"] is True
    assert state["joint_positions"] == {"finger": pytest.approx(CUBE_WIDTH / 2)}


async def test_grasp_on_nothing_closes_fully_and_reports_not_holding(
    gripper: HandlerHarness,
) -> None:
    result = await finished(gripper, "grasp", {"force": 20})
    assert result["outputs"]["holding"] is False
    assert result["outputs"]["width"] == pytest.approx(0.0, abs=2e-3)


async def test_grasp_to_a_width_wider_than_the_object_does_not_hold(
    gripper: HandlerHarness, robot: FakeRobot
) -> None:
    robot.block("finger", CUBE_WIDTH / 2, side=-1)
    result = await finished(gripper, "grasp", {"width": 0.06})
    assert result["outputs"] == {
        "width": pytest.approx(0.06, abs=2e-3),
        "holding": False,
        "joint_positions": {"finger": pytest.approx(0.03, abs=1e-3)},
        "elapsed_s": pytest.approx(0.6, abs=0.6),
    }


async def test_release_opens_and_clears_holding(gripper: HandlerHarness, robot: FakeRobot) -> None:
    robot.block("finger", CUBE_WIDTH / 2, side=-1)
    await finished(gripper, "grasp", {})
    robot.blocks.clear()
    result = await finished(gripper, "release", {})
    assert result["outputs"]["holding"] is False
    assert result["outputs"]["width"] == pytest.approx(0.08, abs=2e-3)


async def test_cancelled_grasp_holds_still_and_ends_cancelled(
    gripper: HandlerHarness, robot: FakeRobot
) -> None:
    invoke = await gripper.invoke("grasp", {})
    await gripper.wait_event(invoke, "progress", count=2)
    await gripper.control(invoke, "cancel")
    await gripper.wait_event(invoke, "cancelled")
    assert (await gripper.result(invoke))["result"]["status"] == "cancelled"
    assert abs(robot.velocity[1]) < 0.005


@pytest.mark.parametrize(
    "arguments",
    [{"width": 0.2}, {"width": -0.01}, {"width": "wide"}, {"force": 0}, {"speed": 1.0}],
)
async def test_bad_grasp_arguments_are_rejected_before_motion(
    gripper: HandlerHarness, robot: FakeRobot, arguments: dict[str, Any]
) -> None:
    response = await gripper.invoke("grasp", arguments)
    assert response.payload["error"]["code"] == "GRIPPER_INVALID_ARGUMENTS"
    assert robot.commands == []


async def test_second_gripper_motion_is_refused_with_capacity(gripper: HandlerHarness) -> None:
    first = await gripper.invoke("grasp", {})
    second = await gripper.invoke("release", {})
    assert second.payload["error"]["code"] == "FORGE_ENDPOINT_CAPACITY"
    await gripper.wait_event(first, "executor_completed")


async def test_state_loss_during_a_grasp_is_unknown(
    gripper: HandlerHarness, robot: FakeRobot
) -> None:
    invoke = await gripper.invoke("grasp", {})
    await gripper.wait_event(invoke, "progress", count=1)
    robot.alive = False
    await gripper.wait_phase(invoke, "unknown")
    result = (await gripper.result(invoke))["result"]
    assert result["status"] == "unknown"
    assert result["error"]["code"] == "GRIPPER_STATE_LOST"


async def test_gripper_without_state_rejects_motion_and_reports_degraded(
    timing: TickTiming,
) -> None:
    built = definition(config(), timing=timing, endpoint_instance_id="ep-g")
    gripper = HandlerHarness(built)
    response = await gripper.invoke("release", {})
    assert response.payload["error"]["code"] == "GRIPPER_NO_STATE"
    state = await gripper.invoke("gripper_state", {})
    assert state.payload["result"]["error"]["code"] == "GRIPPER_NO_STATE"
    assert built.status().state == "degraded"  # type: ignore[misc]
