"""The pick-and-place task: seeded cube placement and success predicates over SceneState."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from doraforge.sim.state import GripperState, ObjectState, SceneState, Vec3, Zone
from doraforge.sim.tasks.pick_place import (
    CubeRegion,
    PickPlace,
    cube_in_target_and_resting,
    cube_lifted,
    draw_cube_pose,
)
from doraforge.sim.world import World

ZONE = Zone(center=(0.35, -0.22, 0.025), half_extents=(0.06, 0.06, 0.025))
ON_TABLE = 0.0225  # the cube's centre height when it rests on the table


def scene(position: Vec3, velocity: Vec3 = (0.0, 0.0, 0.0)) -> SceneState:
    cube = ObjectState(
        position=position,
        orientation_wxyz=(1.0, 0.0, 0.0, 0.0),
        linear_velocity=velocity,
        size=(0.045, 0.045, 0.045),
    )
    gripper = GripperState(width=0.08, joint_positions={"gripper": 0.04}, tool_position=(0, 0, 0))
    return SceneState(
        objects={"cube": cube}, target_zone=ZONE, gripper=gripper, sim_time=1.0, seed=0
    )


# (state, cube_in_target_and_resting, cube_lifted at the task's 0.05 m)
VERDICTS = [
    pytest.param(scene((0.36, -0.25, ON_TABLE)), True, False, id="resting-in-zone"),
    pytest.param(scene((0.405, -0.17, ON_TABLE)), True, False, id="near-a-zone-corner"),
    pytest.param(scene((0.35, 0.15, ON_TABLE)), False, False, id="elsewhere-on-table"),
    pytest.param(scene((0.42, -0.22, ON_TABLE)), False, False, id="past-the-x-edge"),
    pytest.param(scene((0.35, -0.22, 0.12)), False, True, id="held-above-the-zone"),
    pytest.param(scene((0.35, -0.22, ON_TABLE), (0.05, 0, 0)), False, False, id="sliding-in"),
    pytest.param(scene((0.35, -0.22, ON_TABLE), (0, 0, 0.009)), True, False, id="barely-moving"),
    pytest.param(scene((0.30, 0.10, 0.0726)), False, True, id="just-lifted"),
    pytest.param(scene((0.30, 0.10, 0.0724)), False, False, id="not-quite-lifted"),
]


@pytest.mark.parametrize(("state", "in_target", "lifted"), VERDICTS)
def test_the_task_judges_a_scene_state_alone(
    state: SceneState, in_target: bool, lifted: bool
) -> None:
    verdicts = PickPlace().success(state)
    assert verdicts == {"cube_in_target_and_resting": in_target, "cube_lifted": lifted}
    assert PickPlace().success(state) == verdicts  # pure: same state, same verdicts


def test_the_predicates_are_named_in_report_order() -> None:
    assert list(PickPlace().predicates) == ["cube_in_target_and_resting", "cube_lifted"]


def test_cube_resting_inside_the_zone_succeeds() -> None:
    assert cube_in_target_and_resting(scene((0.36, -0.25, ON_TABLE)))


@pytest.mark.parametrize(
    "position",
    [
        (0.35, 0.15, ON_TABLE),  # elsewhere on the table
        (0.42, -0.22, ON_TABLE),  # just past the zone's x edge
        (0.35, -0.22, 0.12),  # above the zone, still held
    ],
)
def test_cube_outside_the_zone_fails(position: Vec3) -> None:
    assert not cube_in_target_and_resting(scene(position))


def test_cube_moving_inside_the_zone_is_not_resting() -> None:
    state = scene((0.35, -0.22, ON_TABLE), velocity=(0.05, 0.0, 0.0))
    assert not cube_in_target_and_resting(state)
    assert cube_in_target_and_resting(state, speed_tol=0.1)
    assert PickPlace(speed_tol=0.1).success(state)["cube_in_target_and_resting"]


def test_cube_lifted_compares_the_bottom_face_with_the_height() -> None:
    assert cube_lifted(scene((0.3, 0.1, 0.1225)), height=0.08)
    assert not cube_lifted(scene((0.3, 0.1, ON_TABLE)), height=0.01)
    assert not PickPlace(lift_height=0.08).success(scene((0.3, 0.1, 0.1)))["cube_lifted"]


def test_a_scene_without_a_cube_is_refused_by_name() -> None:
    state = scene((0.3, 0.1, ON_TABLE))
    empty = SceneState(objects={}, target_zone=ZONE, gripper=state.gripper, sim_time=0.0, seed=None)
    with pytest.raises(KeyError, match="no object 'cube'"):
        PickPlace().success(empty)


def test_same_seed_draws_the_same_pose_and_stays_in_the_region() -> None:
    region = CubeRegion(x=(0.3, 0.4), y=(0.1, 0.2), yaw=(-0.5, 0.5))
    poses = [draw_cube_pose(region, np.random.default_rng(seed)) for seed in range(20)]
    assert poses[7] == draw_cube_pose(region, np.random.default_rng(7))
    assert len({(p.x, p.y) for p in poses}) == 20
    for pose in poses:
        assert 0.3 <= pose.x <= 0.4
        assert 0.1 <= pose.y <= 0.2
        assert -0.5 <= pose.yaw <= 0.5


def test_the_task_draws_the_same_scenario_for_the_same_seed() -> None:
    task = PickPlace()
    scenes = []
    for seed in (3, 3, 4):
        world = World()
        task.initialize_episode(world, np.random.default_rng(seed))
        scenes.append((world.data.qpos.copy(), world.scene_state()))
    np.testing.assert_array_equal(scenes[0][0], scenes[1][0])
    assert scenes[0][1] == scenes[1][1]
    assert scenes[2][1].object("cube").position != scenes[0][1].object("cube").position


def test_the_drawn_cube_rests_upright_on_the_table_inside_the_region() -> None:
    region = CubeRegion(x=(0.3, 0.32), y=(0.1, 0.12), yaw=(0.6, 0.6))
    world = World()
    world.step(20)
    PickPlace(region).initialize_episode(world, np.random.default_rng(0))
    cube = world.scene_state().object("cube")
    assert 0.3 <= cube.position[0] <= 0.32
    assert 0.1 <= cube.position[1] <= 0.12
    assert cube.position[2] == pytest.approx(ON_TABLE)
    w, x, y, z = cube.orientation_wxyz
    assert (x, y) == pytest.approx((0.0, 0.0))
    assert 2 * math.atan2(z, w) == pytest.approx(0.6)
    assert cube.linear_velocity == (0.0, 0.0, 0.0)


def test_pose_quaternion_is_a_yaw_about_z() -> None:
    pose = draw_cube_pose(CubeRegion(yaw=(0.6, 0.6)), np.random.default_rng(0))
    w, x, y, z = pose.quaternion_wxyz()
    assert (x, y) == (0.0, 0.0)
    assert 2 * math.atan2(z, w) == pytest.approx(0.6)


@pytest.mark.parametrize("bad", [{"x": (0.4, 0.3)}, {"yaw": (0.0, math.inf)}])
def test_region_rejects_empty_or_infinite_ranges(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="CubeRegion"):
        CubeRegion(**bad)
