"""OpenArm's MuJoCo Dora node ``dora-openarm-mujoco`` 0.5.1 behind the same bridge and tools,
under a real ``dora run``.

The node needs ``opencv-python``, which conflicts with doraforge's headless OpenCV, so it
runs from its own environment under ``.peers/`` (:mod:`tests.peers.openarm_mujoco`), its
console script as the node's ``path``. The dataflow is ``dataflows/openarm-dummy.yml`` with
that one node swapped, as the dataflow's header describes: the bridge's ``move_position``
feeds the node's ``move_position_right``, and its ``position_right`` (``struct{qpos}`` with
``observation_timestamp``) feeds the bridge. The node simulates OpenArm v2 in its bundled
cell scene (direct joint writes, no physics stepping: its default); the moves are checked
against the joint positions it samples from MuJoCo.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from doraforge.dataflows import DATAFLOWS
from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.robot.profile import RobotProfile, load_profile
from tests.e2e.conftest import MockStack, dataflow_stack
from tests.peers import openarm_mujoco

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROFILE = DATAFLOWS.parent / "nodes" / "robot" / "profiles" / "openarm_dummy.yml"
GATEWAY_CONFIG = DATAFLOWS / "openarm-dummy.gateway.yml"
READY_TOOLS = ("arm.move_to_pose", "arm.home", "gripper.grasp")
ENV = {"DORAFORGE_LOG_LEVEL": "WARNING"}
TOLERANCE_RAD = 0.01
TOLERANCE_M = 0.005
TARGET = [0.28, -0.12, -0.3]


def mujoco_dataflow(directory: Path) -> Path:
    """``openarm-dummy.yml`` with ``dora-openarm-mujoco`` as the robot node, written to
    ``directory`` (the Gateway config by absolute path; the robot profile is a shipped name)."""
    document = yaml.safe_load((DATAFLOWS / "openarm-dummy.yml").read_text(encoding="utf-8"))
    nodes = {node["id"]: node for node in document["nodes"]}
    nodes["openarm"] = {
        "id": "openarm",
        "path": str(openarm_mujoco.command()),
        "inputs": {
            "request_position": {"source": "bridge/request_position", "queue_size": 2},
            "move_position_right": {"source": "bridge/move_position", "queue_size": 256},
        },
        "outputs": ["status", "position_right", "position_left"],
    }
    nodes["bridge"]["inputs"]["position"] = {"source": "openarm/position_right", "queue_size": 10}
    nodes["gateway"]["args"] = f"-m doraforge.gateway --config {GATEWAY_CONFIG}"
    for node_id in ("bridge", "arm", "gripper"):
        assert "--profile openarm_dummy" in nodes[node_id]["args"]  # a name: any folder works
    document["nodes"] = list(nodes.values())
    path = directory / "openarm-mujoco.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def profile() -> RobotProfile:
    return load_profile(PROFILE)


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    directory = tmp_path_factory.mktemp("openarm-mujoco-dataflow")
    with dataflow_stack(
        directory, mujoco_dataflow(directory), READY_TOOLS, ENV, start_timeout_s=180.0
    ) as running:
        yield running


def run_action(cell: MockStack, tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    admitted = cell.start(tool_id, arguments)
    return cell.terminal(admitted["invocation_id"], timeout_s=60.0)


def simulated_joints(cell: MockStack) -> dict[str, float]:
    """The joints the MuJoCo node sampled last, through the bridge, as the Gateway saw them."""
    state = cell.data(cell.http.get("/observations/state"))["joint_state"]
    return dict(zip(state["name"], state["position"], strict=True))


def test_home_and_move_to_pose_move_the_simulated_openarm(
    cell: MockStack, profile: RobotProfile
) -> None:
    home = run_action(cell, "arm.home", {})
    assert home["phase"] == "completed", home
    joints = simulated_joints(cell)
    for joint, expected in zip(profile.arm_joint_names, profile.home, strict=True):
        assert joints[joint] == pytest.approx(expected, abs=TOLERANCE_RAD), joint
    moved = run_action(cell, "arm.move_to_pose", {"position": TARGET})
    assert moved["phase"] == "completed", moved
    joints = simulated_joints(cell)
    reached, _ = Kinematics(profile).fk([joints[joint] for joint in profile.arm_joint_names])
    assert reached.tolist() == pytest.approx(TARGET, abs=TOLERANCE_M)


def test_grasp_sets_the_simulated_finger_to_the_width(cell: MockStack) -> None:
    grasp = run_action(cell, "gripper.grasp", {"width": 0.06})
    assert grasp["phase"] == "completed", grasp
    assert grasp["result"]["outputs"]["width"] == pytest.approx(0.06, abs=0.002)
    assert simulated_joints(cell)["openarm_right_gripper"] == pytest.approx(0.03, abs=0.001)
