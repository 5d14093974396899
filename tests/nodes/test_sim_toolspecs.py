"""The sim ToolSpecs load, bind to the providers' operations, and accept what they return."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from doraforge.gateway.catalog import Catalog
from doraforge.gateway.config import GatewayConfig, load_config
from doraforge.nodes.arm import config as arm_config
from doraforge.nodes.arm.endpoint import DESCRIPTOR as ARM
from doraforge.nodes.arm.endpoint import definition as arm_definition
from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.camera.endpoint import DESCRIPTOR as CAMERA
from doraforge.nodes.gripper import config as gripper_config
from doraforge.nodes.gripper.endpoint import DESCRIPTOR as GRIPPER
from doraforge.nodes.gripper.endpoint import definition as gripper_definition
from doraforge.nodes.motion.cli import DEFAULT_PROFILE
from doraforge.nodes.robot.profile import RobotProfile, load_profile
from tests.nodes.provider_harness import HandlerHarness
from tests.nodes.robot_fakes import FakeRobot, TickTiming

pytestmark = pytest.mark.anyio

CONFIG = Path(__file__).resolve().parents[2] / "dataflows" / "sim.gateway.yml"


@pytest.fixture(scope="module")
def gateway_config() -> GatewayConfig:
    config = load_config(CONFIG)
    Catalog(config.tools)
    return config


@pytest.fixture(scope="module")
def profile() -> RobotProfile:
    return load_profile(DEFAULT_PROFILE)


def output_schema(config: GatewayConfig, tool_id: str) -> dict[str, Any]:
    return next(tool.output_schema for tool in config.tools if tool.tool_id == tool_id)


def test_every_provider_operation_has_a_tool(gateway_config: GatewayConfig) -> None:
    bound = {(tool.endpoint_id, tool.operation) for tool in gateway_config.tools}
    for descriptor in (ARM, GRIPPER, CAMERA):
        for operation in descriptor.operations:
            assert (descriptor.endpoint_id, operation.name) in bound


def test_frame_profile_matches_the_robot_profile(
    gateway_config: GatewayConfig, profile: RobotProfile
) -> None:
    for tool in gateway_config.tools:
        frames = tool.robot_frame_profile
        assert frames is not None
        assert (frames.robot_id, frames.base_frame, frames.tool_frame) == (
            profile.robot_id,
            profile.base_frame,
            profile.tool_frame,
        )
        assert frames.directions.keys() == profile.directions.keys()


async def test_real_kinematics_outputs_satisfy_the_output_schemas(
    gateway_config: GatewayConfig, profile: RobotProfile
) -> None:
    timing = TickTiming()
    robot = FakeRobot(profile.joint_names, [*profile.home, 0.04])
    timing.robots.append(robot)
    arm = HandlerHarness(
        arm_definition(
            arm_config.from_profile(profile),
            Kinematics(profile),
            timing=timing,
            endpoint_instance_id="ep-a",
        )
    )
    gripper = HandlerHarness(
        gripper_definition(
            gripper_config.from_profile(profile), timing=timing, endpoint_instance_id="ep-g"
        )
    )
    for harness in (arm, gripper):
        robot.connect(harness.definition.data_plane)  # type: ignore[arg-type]
    robot.report()
    checks = [
        (arm, "move_to_pose", {"position": [0.4, 0.1, 0.15], "yaw": 0.3}, "arm.move_to_pose"),
        (arm, "home", {}, "arm.home"),
        (gripper, "grasp", {}, "gripper.grasp"),
    ]
    for harness, operation, arguments, tool_id in checks:
        invoke = await harness.invoke(operation, arguments)
        assert invoke.payload["outcome"] == "accepted", invoke.payload
        await harness.wait_event(invoke, "executor_completed")
        outputs = (await harness.result(invoke))["result"]["outputs"]
        jsonschema.validate(outputs, output_schema(gateway_config, tool_id))
    for harness, operation, tool_id in (
        (arm, "arm_state", "arm.state"),
        (gripper, "gripper_state", "gripper.state"),
    ):
        outputs = (await harness.invoke(operation, {})).payload["result"]["outputs"]
        jsonschema.validate(outputs, output_schema(gateway_config, tool_id))
