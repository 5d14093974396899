"""A forge-robot driver node in place of the simulated world, under a real ``dora run``.

``examples/forge_robot.yml`` wires the robot-arm skill's fake-backend driver
(``skills/robot-arm/profiles/forge-robot-fake/fake_driver.py``, a
``forge_robot.BaseRobotDriver`` run by ``run_dora_robot_node``) to the Gateway, arm and
gripper nodes by YAML alone, from the checkout; the arm is moved through the Gateway's
``arm.move_joints`` Action and the driver's own reported state is checked. The installed
skill itself is tested in ``test_robot_arm_skill.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import MockStack, dataflow_stack

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
READY_TOOLS = ("arm.move_joints", "arm.state", "gripper.grasp")
ENV = {"DORAFORGE_LOG_LEVEL": "WARNING"}
ARM_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow", "forearm_roll", "wrist_pitch", "wrist_roll")
TOLERANCE_RAD = 0.01


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    """The forge-robot dataflow with the example fake driver as its robot node."""
    with dataflow_stack(
        tmp_path_factory.mktemp("forge-robot-dataflow"),
        EXAMPLES / "forge_robot.yml",
        READY_TOOLS,
        ENV,
        start_timeout_s=90.0,
    ) as running:
        yield running


def run_action(cell: MockStack, tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    admitted = cell.start(tool_id, arguments)
    return cell.terminal(admitted["invocation_id"], timeout_s=60.0)


def driver_state(cell: MockStack) -> dict[str, float]:
    """The driver's newest published ``state``, as the Gateway observed it, by joint."""
    state = cell.data(cell.http.get("/observations/state"))["joint_state"]
    return dict(zip(state["name"], state["position"], strict=True))


def test_move_joints_through_the_gateway_moves_the_driver_to_the_target(cell: MockStack) -> None:
    target = {"shoulder_pan": 0.5, "elbow": 1.4, "wrist_roll": -0.3}
    before = driver_state(cell)
    finished = run_action(cell, "arm.move_joints", {"positions": target, "speed": 1.5})
    assert finished["phase"] == "completed", finished
    outputs = finished["result"]["outputs"]
    after = driver_state(cell)
    for joint in ARM_JOINTS:
        expected = target.get(joint, before[joint])
        assert after[joint] == pytest.approx(expected, abs=TOLERANCE_RAD), joint
        assert outputs["joints"][joint] == pytest.approx(expected, abs=TOLERANCE_RAD), joint


def test_the_gripper_tools_drive_the_driver_gripper_joint(cell: MockStack) -> None:
    grasp = run_action(cell, "gripper.grasp", {"width": 0.02})
    assert grasp["phase"] == "completed", grasp
    assert driver_state(cell)["gripper"] == pytest.approx(0.01, abs=0.002)
    release = run_action(cell, "gripper.release", {})
    assert release["phase"] == "completed", release
    assert driver_state(cell)["gripper"] == pytest.approx(0.04, abs=0.002)
