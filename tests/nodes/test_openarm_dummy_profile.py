"""The ``openarm_dummy`` robot profile and the ToolSpecs of ``dataflows/openarm-dummy.yml``.

The profile's IK model is OpenArm v2's MJCF from openarm-mujoco with the profile's tool
site: from the home pose the arm's own solver reaches the whole workspace box with the
tool pointing down, and the Gateway's ToolSpecs name the profile's joints and frames.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from doraforge.gateway.catalog import Catalog
from doraforge.gateway.config import GatewayConfig, load_config
from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.robot.profile import RobotProfile, load_profile

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "nodes" / "robot" / "profiles" / "openarm_dummy.yml"
CONFIG = ROOT / "dataflows" / "openarm-dummy.gateway.yml"


@pytest.fixture(scope="module")
def profile() -> RobotProfile:
    return load_profile(PROFILE)


@pytest.fixture(scope="module")
def kinematics(profile: RobotProfile) -> Kinematics:
    return Kinematics(profile)


@pytest.fixture(scope="module")
def gateway_config() -> GatewayConfig:
    config = load_config(CONFIG)
    Catalog(config.tools)
    return config


def test_at_home_the_tool_points_down_inside_the_workspace(
    profile: RobotProfile, kinematics: Kinematics
) -> None:
    position, rotation = kinematics.tool_pose(np.array(profile.home))
    assert profile.workspace.contains(position.tolist())
    assert rotation[:, 2] == pytest.approx([0.0, 0.0, -1.0], abs=1e-2)


def test_from_home_the_ik_reaches_every_corner_and_the_centre_of_the_workspace(
    profile: RobotProfile, kinematics: Kinematics
) -> None:
    low, high = np.array(profile.workspace.min), np.array(profile.workspace.max)
    targets = [np.array(c) for c in itertools.product(*zip(low, high, strict=True))]
    targets.append((low + high) / 2)
    for target in targets:
        q = kinematics.ik(target, None, q_seed=np.array(profile.home))
        assert kinematics.within_limits(q)
        position, rotation = kinematics.tool_pose(q)
        assert position == pytest.approx(target, abs=2e-3)
        assert rotation[:, 2] == pytest.approx([0.0, 0.0, -1.0], abs=2e-2)


def test_the_toolspecs_carry_the_profiles_frame_profile(
    gateway_config: GatewayConfig, profile: RobotProfile
) -> None:
    for tool in gateway_config.tools:
        frames = tool.robot_frame_profile
        assert frames is not None, tool.tool_id
        assert (frames.robot_id, frames.base_frame, frames.tool_frame) == (
            profile.robot_id,
            profile.base_frame,
            profile.tool_frame,
        )
        assert frames.directions.keys() == profile.directions.keys()


def test_the_toolspecs_name_the_profiles_joints_and_limits(
    gateway_config: GatewayConfig, profile: RobotProfile
) -> None:
    tools = {tool.tool_id: tool for tool in gateway_config.tools}
    joints = tools["arm.home"].output_schema["properties"]["joints"]
    assert joints["required"] == profile.arm_joint_names
    bounds = tools["arm.move_joints"].input_schema["properties"]["positions"]["oneOf"][0]
    for joint in profile.arm_joints:
        assert bounds["properties"][joint.name] == {
            "type": "number",
            "minimum": joint.lower,
            "maximum": joint.upper,
        }
    grasp = tools["gripper.grasp"]
    assert grasp.input_schema["properties"]["width"]["maximum"] == profile.gripper.max_width
    fingers = grasp.output_schema["properties"]["joint_positions"]["required"]
    assert fingers == profile.gripper.joints
