"""The world on any MJCF through a ``RobotLayout``: a cell composed with ``MjSpec`` from
doraforge's furniture and a robot file, a gripper driven through a tendon actuator, and
layouts that name what the model lacks."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from doraforge.sim.cell import compose_cell
from doraforge.sim.layout import ArmLayout, GripperLayout, RobotLayout
from doraforge.sim.world import World

# One hinge "arm" joint and two slide fingers whose sum is a fixed tendon; the gripper's
# only actuator drives that tendon (as packaged grippers such as the Robotiq 2F-85 do).
TENDON_ROBOT = """
<mujoco model="tendon_gripper">
  <option timestep="0.002" integrator="implicitfast"/>
  <worldbody>
    <body name="column" pos="0 0 0.3">
      <joint name="pan" axis="0 0 1" range="-1 1" damping="1"/>
      <geom type="box" size="0.02 0.02 0.02" mass="0.5" contype="0" conaffinity="0"/>
      <site name="tool" pos="0 0 -0.05"/>
      <camera name="hand_cam" pos="0 0 -0.02" quat="0 1 0 0"/>
      <body name="left">
        <joint name="finger_a" type="slide" axis="0 1 0" range="0 0.04" damping="1"/>
        <geom type="box" size="0.005 0.005 0.01" mass="0.02" contype="0" conaffinity="0"/>
      </body>
      <body name="right">
        <joint name="finger_b" type="slide" axis="0 -1 0" range="0 0.04" damping="1"/>
        <geom type="box" size="0.005 0.005 0.01" mass="0.02" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="split"><joint joint="finger_a" coef="1"/><joint joint="finger_b" coef="1"/></fixed>
  </tendon>
  <equality>
    <joint joint1="finger_b" joint2="finger_a"/>
  </equality>
  <actuator>
    <position name="pan" joint="pan" kp="50" ctrlrange="-1 1"/>
    <position name="grip" tendon="split" kp="200" ctrlrange="0 0.08"/>
  </actuator>
