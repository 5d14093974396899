"""OpenArm's third-party Dora node ``dora-openarm-dummy`` driven unchanged, under a real
``dora run dataflows/openarm-dummy.yml``.

The dummy (PyPI 1.0, its console script as the node's ``path``) speaks unnamed float32[8];
the OpenArm bridge (``nodes/bridges/openarm.py``) stands between it and doraforge's arm
and gripper nodes, which run with the ``openarm_dummy`` robot profile (its IK on OpenArm
v2's MJCF from openarm-mujoco). Every move goes through the Gateway's tools and is checked
against the state the dummy itself reports back through the bridge. The last row freezes
the dummy (SIGSTOP): no position arrives, the tools refuse with the no-state codes, and the
same tools work again once it answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psutil
import pytest

from doraforge.dataflows import DATAFLOWS
from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.robot.profile import RobotProfile, load_profile
from tests.e2e.conftest import MockStack, dataflow_stack
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

DATAFLOW = DATAFLOWS / "openarm-dummy.yml"
PROFILE = DATAFLOWS.parent / "nodes" / "robot" / "profiles" / "openarm_dummy.yml"
DUMMY_MARK = "dora-openarm-dummy"
READY_TOOLS = ("arm.move_to_pose", "arm.home", "arm.state", "gripper.grasp", "gripper.release")
ENV = {"DORAFORGE_LOG_LEVEL": "WARNING"}
TOLERANCE_RAD = 0.01
TOLERANCE_M = 0.005
GRIPPER_TOLERANCE_M = 0.002
TARGET = [0.28, -0.12, -0.3]


@pytest.fixture(scope="module")
def profile() -> RobotProfile:
    return load_profile(PROFILE)


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    """The OpenArm dummy dataflow, ready when its arm and gripper tools are."""
    with dataflow_stack(
        tmp_path_factory.mktemp("openarm-dummy-dataflow"),
        DATAFLOW,
        READY_TOOLS,
        ENV,
        start_timeout_s=120.0,
    ) as running:
        yield running


def run_action(cell: MockStack, tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    admitted = cell.start(tool_id, arguments)
    return cell.terminal(admitted["invocation_id"], timeout_s=60.0)


def observed_state(cell: MockStack) -> dict[str, float]:
    """The bridge's newest ``joint_state`` (the dummy's own position), as the Gateway saw it."""
    state = cell.data(cell.http.get("/observations/state"))["joint_state"]
    return dict(zip(state["name"], state["position"], strict=True))


def query(cell: MockStack, operation: str) -> dict[str, Any]:
    """A state Query (``arm/arm_state``, ``gripper/gripper_state``): its outputs."""
    data = cell.data(cell.http.post(f"/tools/{operation}:invoke", json={"arguments": {}}))
    result = data["response"]["result"]
    assert result["status"] == "succeeded", result
    outputs: dict[str, Any] = result["outputs"]
    return outputs


def the_dummy(cell: MockStack) -> psutil.Process:
    return cell.node(DUMMY_MARK)


def test_the_dummys_position_arrives_as_a_joint_state_named_by_the_profile(
    cell: MockStack, profile: RobotProfile
) -> None:
    state = cell.data(cell.http.get("/observations/state"))["joint_state"]
    assert state["name"] == profile.joint_names
    assert len(state["position"]) == len(state["velocity"]) == len(profile.joint_names)
    assert all(np.isfinite(state["position"]))


def test_home_moves_the_dummy_to_the_profiles_home_pose(
    cell: MockStack, profile: RobotProfile
) -> None:
    finished = run_action(cell, "arm.home", {})
    assert finished["phase"] == "completed", finished
    after = observed_state(cell)
    for joint, expected in zip(profile.arm_joint_names, profile.home, strict=True):
        assert after[joint] == pytest.approx(expected, abs=TOLERANCE_RAD), joint
        assert finished["result"]["outputs"]["joints"][joint] == pytest.approx(
            after[joint], abs=TOLERANCE_RAD
        )


def test_move_to_pose_puts_the_tool_at_the_target_by_the_dummys_own_joints(
    cell: MockStack, profile: RobotProfile
) -> None:
    gripper_before = observed_state(cell)["openarm_right_gripper"]
    finished = run_action(cell, "arm.move_to_pose", {"position": TARGET})
    assert finished["phase"] == "completed", finished
    outputs = finished["result"]["outputs"]
    assert outputs["position_error"] < TOLERANCE_M
    after = observed_state(cell)
    # The tool pose from the joints the dummy reports, on the profile's own model.
    reached, _ = Kinematics(profile).fk([after[joint] for joint in profile.arm_joint_names])
    assert reached.tolist() == pytest.approx(TARGET, abs=TOLERANCE_M)
    assert query(cell, "arm/arm_state")["position"] == pytest.approx(TARGET, abs=TOLERANCE_M)
    # The arm's sparse commands left the gripper slot where it was.
    assert after["openarm_right_gripper"] == pytest.approx(gripper_before, abs=1e-6)


def test_a_linear_move_ends_at_its_target_too(cell: MockStack) -> None:
    target = [0.22, -0.2, -0.34]
    finished = run_action(cell, "arm.move_to_pose", {"position": target, "path": "linear"})
    assert finished["phase"] == "completed", finished
    assert query(cell, "arm/arm_state")["position"] == pytest.approx(target, abs=TOLERANCE_M)


@pytest.mark.parametrize(
    ("tool_id", "arguments", "width"),
    [
        ("gripper.grasp", {"width": 0.04}, 0.04),
        ("gripper.release", {}, 0.1),
        ("gripper.grasp", {}, 0.0),
    ],
)
def test_the_gripper_tools_set_the_dummys_finger_angle(
    cell: MockStack, tool_id: str, arguments: dict[str, Any], width: float
) -> None:
    arm_before = {k: v for k, v in observed_state(cell).items() if k != "openarm_right_gripper"}
    finished = run_action(cell, tool_id, arguments)
    assert finished["phase"] == "completed", finished
    assert finished["result"]["outputs"]["width"] == pytest.approx(width, abs=GRIPPER_TOLERANCE_M)
    after = observed_state(cell)
    # doraforge's gripper joint is one finger's opening; the bridge converted the angle back.
    assert after["openarm_right_gripper"] == pytest.approx(width / 2, abs=GRIPPER_TOLERANCE_M)
    measured = query(cell, "gripper/gripper_state")["width"]
    assert measured == pytest.approx(width, abs=GRIPPER_TOLERANCE_M)
    for joint, value in arm_before.items():
        assert after[joint] == pytest.approx(value, abs=1e-6), joint


def refusal(cell: MockStack, tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The structured 4xx error of an invoke the provider refused before any motion."""
    response = cell.invoke(tool_id, arguments)
    assert 400 <= response.status_code < 500, response.text
    body = response.json()
    assert body["ok"] is False, body
    error: dict[str, Any] = body["error"]
    return error


