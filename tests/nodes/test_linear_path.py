"""``move_to_pose`` with ``path: "linear"`` on the real MuJoCo arm model, in process.

The planner's waypoints (and the trajectory between them) are checked by forward
kinematics against the straight tool-centre line; infeasible lines are refused before any
motion with ``ARM_LINEAR_PATH_INFEASIBLE``; ``joint`` stays the default path.
"""

from __future__ import annotations

import numpy as np
import pytest
from forge_tool import ToolEndpointError

from doraforge.nodes.arm.config import ArmConfig, from_profile
from doraforge.nodes.arm.endpoint import definition
from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.arm.linear import LINEAR_INFEASIBLE, MAX_JOINT_STEP_RAD, SPACING_M
from doraforge.nodes.arm.planners import MoveToPosePlanner
from doraforge.nodes.motion.cli import DEFAULT_PROFILE
from doraforge.nodes.motion.plane import JointSample
from doraforge.nodes.motion.trajectory import JointTrajectory, WaypointTrajectory
from doraforge.nodes.robot.profile import RobotProfile, load_profile
from tests.nodes.provider_harness import HandlerHarness
from tests.nodes.robot_fakes import FakeRobot, TickTiming
from tests.support.geometry import distance_to_segment

pytestmark = pytest.mark.anyio

#: Largest allowed distance of the tool centre from the straight line (m).
LINE_TOLERANCE_M = 0.002


@pytest.fixture(scope="module")
def profile() -> RobotProfile:
    return load_profile(DEFAULT_PROFILE)


@pytest.fixture(scope="module")
def kin(profile: RobotProfile) -> Kinematics:
    return Kinematics(profile)


@pytest.fixture(scope="module")
def config(profile: RobotProfile) -> ArmConfig:
    return from_profile(profile)


@pytest.fixture
def planner(config: ArmConfig, kin: Kinematics) -> MoveToPosePlanner:
    return MoveToPosePlanner(config, kin)


def at_rest(q: np.ndarray) -> JointSample:
    return JointSample(np.asarray(q, dtype=float), np.zeros(len(q)), 0.0, 1)


def deviation(kin: Kinematics, q: np.ndarray, start: np.ndarray, end: np.ndarray) -> float:
    """Distance (m) of the tool centre at ``q`` from the segment ``start``-``end``."""
    point, _ = kin.fk(q)
    return distance_to_segment(np.asarray(point, dtype=float), start, end)


def arm_on(config: ArmConfig, kin: Kinematics, q: np.ndarray) -> tuple[HandlerHarness, FakeRobot]:
    """The arm endpoint over a fake robot at rest at ``q``, its state reported."""
    timing = TickTiming()
    robot = FakeRobot(config.names, q)
    timing.robots.append(robot)
    built = definition(config, kin, timing=timing, endpoint_instance_id="ep-linear")
    assert built.data_plane is not None
    robot.connect(built.data_plane)
    robot.report()
    return HandlerHarness(built), robot


@pytest.mark.parametrize(
    ("target", "yaw"),
    [
        ([0.45, 0.1, 0.1], None),
        ([0.45, 0.1, 0.1], 0.8),
        ([0.2, -0.3, 0.05], -1.5),
        ([0.5, 0.35, 0.02], None),
    ],
)
def test_linear_path_keeps_the_tool_centre_on_the_straight_line(
    planner: MoveToPosePlanner, kin: Kinematics, target: list[float], yaw: float | None
) -> None:
    arguments: dict[str, object] = {"position": target, "path": "linear"}
    if yaw is not None:
        arguments["yaw"] = yaw
    plan = planner.plan(arguments, at_rest(kin.home))
    trajectory = plan.trajectory
    assert isinstance(trajectory, WaypointTrajectory)
    start, _ = kin.fk(kin.home)
    end = np.array(target)
    waypoints = trajectory.waypoints
    assert len(waypoints) - 1 >= np.linalg.norm(end - start) / SPACING_M
    assert max(deviation(kin, q, start, end) for q in waypoints) < LINE_TOLERANCE_M
    # Between waypoints too: the commanded path, sampled in time, stays on the line.
    times = np.linspace(0.0, trajectory.duration, 500)
    assert max(deviation(kin, trajectory.at(t), start, end) for t in times) < LINE_TOLERANCE_M
    assert np.max(np.abs(np.diff(waypoints, axis=0))) <= MAX_JOINT_STEP_RAD
    reached, reached_yaw = kin.fk(trajectory.goal)
    assert reached == pytest.approx(target, abs=LINE_TOLERANCE_M)
    if yaw is not None:
        assert reached_yaw == pytest.approx(yaw, abs=0.02)
    assert plan.details["path"] == "linear"


