"""A pure-physics scripted pick-and-place: the grasp holds while lifting and carrying."""

from __future__ import annotations

import pytest

from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.sim.environment import Environment
from doraforge.sim.tasks.pick_place import PickPlace, cube_in_target_and_resting, cube_lifted
from doraforge.sim.world import World
from tests.sim.scripted import pick_and_place


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_scripted_pick_and_place_lands_the_cube_in_the_target(
    seed: int, kinematics: Kinematics
) -> None:
    environment = Environment(World(), PickPlace(), seed=seed)
    environment.physics.step(100)
    report = pick_and_place(environment.physics, kinematics)

    # closed on the cube, not on air: the pads stop at the cube's width
    assert report.grasped.gripper.width == pytest.approx(0.045, abs=0.003)
    for held in (report.lifted, report.over_target):
        assert cube_lifted(held, height=0.08)
        cube = held.object("cube").position
        tool = held.gripper.tool_position
        assert abs(cube[2] - tool[2]) < 0.01, "the cube slipped in the grasp"
    assert cube_in_target_and_resting(report.final)
    assert not cube_lifted(report.final, height=0.005)
    assert environment.success() == {"cube_in_target_and_resting": True, "cube_lifted": False}
