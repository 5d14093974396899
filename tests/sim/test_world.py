"""World, the physics alone: joint names, targets, the typed scene state, a reset that draws
nothing, placing free bodies and divergence detection."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from doraforge.sim.errors import SimError
from doraforge.sim.state import SceneState
from doraforge.sim.world import JOINT_NAMES, PhysicsDiverged, World

# Where cell.xml puts the cube: the physics' reset leaves it there (no task draws it).
SCENE_FILE_CUBE = (0.35, 0.15, 0.0225)


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # MuJoCo appends its warnings to MUJOCO_LOG.TXT in the working directory.
    monkeypatch.chdir(tmp_path)


def test_joint_names_are_the_arm_joints_then_the_gripper(world: World) -> None:
    assert world.joint_names == (
        "shoulder_pan",
        "shoulder_lift",
        "elbow",
        "forearm_roll",
        "wrist_pitch",
        "wrist_roll",
        "gripper",
    )
    names, positions, velocities, efforts = world.joint_state()
    assert names == list(JOINT_NAMES)
    assert len(positions) == len(velocities) == len(efforts) == 7


def test_scene_state_is_typed_and_reports_the_cell(world: World) -> None:
    state = world.scene_state()
    assert isinstance(state, SceneState)
    assert set(state.objects) == {"cube"}
    cube = state.object("cube")
    assert cube.size == pytest.approx((0.045,) * 3)
    assert cube.position == pytest.approx(SCENE_FILE_CUBE)
    assert state.target_zone.center == pytest.approx((0.35, -0.22, 0.025))
    assert state.target_zone.half_extents == pytest.approx((0.06, 0.06, 0.025))
    assert state.gripper.width == pytest.approx(0.08)
    assert set(state.gripper.joint_positions) == {"gripper"}
    assert state.seed is None  # the physics knows no episode
    assert state.sim_time == 0.0


def test_the_physics_resets_without_a_task_to_one_state(world: World) -> None:
    initial = (world.data.qpos.copy(), world.data.qvel.copy(), world.data.ctrl.copy())
    world.set_targets(["elbow"], [1.0])
    world.set_free_body_pose("cube", (0.3, 0.1, 0.2), (1.0, 0.0, 0.0, 0.0))
    world.step(300)
    world.reset()
    np.testing.assert_array_equal(world.data.qpos, initial[0])
    np.testing.assert_array_equal(world.data.qvel, initial[1])
    np.testing.assert_array_equal(world.data.ctrl, initial[2])
    assert world.sim_time == 0.0
    assert world.scene_state() == World().scene_state()


def test_a_free_body_is_placed_at_rest_in_the_base_frame(world: World) -> None:
    world.step(50)
    yaw = 0.4
    world.set_free_body_pose(
        "cube", (0.3, 0.1, 0.0225), (math.cos(yaw / 2), 0, 0, math.sin(yaw / 2))
    )
    cube = world.scene_state().object("cube")
    assert cube.position == pytest.approx((0.3, 0.1, 0.0225))
    w, _, _, z = cube.orientation_wxyz
    assert 2 * math.atan2(z, w) == pytest.approx(yaw)
    assert cube.linear_velocity == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(("body", "message"), [("anvil", "unknown body"), ("hand", "no free")])
def test_only_existing_free_bodies_can_be_placed(world: World, body: str, message: str) -> None:
    before = world.data.qpos.copy()
    with pytest.raises(ValueError, match=message):
        world.set_free_body_pose(body, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
    np.testing.assert_array_equal(world.data.qpos, before)


def test_targets_drive_the_named_joints_only(world: World) -> None:
    before = world.targets()
    world.set_targets(["elbow", "gripper"], [1.5, 0.01])
    world.step(750)
    names, positions, _, _ = world.joint_state()
    state = dict(zip(names, positions, strict=True))
    assert state["elbow"] == pytest.approx(1.5, abs=0.01)
    assert world.gripper_width() == pytest.approx(0.02, abs=1e-3)
    assert world.targets()["shoulder_pan"] == before["shoulder_pan"]


@pytest.mark.parametrize(
    ("names", "positions", "message"),
    [
        (["elbow", "knee"], [0.0, 0.0], "unknown joint 'knee'"),
        (["elbow"], [math.nan], "not finite"),
        (["elbow"], [math.inf], "not finite"),
        (["elbow", "gripper"], [0.0], "2 names but 1 positions"),
    ],
)
def test_bad_targets_are_rejected_and_nothing_is_applied(
    world: World, names: list[str], positions: list[float], message: str
) -> None:
    before = world.targets()
    with pytest.raises(ValueError, match=message):
        world.set_targets(names, positions)
    assert world.targets() == before


def test_shadows_are_a_scene_option() -> None:
    assert not World().model.light_castshadow.any()
    assert World(shadows=True).model.light_castshadow.all()


@pytest.mark.usefixtures("in_tmp")
@pytest.mark.parametrize(
    "blow_up",
    [
        pytest.param(lambda w: w.data.qfrc_applied.__setitem__(0, 1e30), id="huge-force"),
        pytest.param(lambda w: w.data.xfrc_applied.__setitem__((-1, 0), math.nan), id="nan-force"),
        pytest.param(lambda w: w.data.qvel.__setitem__(-1, 500.0), id="absurd-speed"),
    ],
)
def test_divergence_stops_the_world_until_reset(
    world: World, blow_up: Callable[[World], object]
) -> None:
    blow_up(world)
    with pytest.raises(PhysicsDiverged) as raised:
        world.step(10)
    assert raised.value.code == "SIM_PHYSICS_DIVERGED"
    assert isinstance(raised.value, SimError)
    assert world.diverged
    with pytest.raises(PhysicsDiverged):
        world.step()
    world.reset()
    assert not world.diverged
    world.step(100)
    assert np.isfinite(world.data.qpos).all()


def test_targets_beyond_the_limits_are_clamped_and_reported(world: World) -> None:
    applied = world.set_targets(["elbow", "gripper"], [9.0, -1.0])
    assert applied == {"elbow": pytest.approx(2.6), "gripper": 0.0}
    assert world.targets()["elbow"] == pytest.approx(2.6)
