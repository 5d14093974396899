"""Behaviour of the ``arm`` endpoint through forge-tool's handler, against a fake robot."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from forge_tool import ToolEndpointError, ToolEnvelope

from doraforge.nodes.arm.config import ArmConfig, JointSpec
from doraforge.nodes.arm.endpoint import definition
from doraforge.nodes.arm.kinematics import Unreachable
from tests.nodes.provider_harness import HandlerHarness
from tests.nodes.robot_fakes import FakeRobot, TickTiming

pytestmark = pytest.mark.anyio

NAMES = ("x", "y", "z", "yaw")
START = (0.3, 0.0, 0.2, 0.0)
REACH_M = 0.7


class CartesianKinematics:
    """A gantry: the first three joints are the tool position, the fourth its yaw."""

    def fk(self, q: np.ndarray) -> tuple[np.ndarray, float]:
        return np.asarray(q[:3], dtype=float), float(q[3])

    def ik(
        self, position: np.ndarray, yaw: float | None = None, q_seed: np.ndarray | None = None
    ) -> np.ndarray:
        if np.linalg.norm(position) > REACH_M:
            raise Unreachable("beyond the gantry's reach")
        if yaw is None:
            assert q_seed is not None  # the endpoint seeds IK with the measured joints
            yaw = q_seed[3]
        return np.array([*position, yaw])


def config() -> ArmConfig:
    return ArmConfig(
        robot_id="gantry",
        base_frame="base",
        tool_frame="tool",
        joints=(
            JointSpec("x", 0.0, 0.55, 0.5),
            JointSpec("y", -0.5, 0.5, 0.5),
            JointSpec("z", 0.0, 0.5, 0.5),
            JointSpec("yaw", -3.0, 3.0, 1.0),
        ),
        home=(0.25, 0.0, 0.3, 0.0),
        workspace_min=(0.1, -0.4, 0.0),
        workspace_max=(0.6, 0.4, 0.45),
    )


@pytest.fixture
def timing() -> TickTiming:
    return TickTiming()


@pytest.fixture
def robot(timing: TickTiming) -> FakeRobot:
    robot = FakeRobot(NAMES, START)
    timing.robots.append(robot)
    return robot


@pytest.fixture
def arm(timing: TickTiming, robot: FakeRobot) -> HandlerHarness:
    built = definition(config(), CartesianKinematics(), timing=timing, endpoint_instance_id="ep-1")
    assert built.data_plane is not None
    robot.connect(built.data_plane)
    robot.report()
    return HandlerHarness(built)


def outcome(response: ToolEnvelope) -> str:
    answer: str = response.payload["outcome"]
    return answer


def error_code(response: ToolEnvelope) -> str:
    code: str = response.payload["error"]["code"]
    return code


def fractions(arm: HandlerHarness, invoke: object) -> list[float]:
    events = arm.published.events_for(str(invoke.invocation_id))  # type: ignore[attr-defined]
    return [e.payload["data"]["fraction"] for e in events if e.payload["type"] == "progress"]


async def test_move_to_pose_reaches_the_target_and_reports_the_final_pose(
    arm: HandlerHarness, robot: FakeRobot
) -> None:
    invoke = await arm.invoke("move_to_pose", {"position": [0.45, 0.1, 0.1], "yaw": 0.5})
    assert outcome(invoke) == "accepted"
    await arm.wait_event(invoke, "executor_completed")
    result = (await arm.result(invoke))["result"]
    assert result["status"] == "succeeded"
    outputs = result["outputs"]
    assert outputs["position"] == pytest.approx([0.45, 0.1, 0.1], abs=0.01)
    assert outputs["yaw"] == pytest.approx(0.5, abs=0.01)
    assert outputs["position_error"] < 0.01
    assert set(outputs["joints"]) == set(NAMES)
    assert np.max(np.abs(robot.velocity)) < 0.02  # settled, not merely on time


async def test_progress_fractions_increase_and_end_at_one(arm: HandlerHarness) -> None:
    invoke = await arm.invoke("move_to_pose", {"position": [0.5, -0.2, 0.3]})
    await arm.wait_event(invoke, "executor_completed")
    seen = fractions(arm, invoke)
    assert len(seen) >= 5
    assert seen == sorted(seen)
    assert seen[-1] == 1.0
    assert arm.event_types(invoke)[-1] == "executor_completed"


async def test_move_joints_by_name_moves_only_the_named_joints(
    arm: HandlerHarness, robot: FakeRobot
) -> None:
    invoke = await arm.invoke("move_joints", {"positions": {"yaw": 1.0}, "speed": 0.5})
    await arm.wait_event(invoke, "executor_completed")
    joints = (await arm.result(invoke))["result"]["outputs"]["joints"]
    assert joints["yaw"] == pytest.approx(1.0, abs=0.01)
    assert [joints[n] for n in ("x", "y", "z")] == pytest.approx(START[:3], abs=1e-3)
    assert all(command.name == list(NAMES) for command in robot.commands)


async def test_home_returns_to_the_profile_home(arm: HandlerHarness) -> None:
    invoke = await arm.invoke("home", {})
    await arm.wait_event(invoke, "executor_completed")
    joints = (await arm.result(invoke))["result"]["outputs"]["joints"]
    assert [joints[n] for n in NAMES] == pytest.approx([0.25, 0.0, 0.3, 0.0], abs=0.01)


async def test_cancel_holds_the_measured_position_and_ends_cancelled(
    arm: HandlerHarness, robot: FakeRobot
) -> None:
    invoke = await arm.invoke("move_to_pose", {"position": [0.5, 0.3, 0.35], "speed": 0.05})
    await arm.wait_event(invoke, "progress", count=3)
    assert (await arm.control(invoke, "cancel"))["status"] == "accepted"
    await arm.wait_event(invoke, "cancelled")
    result = (await arm.result(invoke))["result"]
    assert result["status"] == "cancelled"
    assert "executor_completed" not in arm.event_types(invoke)
    assert np.max(np.abs(robot.velocity)) < 0.02
    assert robot.q[0] < 0.45  # stopped well short of the goal
    held = robot.commands[-1].position
    assert held == pytest.approx(list(result["outputs"]["joints"].values()), abs=0.01)


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"position": [0.9, 0.0, 0.1]}, "ARM_TARGET_OUTSIDE_WORKSPACE"),
        ({"position": [0.5, 0.4, 0.45]}, "ARM_TARGET_UNREACHABLE"),
        ({"position": [0.58, 0.0, 0.1]}, "ARM_JOINT_LIMIT"),
        ({"position": ["0.3", 0.0, 0.1]}, "ARM_INVALID_ARGUMENTS"),
        ({"position": [0.3, 0.0]}, "ARM_INVALID_ARGUMENTS"),
        ({"position": [0.3, 0.0, 0.1], "speed": 0}, "ARM_INVALID_ARGUMENTS"),
        ({"position": [0.3, 0.0, 0.1], "yaw": True}, "ARM_INVALID_ARGUMENTS"),
        ({"position": [0.3, 0.0, 0.1], "frame": "tool"}, "ARM_INVALID_ARGUMENTS"),
        ({}, "ARM_INVALID_ARGUMENTS"),
    ],
)
async def test_move_to_pose_rejections_come_before_any_motion(
    arm: HandlerHarness, robot: FakeRobot, arguments: dict[str, Any], code: str
) -> None:
    response = await arm.invoke("move_to_pose", arguments)
    assert outcome(response) == "rejected"
    assert error_code(response) == code
    assert robot.commands == []


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"positions": {"x": 0.9}}, "ARM_JOINT_LIMIT"),
        ({"positions": [0.3, 0.0, 0.2]}, "ARM_INVALID_ARGUMENTS"),
        ({"positions": {"elbow": 0.1}}, "ARM_INVALID_ARGUMENTS"),
        ({"positions": {"x": None}}, "ARM_INVALID_ARGUMENTS"),
        ({"positions": {}}, "ARM_INVALID_ARGUMENTS"),
    ],
)
async def test_move_joints_rejections_come_before_any_motion(
    arm: HandlerHarness, robot: FakeRobot, arguments: dict[str, Any], code: str
) -> None:
    response = await arm.invoke("move_joints", arguments)
    assert error_code(response) == code
    assert robot.commands == []


async def test_non_finite_numbers_are_rejected_even_past_the_wire(arm: HandlerHarness) -> None:
    # The Wire itself refuses NaN; a provider still never trusts its caller.
    sample = arm.definition.data_plane.latest()  # type: ignore[union-attr]
    planners = arm.definition.operations
    for operation, arguments in (
        ("move_to_pose", {"position": [float("nan"), 0.0, 0.1]}),
        ("move_to_pose", {"position": [0.3, 0.0, 0.1], "yaw": float("inf")}),
        ("move_joints", {"positions": {"x": float("inf")}}),
    ):
        with pytest.raises(ToolEndpointError) as caught:
            planners[operation]._planner.plan(arguments, sample)  # type: ignore[union-attr]
        assert caught.value.error.code == "ARM_INVALID_ARGUMENTS"


async def test_motion_without_joint_state_is_rejected_with_arm_no_state(
    timing: TickTiming,
) -> None:
    built = definition(config(), CartesianKinematics(), timing=timing, endpoint_instance_id="e")
    robot = FakeRobot(NAMES, START)
    robot.connect(built.data_plane)  # type: ignore[arg-type]
    arm = HandlerHarness(built)
    response = await arm.invoke("home", {})
    assert error_code(response) == "ARM_NO_STATE"
    assert robot.commands == []
    state = await arm.invoke("arm_state", {})
    assert state.payload["result"]["error"]["code"] == "ARM_NO_STATE"
    assert built.status().state == "degraded"  # type: ignore[misc]


async def test_second_motion_of_any_kind_is_refused_with_capacity(arm: HandlerHarness) -> None:
    first = await arm.invoke("move_to_pose", {"position": [0.5, 0.3, 0.35], "speed": 0.02})
    assert outcome(first) == "accepted"
    for operation, arguments in (("home", {}), ("move_joints", {"positions": {"yaw": 0.1}})):
        second = await arm.invoke(operation, arguments)
        assert error_code(second) == "FORGE_ENDPOINT_CAPACITY"
        assert second.payload["error"]["retryable"] is True
    assert arm.definition.status().state == "busy"  # type: ignore[misc]
    await arm.control(first, "cancel")
    await arm.wait_event(first, "cancelled")
    third = await arm.invoke("home", {})
    assert outcome(third) == "accepted"
    await arm.wait_event(third, "executor_completed")


async def test_state_loss_during_a_motion_is_unknown_never_failed_or_succeeded(
    arm: HandlerHarness, robot: FakeRobot
) -> None:
    invoke = await arm.invoke("move_to_pose", {"position": [0.5, 0.3, 0.35], "speed": 0.05})
    await arm.wait_event(invoke, "progress", count=2)
    robot.alive = False  # the world died
    await arm.wait_phase(invoke, "unknown")
    result = (await arm.result(invoke))["result"]
    assert result["status"] == "unknown"
    assert result["error"]["code"] == "ARM_STATE_LOST"
    assert result["error"]["retryable"] is False
    assert arm.definition.status().state == "degraded"  # type: ignore[misc]


async def test_a_blocked_arm_times_out_as_failed(arm: HandlerHarness, robot: FakeRobot) -> None:
    robot.block("x", 0.35, side=1)
    invoke = await arm.invoke("move_to_pose", {"position": [0.5, 0.0, 0.2]})
    await arm.wait_event(invoke, "executor_failed")
    result = (await arm.result(invoke))["result"]
    assert result["error"]["code"] == "ARM_MOTION_TIMEOUT"


async def test_arm_state_reports_joints_pose_and_staleness(
    arm: HandlerHarness, timing: TickTiming
) -> None:
    timing.advance(0.2)
    response = await arm.invoke("arm_state", {})
    outputs = response.payload["result"]["outputs"]
    assert outputs["position"] == pytest.approx(START[:3])
    assert outputs["base_frame"] == "base"
    assert outputs["stale_ms"] == 0
    assert outputs["moving"] is False
