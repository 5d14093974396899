"""Scenario: seeded cube placement and the success predicates over scene_state dicts."""

from __future__ import annotations

import math
from typing import Any

import pytest

from doraforge.sim.scenario import (
    CubeRegion,
    cube_in_target_and_resting,
    cube_lifted,
    draw_cube_pose,
)


def scene(position: list[float], velocity: list[float] | None = None) -> dict[str, Any]:
    return {
        "objects": {
            "cube": {
                "position": position,
                "orientation_wxyz": [1.0, 0.0, 0.0, 0.0],
                "linear_velocity": velocity or [0.0, 0.0, 0.0],
                "size": [0.045, 0.045, 0.045],
            }
        },
        "target_zone": {"center": [0.35, -0.22, 0.025], "half_extents": [0.06, 0.06, 0.025]},
        "gripper": {"width": 0.08, "joint_positions": {"gripper": 0.04}, "tool_position": []},
        "sim_time": 1.0,
        "seed": 0,
    }


def test_cube_resting_inside_the_zone_succeeds() -> None:
    assert cube_in_target_and_resting(scene([0.36, -0.25, 0.0225]))


@pytest.mark.parametrize(
    "position",
    [
        [0.35, 0.15, 0.0225],  # elsewhere on the table
        [0.42, -0.22, 0.0225],  # just past the zone's x edge
        [0.35, -0.22, 0.12],  # above the zone, still held
    ],
)
def test_cube_outside_the_zone_fails(position: list[float]) -> None:
    assert not cube_in_target_and_resting(scene(position))


def test_cube_moving_inside_the_zone_is_not_resting() -> None:
    state = scene([0.35, -0.22, 0.0225], velocity=[0.05, 0.0, 0.0])
    assert not cube_in_target_and_resting(state)
    assert cube_in_target_and_resting(state, speed_tol=0.1)


def test_cube_lifted_compares_the_bottom_face_with_the_height() -> None:
    assert cube_lifted(scene([0.3, 0.1, 0.1225]), height=0.08)
    assert not cube_lifted(scene([0.3, 0.1, 0.0225]), height=0.01)


def test_same_seed_draws_the_same_pose_and_stays_in_the_region() -> None:
    region = CubeRegion(x=(0.3, 0.4), y=(0.1, 0.2), yaw=(-0.5, 0.5))
    poses = [draw_cube_pose(region, seed) for seed in range(20)]
    assert poses[7] == draw_cube_pose(region, 7)
    assert len({(p.x, p.y) for p in poses}) == 20
    for pose in poses:
        assert 0.3 <= pose.x <= 0.4
        assert 0.1 <= pose.y <= 0.2
        assert -0.5 <= pose.yaw <= 0.5


def test_pose_quaternion_is_a_yaw_about_z() -> None:
    pose = draw_cube_pose(CubeRegion(yaw=(0.6, 0.6)), 0)
    w, x, y, z = pose.quaternion_wxyz()
    assert (x, y) == (0.0, 0.0)
    assert 2 * math.atan2(z, w) == pytest.approx(0.6)


@pytest.mark.parametrize("bad", [{"x": (0.4, 0.3)}, {"yaw": (0.0, math.inf)}])
def test_region_rejects_empty_or_infinite_ranges(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="CubeRegion"):
        CubeRegion(**bad)
