"""Pick-and-place on every shipped robot, in process: the composed cell (``build_world``),
the arm's own ``Kinematics`` and the demo's unchanged ``plan_steps``, stepped without Dora.

Each plan step is executed the way the endpoints execute it, reduced to the physics: a
pose is solved by IK from the measured joints and reached by a smoothstep joint
interpolation; grasp and release command the profile's closed and open widths. The task
judges the end.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pytest

from doraforge.cli.demos.pick_place import plan_steps
from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.robot.profile import RobotProfile, load_profile, profile_path
from doraforge.nodes.world.layout import build_world
from doraforge.nodes.world.scene import scene_json
from doraforge.sim.environment import Environment
from doraforge.sim.tasks.pick_place import PickPlace
from doraforge.sim.world import World

MOVE_S = 1.5
SETTLE_STEPS = 150
GRIP_S = 0.8
REST_S = 1.0


class Cell:
    """A robot's composed cell with its kinematics."""

    def __init__(self, profile: RobotProfile) -> None:
        self.profile = profile
        self.kinematics = Kinematics(profile)
        self.world: World = build_world(profile)
        self.arm = len(profile.arm_joints)

    def arm_q(self) -> np.ndarray:
        return np.array(self.world.joint_state()[1][: self.arm])

    def move(self, q_to: np.ndarray) -> None:
        world, q_from = self.world, self.arm_q()
        steps = round(MOVE_S / world.timestep)
        for i in range(1, steps + 1):
            s = i / steps
            world.set_targets(
                self.kinematics.joint_names, q_from + (q_to - q_from) * s * s * (3 - 2 * s)
            )
            world.step(1)
        world.step(SETTLE_STEPS)

    def grip(self, width: float) -> None:
        gripper = self.profile.gripper
        self.world.set_targets(gripper.joints, [gripper.joint_for_width.joint_for(width)])
        self.world.step(round(GRIP_S / self.world.timestep))

    def run(self, tool_id: str, arguments: dict[str, object]) -> None:
        if tool_id == "arm.move_to_pose":
            position, yaw = arguments["position"], arguments["yaw"]
            self.move(self.kinematics.ik(position, yaw, self.arm_q()))  # type: ignore[arg-type]
        elif tool_id == "arm.home":
            self.move(self.kinematics.home)
        elif tool_id == "gripper.grasp":
            self.grip(self.profile.gripper.closed_width)
        elif tool_id == "gripper.release":
            self.grip(self.profile.gripper.open_width)
        else:
            raise AssertionError(f"the plan asked for an unknown tool {tool_id}")


@pytest.fixture(scope="module", params=["sim_arm", "openarm"])
def cell(request: pytest.FixtureRequest) -> Iterator[Cell]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield Cell(load_profile(profile_path(request.param)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_unchanged_plan_puts_the_cube_in_the_target_on_every_shipped_robot(
    cell: Cell, seed: int
) -> None:
    environment = Environment(cell.world, PickPlace(), seed=seed)
    start = environment.scene_state()
    for _, tool_id, arguments in plan_steps(scene_json(start), say=lambda _: None):
        cell.run(tool_id, arguments)
    cell.world.step(round(REST_S / cell.world.timestep))
    final = environment.scene_state()
    assert (
        np.linalg.norm(np.subtract(final.object("cube").position, start.object("cube").position))
        > 0.05
    )
    assert environment.success(final)["cube_in_target_and_resting"], final
