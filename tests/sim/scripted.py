"""A scripted pick-and-place over the public World and Kinematics APIs, unpaced.

It reads only what the physics reports (the typed ``SceneState``); the episode's task judges
the outcome.

Joint targets are interpolated with a smoothstep profile, as the arm endpoint does over Dora,
so the servos see a smooth reference rather than a step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.sim.state import Quaternion, SceneState
from doraforge.sim.world import GRIPPER_JOINT, World

HOVER = 0.12  # m above the grasp point before descending
CARRY = 0.15  # m above the table while carrying


@dataclass
class PickReport:
    """Scene snapshots taken at each phase of the script."""

    grasped: SceneState
    lifted: SceneState
    over_target: SceneState
    final: SceneState


def arm_positions(world: World) -> np.ndarray:
    _, positions, _, _ = world.joint_state()
    return np.array(positions[:6])


def move_joints(
    world: World, kin: Kinematics, q_to: np.ndarray, seconds: float, settle: float = 0.3
) -> None:
    """Interpolate arm targets to ``q_to`` over ``seconds``, then hold for ``settle``."""
    q_from = arm_positions(world)
    steps = max(1, round(seconds / world.timestep))
    for i in range(1, steps + 1):
        s = i / steps
        blend = s * s * (3 - 2 * s)
        world.set_targets(kin.joint_names, q_from + (q_to - q_from) * blend)
        world.step(1)
    world.step(round(settle / world.timestep))


def move_tool(
    world: World, kin: Kinematics, position: np.ndarray, yaw: float, seconds: float = 1.0
) -> None:
    q = kin.ik(position, yaw, arm_positions(world))
    move_joints(world, kin, q, seconds)


def set_gripper(world: World, width: float, seconds: float = 0.6) -> None:
    # The gripper joint is one finger's opening, half the width between the pads.
    world.set_targets([GRIPPER_JOINT], [width / 2])
    world.step(round(seconds / world.timestep))


def grasp_yaw(orientation_wxyz: Quaternion) -> float:
    """A tool yaw aligned with the cube's faces, folded into [-pi/4, pi/4)."""
    w, _, _, z = orientation_wxyz
    yaw = 2 * math.atan2(z, w)
    return (yaw + math.pi / 4) % (math.pi / 2) - math.pi / 4


def pick_and_place(world: World, kin: Kinematics) -> PickReport:
    """Pick the cube where it lies and put it down in the middle of the target zone."""
    state = world.scene_state()
    cube = np.array(state.object("cube").position)
    yaw = grasp_yaw(state.object("cube").orientation_wxyz)
    up = np.array([0.0, 0.0, 1.0])
    move_tool(world, kin, cube + HOVER * up, yaw)
    move_tool(world, kin, cube, yaw, seconds=0.8)
    set_gripper(world, 0.0)
    grasped = world.scene_state()
    move_tool(world, kin, cube + CARRY * up, yaw)
    lifted = world.scene_state()
    target = np.array(state.target_zone.center)
    target[2] = cube[2]
    move_tool(world, kin, target + CARRY * up, 0.0, seconds=1.5)
    over_target = world.scene_state()
    move_tool(world, kin, target + 0.01 * up, 0.0)
    set_gripper(world, 0.08, seconds=0.5)
    move_tool(world, kin, target + CARRY * up, 0.0, seconds=0.8)
    return PickReport(grasped, lifted, over_target, world.scene_state())
