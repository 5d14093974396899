"""Planners of the arm's motion Actions: ``move_to_pose``, ``move_joints`` and ``home``.

Each turns untrusted arguments plus the measured joint state into a joint-space
minimum-jerk plan, or rejects before any motion with an ``ARM_*`` code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from doraforge.nodes.arm.config import ArmConfig
from doraforge.nodes.arm.kinematics import Unreachable
from doraforge.nodes.arm.linear import plan_linear
from doraforge.nodes.motion.action import MotionPlan
from doraforge.nodes.motion.arguments import ArgumentReader
from doraforge.nodes.motion.errors import rejection
from doraforge.nodes.motion.follow import Outcome
from doraforge.nodes.motion.plane import JointSample
from doraforge.nodes.motion.trajectory import (
    PEAK_TO_MEAN_SPEED,
    JointTrajectory,
    WaypointTrajectory,
)

INVALID = "ARM_INVALID_ARGUMENTS"
OUTSIDE_WORKSPACE = "ARM_TARGET_OUTSIDE_WORKSPACE"
UNREACHABLE = "ARM_TARGET_UNREACHABLE"
JOINT_LIMIT = "ARM_JOINT_LIMIT"

#: Without a requested speed, joints move at this share of their limit.
DEFAULT_JOINT_SPEED_SCALE = 0.5
MAX_YAW_RAD = 2 * math.pi
#: ``move_to_pose`` paths: joint-space (the default) or a straight tool-centre line.
PATHS = ("joint", "linear")


class Kinematics(Protocol):
    """Forward and inverse kinematics of the tool frame in the base frame.

    :class:`nodes.arm.kinematics.Kinematics` is the MuJoCo implementation.
    """

    def fk(self, q: np.ndarray) -> tuple[np.ndarray, float]:
        """Tool position (m) and yaw (rad) at joint positions ``q``."""
        ...

    def ik(
        self, position: np.ndarray, yaw: float | None = None, q_seed: np.ndarray | None = None
    ) -> np.ndarray:
        """Joint positions placing the tool at ``position`` (and ``yaw``).

        Raises :class:`~nodes.arm.kinematics.Unreachable` when there is none.
        """
        ...


def arm_pose(config: ArmConfig, kinematics: Kinematics, sample: JointSample) -> dict[str, Any]:
    """Joints and tool pose (FK of the measured joints) as tool outputs."""
    position, yaw = kinematics.fk(sample.positions)
    return {
        "joints": dict(zip(config.names, map(float, sample.positions), strict=True)),
        "position": [round(float(v), 6) for v in position],
        "yaw": round(float(yaw), 6),
    }


def check_limits(config: ArmConfig, goal: np.ndarray) -> None:
    """Reject a joint goal outside the configured limits, naming the joints."""
    names = config.outside_limits(goal)
    if names:
        raise rejection(
            JOINT_LIMIT, f"goal violates the limits of {', '.join(names)}", joints=names
        )


class _JointPlanner:
    """Shared planning from a joint goal; subclasses choose the goal."""

    def __init__(self, config: ArmConfig, kinematics: Kinematics) -> None:
        self.config = config
        self.kinematics = kinematics

    def _plan(
        self, sample: JointSample, goal: np.ndarray, speed: float | None, min_duration: float = 0.0
    ) -> MotionPlan:
        check_limits(self.config, goal)
        limit = self.config.max_velocity
        velocity = limit * DEFAULT_JOINT_SPEED_SCALE if speed is None else np.minimum(speed, limit)
        trajectory = JointTrajectory.plan(
            sample.positions, goal, velocity, min_duration=max(min_duration, 0.2)
        )
        tolerance = np.full(len(goal), self.config.joint_tolerance)
        goal_by_name = dict(zip(self.config.names, map(float, goal), strict=True))
        return MotionPlan(trajectory, tolerance, details={"joint_goal": goal_by_name})

    def outputs(self, plan: MotionPlan, outcome: Outcome, sample: JointSample) -> dict[str, Any]:
        return arm_pose(self.config, self.kinematics, sample)


class MoveToPosePlanner(_JointPlanner):
    """``{"position": [x, y, z], "yaw"?: rad, "speed"?: m/s, "path"?: "joint" | "linear"}``
    for the tool frame; ``linear`` is planned and checked by :mod:`nodes.arm.linear`."""

    def plan(self, arguments: Mapping[str, Any], sample: JointSample) -> MotionPlan:
        reader = ArgumentReader(
            arguments, code=INVALID, allowed={"position", "yaw", "speed", "path"}
        )
        if not reader.has("position"):
            raise reader.error("position is required")
        position = reader.vector(reader.raw("position"), "position", 3)
        yaw = None
        if reader.has("yaw"):
            yaw = reader.check_number(reader.raw("yaw"), "yaw", low=-MAX_YAW_RAD, high=MAX_YAW_RAD)
        speed = reader.positive(
            "speed", high=self.config.max_speed, default=self.config.default_speed
        )
        path = reader.choice("path", PATHS, default="joint")
        if not self.config.in_workspace(position):
            raise rejection(
                OUTSIDE_WORKSPACE,
                "target lies outside the workspace box",
                position=position.tolist(),
                workspace={
                    "min": list(self.config.workspace_min),
                    "max": list(self.config.workspace_max),
                },
            )
        start, _ = self.kinematics.fk(sample.positions)
        # Cartesian speed bounds the duration too: the tool's straight-line distance over speed.
        cartesian = PEAK_TO_MEAN_SPEED * float(np.linalg.norm(position - start)) / speed
        if path == "linear":
            return self._plan_linear(sample, position, yaw, cartesian)
        goal = self._solve(position, yaw, sample)
        plan = self._plan(sample, goal, None, min_duration=cartesian)
        details = {**plan.details, "target": position.tolist()}
        return MotionPlan(plan.trajectory, plan.tolerance, details, target=position)

    def _plan_linear(
        self, sample: JointSample, position: np.ndarray, yaw: float | None, min_duration: float
    ) -> MotionPlan:
        """The checked straight path, timed by the same joint and Cartesian speed bounds."""
        waypoints = plan_linear(self.config, self.kinematics, sample.positions, position, yaw)
        velocity = self.config.max_velocity * DEFAULT_JOINT_SPEED_SCALE
        trajectory = WaypointTrajectory.through(
            waypoints, velocity, min_duration=max(min_duration, 0.2)
        )
        goal = trajectory.goal
        details = {
            "joint_goal": dict(zip(self.config.names, map(float, goal), strict=True)),
            "target": position.tolist(),
            "path": "linear",
            "waypoints": len(waypoints),
        }
        tolerance = np.full(len(goal), self.config.joint_tolerance)
        return MotionPlan(trajectory, tolerance, details, target=position)

    def _solve(self, position: np.ndarray, yaw: float | None, sample: JointSample) -> np.ndarray:
        try:
            goal = np.asarray(self.kinematics.ik(position, yaw, q_seed=sample.positions), float)
        except Unreachable as exc:
            raise rejection(UNREACHABLE, str(exc), **getattr(exc, "details", {})) from exc
        check_limits(self.config, goal)
        reached, _ = self.kinematics.fk(goal)
        error = float(np.linalg.norm(reached - position))
        if not math.isfinite(error) or error > self.config.position_tolerance:
            raise rejection(UNREACHABLE, f"closest solution misses the target by {error:.4f} m")
        return goal

    def outputs(self, plan: MotionPlan, outcome: Outcome, sample: JointSample) -> dict[str, Any]:
        outputs = arm_pose(self.config, self.kinematics, sample)
        error = np.linalg.norm(np.asarray(outputs["position"]) - plan.target)
        return {**outputs, "target": plan.target.tolist(), "position_error": round(float(error), 6)}


class MoveJointsPlanner(_JointPlanner):
    """``{"positions": {joint: rad} | [rad, ...], "speed"?: rad/s}``; unnamed joints stay."""

    def plan(self, arguments: Mapping[str, Any], sample: JointSample) -> MotionPlan:
        reader = ArgumentReader(arguments, code=INVALID, allowed={"positions", "speed"})
        if not reader.has("positions"):
            raise reader.error("positions is required")
        goal = self._goal(reader, sample)
        speed = None
        if reader.has("speed"):
            speed = reader.positive(
                "speed", high=float(np.max(self.config.max_velocity)), default=1.0
            )
        return self._plan(sample, goal, speed)

    def _goal(self, reader: ArgumentReader, sample: JointSample) -> np.ndarray:
        raw = reader.raw("positions")
        names = self.config.names
        if isinstance(raw, list):
            return reader.vector(raw, "positions", len(names))
        if not isinstance(raw, dict) or not raw:
            raise reader.error("positions must be a non-empty {joint: rad} map or a list")
        unknown = sorted(set(raw) - set(names))
        if unknown:
            raise reader.error(f"unknown joint(s): {', '.join(map(str, unknown))}")
        goal = sample.positions.copy()
        for name, value in raw.items():
            bound = math.inf
            goal[names.index(name)] = reader.check_number(
                value, f"positions.{name}", low=-bound, high=bound
            )
        return goal


class HomePlanner(_JointPlanner):
    """``{}``: the profile's home pose."""

    def plan(self, arguments: Mapping[str, Any], sample: JointSample) -> MotionPlan:
        ArgumentReader(arguments, code=INVALID, allowed=set())
        return self._plan(sample, self.config.home_array, None)