def test_linear_timing_respects_the_joint_velocity_limits(
    planner: MoveToPosePlanner, kin: Kinematics, config: ArmConfig
) -> None:
    trajectory = planner.plan(
        {"position": [0.5, 0.35, 0.02], "path": "linear"}, at_rest(kin.home)
    ).trajectory
    dt = 0.002
    times = np.arange(0.0, trajectory.duration, dt)
    positions = np.array([trajectory.at(t) for t in times])
    speeds = np.max(np.abs(np.diff(positions, axis=0)) / dt, axis=0)
    assert np.all(speeds <= config.max_velocity * 1.01)


@pytest.mark.parametrize(
    ("start", "arguments", "reason"),
    [
        # Beyond reach, though inside the workspace box.
        (None, {"position": [0.55, 0.4, 0.4]}, "no IK solution"),
        # The shorter way round to yaw -1.0 runs wrist_roll through its +6.28 rad limit.
        ("wrist_roll_6", {"position": [0.35, 0.05, 0.25], "yaw": -1.0}, "joint jump"),
    ],
)
async def test_an_infeasible_line_is_refused_before_any_motion(
    config: ArmConfig,
    kin: Kinematics,
    start: str | None,
    arguments: dict[str, object],
    reason: str,
) -> None:
    q = kin.home.copy()
    if start == "wrist_roll_6":
        q[5] = 6.0
    arm, robot = arm_on(config, kin, q)
    response = await arm.invoke("move_to_pose", {**arguments, "path": "linear"})
    assert response.payload["outcome"] == "rejected"
    error = response.payload["error"]
    assert error["code"] == LINEAR_INFEASIBLE
    assert error["retryable"] is False
    assert reason in error["details"]["reason"]
    assert 0 < error["details"]["waypoint"] < error["details"]["waypoints"]
    assert robot.commands == []
    # The same target by the default joint path is not a line and is still planned or
    # refused by its own rules, never with the linear code.
    joint = await arm.invoke("move_to_pose", arguments)
    assert joint.payload.get("error", {}).get("code") != LINEAR_INFEASIBLE


def test_joint_is_the_default_path(planner: MoveToPosePlanner, kin: Kinematics) -> None:
    sample = at_rest(kin.home)
    default = planner.plan({"position": [0.45, 0.1, 0.1]}, sample)
    joint = planner.plan({"position": [0.45, 0.1, 0.1], "path": "joint"}, sample)
    assert type(default.trajectory) is JointTrajectory
    assert "path" not in default.details
    assert default.trajectory.goal == pytest.approx(joint.trajectory.goal)
    assert default.trajectory.duration == pytest.approx(joint.trajectory.duration)


@pytest.mark.parametrize("path", ["curved", "", 1, None, True])
def test_an_unknown_path_is_invalid(
    planner: MoveToPosePlanner, kin: Kinematics, path: object
) -> None:
    with pytest.raises(ToolEndpointError) as caught:
        planner.plan({"position": [0.45, 0.1, 0.1], "path": path}, at_rest(kin.home))
    assert caught.value.error.code == "ARM_INVALID_ARGUMENTS"


async def test_a_linear_move_follows_the_line_and_settles(
    config: ArmConfig, kin: Kinematics
) -> None:
    arm, robot = arm_on(config, kin, kin.home)
    target = [0.42, -0.12, 0.12]
    invoke = await arm.invoke("move_to_pose", {"position": target, "path": "linear"})
    assert invoke.payload["outcome"] == "accepted"
    await arm.wait_event(invoke, "executor_completed")
    result = (await arm.result(invoke))["result"]
    assert result["status"] == "succeeded"
    assert result["outputs"]["position_error"] < config.position_tolerance
    start, _ = kin.fk(kin.home)
    commanded = [np.array(c.position) for c in robot.commands]
    assert len(commanded) > 10
    end = np.array(target)
    assert max(deviation(kin, q, start, end) for q in commanded) < LINE_TOLERANCE_M