def test_a_silent_dummy_makes_the_tools_refuse_with_a_no_state_code_then_recover(
    cell: MockStack,
) -> None:
    dummy = the_dummy(cell)
    dummy.suspend()  # it stops answering request_position; nothing else changes
    try:
        # The arm's state ages past its 1 s state timeout: no motion may start on it.
        eventually(
            lambda: query(cell, "arm/arm_state")["stale_ms"] > 1000,
            within=20.0,
            what="the arm's joint state to go stale",
        )
        arm = refusal(cell, "arm.move_to_pose", {"position": TARGET})
        assert arm["details"]["provider_code"] == "ARM_NO_STATE", arm
        assert arm["retryable"] is True
        gripper = refusal(cell, "gripper.grasp", {})
        assert gripper["details"]["provider_code"] == "GRIPPER_NO_STATE", gripper
        eventually(
            lambda: "OPENARM_STATE_STALE" in cell.log_path.read_text(errors="replace"),
            within=10.0,
            what="the bridge to report the stale state",
        )
    finally:
        dummy.resume()
    eventually(
        lambda: query(cell, "arm/arm_state")["stale_ms"] < 500,
        within=20.0,
        what="fresh joint state after the dummy resumed",
    )
    finished = run_action(cell, "arm.home", {})
    assert finished["phase"] == "completed", finished


def test_a_dummy_silenced_mid_motion_leaves_the_outcome_unknown_and_frees_the_arm(
    cell: MockStack,
) -> None:
    assert run_action(cell, "arm.home", {})["phase"] == "completed"
    # Slow enough that the motion is still running when the state stops.
    admitted = cell.start("arm.move_to_pose", {"position": TARGET, "speed": 0.01})
    eventually(
        lambda: (
            cell.data(cell.http.get(f"/invocations/{admitted['invocation_id']}"))["phase"]
            == "running"
        ),
        within=20.0,
        what="the motion to run",
    )
    dummy = the_dummy(cell)
    dummy.suspend()
    try:
        ended = cell.terminal(admitted["invocation_id"], timeout_s=30.0)
    finally:
        dummy.resume()
    # Nobody knows where the arm stopped: never `failed`, and not to be retried blindly.
    assert ended["phase"] == "unknown", ended
    error = ended["result"]["error"]
    assert error["code"] == "ARM_STATE_LOST", error
    assert error["retryable"] is False
    eventually(
        lambda: query(cell, "arm/arm_state")["stale_ms"] < 500,
        within=20.0,
        what="fresh joint state after the dummy resumed",
    )
    # The provider ended the attempt, so the Gateway freed the operation's slot: the same
    # tool moves the arm again (it is not held as if the attempt might still be running).
    again = run_action(cell, "arm.move_to_pose", {"position": TARGET})
    assert again["phase"] == "completed", again
