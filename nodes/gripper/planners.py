"""Planners of the gripper's Actions: ``grasp`` (close until contact or a width) and ``release``.

A position-controlled gripper grasps by commanding a width narrower than the object: the
fingers stall on contact and keep squeezing. ``grasp`` therefore completes when the fingers
are at rest, wherever that is, and reports ``holding`` when they stopped short of the
commanded width.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from doraforge.nodes.gripper.config import GripperConfig
from doraforge.nodes.motion.action import MotionPlan
from doraforge.nodes.motion.arguments import ArgumentReader
from doraforge.nodes.motion.follow import Outcome
from doraforge.nodes.motion.plane import JointSample
from doraforge.nodes.motion.trajectory import JointTrajectory

INVALID = "GRIPPER_INVALID_ARGUMENTS"


@dataclass
class GripMemory:
    """Whether the last finished grasp ended on an object (cleared by ``release``)."""

    holding: bool = False


def gripper_outputs(config: GripperConfig, sample: JointSample, holding: bool) -> dict[str, Any]:
    """Width, holding and joint positions from the measured ``sample``."""
    return {
        "width": round(config.width_of(sample.positions), 6),
        "holding": holding,
        "joint_positions": dict(zip(config.joints, map(float, sample.positions), strict=True)),
    }


def _plan(config: GripperConfig, sample: JointSample, width: float, band: bool) -> MotionPlan:
    goal = config.joints_for(width)
    trajectory = JointTrajectory.plan(sample.positions, goal, config.joint_speed)
    tolerance = np.full(len(goal), config.width_tolerance * abs(config.scale)) if band else None
    return MotionPlan(trajectory, tolerance, details={"target_width": width}, target=width)


class GraspPlanner:
    """``{"width"?: m, "force"?: N}``: close to ``width`` (default: fully) or until contact.

    ``force`` is advisory: a position-controlled gripper's squeeze is set by how far the
    commanded width lies inside the object, so it is bounded, echoed, and not servoed.
    """

    def __init__(self, config: GripperConfig, memory: GripMemory) -> None:
        self.config = config
        self.memory = memory

    def plan(self, arguments: Mapping[str, Any], sample: JointSample) -> MotionPlan:
        config = self.config
        reader = ArgumentReader(arguments, code=INVALID, allowed={"width", "force"})
        width = reader.number(
            "width", low=config.closed_width, high=config.max_width, default=config.closed_width
        )
        details: dict[str, Any] = {}
        if reader.has("force"):
            details["force"] = reader.positive("force", high=config.max_force, default=1.0)
        plan = _plan(config, sample, width, band=False)
        return MotionPlan(plan.trajectory, None, {**plan.details, **details}, target=width)

    def outputs(self, plan: MotionPlan, outcome: Outcome, sample: JointSample) -> dict[str, Any]:
        width = self.config.width_of(sample.positions)
        stalled_short = width > plan.target + self.config.contact_margin
        self.memory.holding = outcome is Outcome.REACHED and stalled_short
        return gripper_outputs(self.config, sample, self.memory.holding)


class ReleasePlanner:
    """``{}``: open to the profile's ``open_width``."""

    def __init__(self, config: GripperConfig, memory: GripMemory) -> None:
        self.config = config
        self.memory = memory

    def plan(self, arguments: Mapping[str, Any], sample: JointSample) -> MotionPlan:
        ArgumentReader(arguments, code=INVALID, allowed=set())
        # Once the fingers start opening nothing is held, whatever the outcome.
        self.memory.holding = False
        return _plan(self.config, sample, self.config.open_width, band=True)

    def outputs(self, plan: MotionPlan, outcome: Outcome, sample: JointSample) -> dict[str, Any]:
        return gripper_outputs(self.config, sample, holding=False)
