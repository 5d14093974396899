"""Shipped robot models: profiles by name, the packaged OpenArm MJCF with the frames the
profile adds, one mount for the IK model and the world, and the bimanual profile's arms."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
import yaml

from doraforge.cli.demos.sim import ROBOT_PROFILES
from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.motion.cli import parse_robot_node
from doraforge.nodes.robot.model import compile_robot
from doraforge.nodes.robot.profile import (
    ProfileError,
    RobotProfile,
    load_profile,
    profile_path,
    shipped_profiles,
)
from doraforge.nodes.world.__main__ import main as world_main
from doraforge.nodes.world.layout import build_world, layout_from_profile

SOFT_LIMIT_MARGIN = 0.02  # rad: the profile's limits sit this far inside the MJCF ranges


@pytest.fixture(scope="module")
def openarm() -> RobotProfile:
    return load_profile(profile_path("openarm"))


@pytest.fixture(autouse=True)
def _quiet_attach() -> Iterator[None]:
    # MuJoCo warns that a robot attached without a prefix may not save back to one file.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Attaching a spec with an empty prefix")
        yield


def test_robots_are_chosen_by_shipped_name_or_by_path(tmp_path: Path) -> None:
    assert {"sim_arm", "openarm"} <= set(shipped_profiles())
    assert profile_path("openarm").name == "openarm.yml"
    assert profile_path(str(tmp_path / "mine.yml")) == tmp_path / "mine.yml"
    with pytest.raises(
        ProfileError, match=r"unknown robot 'ur5': choose one of .*openarm.*sim_arm"
    ):
        profile_path("ur5")


def test_openarm_joint_limits_sit_inside_the_packaged_mjcf_ranges(openarm: RobotProfile) -> None:
    model = compile_robot(openarm)
    for name in openarm.arm_names:
        arm = openarm.arm(name)
        for joint in arm.arm_joints:
            low, high = model.joint(joint.name).range
            assert joint.lower == pytest.approx(low + SOFT_LIMIT_MARGIN, abs=1e-4)
            assert joint.upper == pytest.approx(high - SOFT_LIMIT_MARGIN, abs=1e-4)
        finger = model.joint(arm.gripper.joints[0])
        low, high = finger.range
        for width in (arm.gripper.closed_width, arm.gripper.max_width):
            assert low <= arm.gripper.joint_for_width.joint_for(width) <= high


def test_the_added_tool_site_points_out_of_the_fingers_at_home(openarm: RobotProfile) -> None:
    for name in openarm.arm_names:
        kinematics = Kinematics(openarm.for_arm(name))
        position, rotation = kinematics.tool_pose(kinematics.home)
        np.testing.assert_allclose(rotation[:, 2], [0.0, 0.0, -1.0], atol=0.01)
        assert 0.1 < position[2] < 0.2  # above the table, not in it


def test_the_ik_model_and_the_world_see_the_same_mount(openarm: RobotProfile) -> None:
    world = build_world(openarm)
    kinematics = Kinematics(openarm)
    np.testing.assert_allclose(world.tool_position(), kinematics.fk(kinematics.home)[0], atol=1e-6)
    assert openarm.mount.pos[2] > 0  # the model's origin (shoulders) is above the table top


def test_the_bimanual_profile_serves_each_arm_as_a_single_arm_profile(
    openarm: RobotProfile,
) -> None:
    assert openarm.arm_names == ["right", "left"]
    left = openarm.for_arm("left")
    assert left.arm_joint_names[0] == "openarm_left_joint1"
    assert left.joint_names == [*left.arm_joint_names, "openarm_left_finger_joint1"]
    assert left.arms == {}
    assert openarm.for_arm(None) is openarm
    with pytest.raises(ProfileError, match="no arm 'middle'; arms: \\['right', 'left'\\]"):
        openarm.for_arm("middle")


def test_the_world_publishes_every_arm_and_maps_the_wrist_camera(openarm: RobotProfile) -> None:
    layout = layout_from_profile(openarm)
    assert list(layout.joint_names) == openarm.data_plane_joint_names
    assert len(layout.joint_names) == 16
    assert layout.camera("wrist") == "camera_wrist_right"
    world = build_world(openarm)
    assert world.gripper_width() == pytest.approx(openarm.gripper.open_width)


def test_a_single_arm_profile_composes_the_same_cell_as_the_default(openarm: RobotProfile) -> None:
    from doraforge.sim.world import World

    sim_arm = load_profile(profile_path("sim_arm"))
    composed, default = build_world(sim_arm), World()
    assert composed.joint_names == default.joint_names
    np.testing.assert_allclose(composed.tool_position(), default.tool_position(), atol=1e-9)
    assert composed.model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST


def test_the_arm_nodes_take_a_robot_name_and_an_arm() -> None:
    _, profile = parse_robot_node("arm", ["--profile", "openarm", "--arm", "left"], {})
    assert profile.tool_site == "left_tool_center"
    with pytest.raises(SystemExit):
        parse_robot_node("arm", ["--profile", "openarm", "--arm", "middle"], {})


def test_the_world_node_refuses_an_unknown_robot_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        world_main(["--profile", "ur5"])
    assert exited.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "ROBOT_PROFILE_INVALID: unknown robot 'ur5'" in message
    assert "openarm" in message


def test_a_second_arm_registers_its_own_endpoints_in_its_own_tool_frame(
    openarm: RobotProfile,
) -> None:
    from doraforge.nodes.arm import config as arm_config
    from doraforge.nodes.arm.endpoint import definition as arm_definition
    from doraforge.nodes.gripper import config as gripper_config
    from doraforge.nodes.gripper.endpoint import definition as gripper_definition

    left = openarm.for_arm("left")
    assert (left.endpoint_id("arm"), left.endpoint_id("gripper")) == ("arm_left", "gripper_left")
    assert openarm.endpoint_id("arm") == "arm"
    assert left.directions["approach"].frame == "left_tool_center"
    assert left.directions["up"].frame == "table"
    arm = arm_definition(
        arm_config.from_profile(left), Kinematics(left), endpoint_id=left.endpoint_id("arm")
    )
    gripper = gripper_definition(
        gripper_config.from_profile(left), endpoint_id=left.endpoint_id("gripper")
    )
    assert arm.descriptor.endpoint_id == "arm_left"
    assert gripper.descriptor.endpoint_id == "gripper_left"
    assert {op.name for op in arm.descriptor.operations} >= {"move_to_pose", "arm_state"}


def test_the_world_takes_the_further_arms_commands_on_their_own_inputs(
    openarm: RobotProfile,
) -> None:
    from doraforge.nodes.world.dataplane import COMMAND_INPUTS, WorldDataPlane, arm_command_inputs

    extra = arm_command_inputs(openarm.arms)
    assert extra == {"arm_left_command", "gripper_left_command"}
    plane = WorldDataPlane(simulation=None, extra_inputs=extra)  # type: ignore[arg-type]
    assert plane.inputs == COMMAND_INPUTS | extra


def test_every_demo_robot_has_a_skill_profile_that_starts_its_cell() -> None:
    root = Path(__file__).resolve().parents[2] / "skills" / "pick-place"
    for robot, profile in ROBOT_PROFILES.items():
        dataflow = (root / "profiles" / profile / "dataflow.yml").read_text(encoding="utf-8")
        assert ("--profile openarm" in dataflow) == (robot == "openarm"), robot


def openarm_document() -> dict[str, Any]:
    document = yaml.safe_load(profile_path("openarm").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            lambda d: d["arms"].update(right=copy.deepcopy(d["arms"]["left"])),
            "must not repeat the primary arm",
        ),
        (
            lambda d: d["arms"]["left"]["arm_joints"][0].update(name="openarm_right_joint1"),
            "joint names must be unique across arms",
        ),
        (lambda d: d["cell"]["cube_region"].update(x=[0.3, 0.2]), "cell.cube_region"),
        (lambda d: d["mount"].update(pos=[0.0, 0.0]), "mount.pos"),
        (lambda d: d["arms"]["left"].update(home=[0.0]), "arms.left"),
    ],
)
def test_an_invalid_multi_arm_profile_names_the_field(
    tmp_path: Path, edit: Callable[[dict[str, Any]], object], words: str
) -> None:
    document = openarm_document()
    edit(document)
    path = tmp_path / "robot.yml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    with pytest.raises(ProfileError, match=words):
        load_profile(path)