</mujoco>
"""

TENDON_LAYOUT = RobotLayout(
    arms=(
        ArmLayout(
            joints=("pan",),
            tool_site="tool",
            home=(0.2,),
            gripper=GripperLayout(
                name="fingers",
                model_joint="finger_a",
                mimic="finger_b",
                actuator="grip",
                # the tendon is the sum of both fingers: twice one finger's opening
                command_scale=2.0,
                width_joints=("finger_a", "finger_b"),
            ),
        ),
    ),
    cameras={"wrist": "hand_cam"},
)


@pytest.fixture
def world() -> World:
    return World.from_spec(compose_cell(mujoco.MjSpec.from_string(TENDON_ROBOT)), TENDON_LAYOUT)


def test_a_composed_cell_has_the_furniture_and_the_robot_under_the_layouts_names(
    world: World,
) -> None:
    assert world.joint_names == ("pan", "fingers")
    state = world.scene_state()
    assert state.object("cube").size == pytest.approx((0.045,) * 3)
    assert state.target_zone.center == pytest.approx((0.35, -0.22, 0.025))
    assert state.gripper.tool_position == pytest.approx((0.0, 0.0, 0.25))
    assert world.model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST


def test_reset_puts_the_arm_at_the_layouts_home_and_opens_the_gripper(world: World) -> None:
    _, positions, _, _ = world.joint_state()
    assert positions == pytest.approx([0.2, 0.04])
    assert world.targets() == pytest.approx({"pan": 0.2, "fingers": 0.04})
    assert world.gripper_width() == pytest.approx(0.08)


def test_a_tendon_gripper_is_commanded_in_joint_units_and_clamped_to_its_range(
    world: World,
) -> None:
    applied = world.set_targets(["fingers"], [0.01])
    assert applied == pytest.approx({"fingers": 0.01})
    assert world.data.ctrl[world.model.actuator("grip").id] == pytest.approx(0.02)
    world.step(1500)
    _, positions, _, _ = world.joint_state()
    assert positions[1] == pytest.approx(0.01, abs=1e-3)
    assert world.gripper_width() == pytest.approx(0.02, abs=2e-3)
    assert world.set_targets(["fingers"], [0.5]) == pytest.approx({"fingers": 0.04})
    assert world.target_limits()["fingers"] == pytest.approx((0.0, 0.04))


def test_the_target_zone_moves_where_the_cell_says(world: World) -> None:
    spec = compose_cell(mujoco.MjSpec.from_string(TENDON_ROBOT), target_xy=(0.2, -0.3))
    moved = World.from_spec(spec, TENDON_LAYOUT)
    assert moved.scene_state().target_zone.center == pytest.approx((0.2, -0.3, 0.025))


def test_the_cells_cube_region_is_what_the_task_draws_from() -> None:
    from doraforge.sim.environment import Environment
    from doraforge.sim.tasks.pick_place import PickPlace

    layout = RobotLayout(
        arms=TENDON_LAYOUT.arms, cube_region=((0.1, 0.12), (0.3, 0.32)), cube_yaw=(0.0, 0.0)
    )
    world = World.from_spec(compose_cell(mujoco.MjSpec.from_string(TENDON_ROBOT)), layout)
    for seed in (0, 1, 2):
        cube = Environment(world, PickPlace(), seed=seed).scene_state().object("cube")
        assert 0.1 <= cube.position[0] <= 0.12
        assert 0.3 <= cube.position[1] <= 0.32
        assert cube.orientation_wxyz == pytest.approx((1.0, 0.0, 0.0, 0.0))


@pytest.mark.parametrize(
    ("layout", "missing"),
    [
        (
            RobotLayout(
                arms=(
                    ArmLayout(
                        joints=("elbow",),
                        tool_site="tool",
                        home=(0.0,),
                        gripper=TENDON_LAYOUT.primary.gripper,
                    ),
                )
            ),
            "'elbow'",
        ),
        (
            RobotLayout(
                arms=(
                    ArmLayout(
                        joints=("pan",),
                        tool_site="tcp",
                        home=(0.0,),
                        gripper=TENDON_LAYOUT.primary.gripper,
                    ),
                )
            ),
            "'tcp'",
        ),
    ],
)
def test_a_layout_naming_what_the_model_lacks_is_refused_by_name(
    layout: RobotLayout, missing: str
) -> None:
    with pytest.raises(ValueError, match=missing):
        World.from_spec(compose_cell(mujoco.MjSpec.from_string(TENDON_ROBOT)), layout)


def test_layouts_refuse_repeated_names_and_a_home_of_the_wrong_length() -> None:
    arm = TENDON_LAYOUT.primary
    with pytest.raises(ValueError, match="repeat"):
        RobotLayout(arms=(arm, arm))
    with pytest.raises(ValueError, match="home holds 2 values for 1 joints"):
        ArmLayout(joints=("pan",), tool_site="tool", home=(0.0, 0.1), gripper=arm.gripper)


def test_a_camera_alias_renders_the_model_camera_behind_it(world: World) -> None:
    from doraforge.sim.render import Cameras

    with Cameras(world.model, height=24, width=32, aliases=world.layout.cameras) as cameras:
        assert "wrist" in cameras.camera_names
        frame = cameras.render(world.data, "wrist")
        direct = cameras.render(world.data, "hand_cam")
    assert frame.shape == (24, 32, 3)
    np.testing.assert_array_equal(frame, direct)


def test_the_robots_sites_are_hidden_markers_in_the_composed_cell(world: World) -> None:
    assert world.model.site_group[world.model.site("tool").id] == 4
    assert world.model.site_group[world.model.site("target_zone").id] == 4


def test_the_scene_camera_is_aimed_where_the_cell_says() -> None:
    spec = compose_cell(
        mujoco.MjSpec.from_string(TENDON_ROBOT), scene_camera=((0.9, -0.2, 0.8), (0.2, -0.2, 0.0))
    )
    world = World.from_spec(spec, TENDON_LAYOUT)
    camera = world.model.camera("scene").id
    np.testing.assert_allclose(world.data.cam_xpos[camera], (0.9, -0.2, 0.8))
    forward = -world.data.cam_xmat[camera].reshape(3, 3)[:, 2]
    expected = np.subtract((0.2, -0.2, 0.0), (0.9, -0.2, 0.8))
    np.testing.assert_allclose(forward, expected / np.linalg.norm(expected), atol=1e-6)
    assert abs(world.data.cam_xmat[camera].reshape(3, 3)[2, 0]) < 1e-9  # image x horizontal
