"""The gripper controller's typed configuration, taken from a robot profile."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from doraforge.nodes.motion.follow import FollowLimits
from doraforge.nodes.robot.profile import RobotProfile


@dataclass(frozen=True)
class GripperConfig:
    """Finger joints and widths (m between the pads); ``joint = scale * width + offset``."""

    joints: tuple[str, ...]
    open_width: float
    closed_width: float
    max_width: float
    scale: float
    offset: float = 0.0
    max_speed: float = 0.1  # m/s of width change
    width_tolerance: float = 0.002  # m: release is done this close to open_width
    # Fingers that stop this far short of the commanded width are resting on an object.
    contact_margin: float = 0.003
    max_force: float = 200.0  # N: the largest grasp force a caller may ask for
    follow: FollowLimits = field(default_factory=lambda: FollowLimits(settle_velocity=0.005))

    def __post_init__(self) -> None:
        if not self.joints:
            raise ValueError("gripper needs at least one joint")
        if not 0 <= self.closed_width < self.open_width <= self.max_width:
            raise ValueError("widths must satisfy 0 <= closed_width < open_width <= max_width")
        if self.scale == 0:
            raise ValueError("scale must not be zero")

    def joints_for(self, width: float) -> np.ndarray:
        """Joint positions that set the fingers ``width`` apart."""
        return np.full(len(self.joints), self.scale * width + self.offset)

    def width_of(self, positions: np.ndarray) -> float:
        """Finger width measured from joint positions (mean over the finger joints)."""
        return float(np.mean((positions - self.offset) / self.scale))

    @property
    def joint_speed(self) -> np.ndarray:
        return np.full(len(self.joints), self.max_speed * abs(self.scale))


def from_profile(profile: RobotProfile) -> GripperConfig:
    """Build the gripper configuration from a validated robot profile."""
    gripper = profile.gripper
    return GripperConfig(
        joints=tuple(gripper.joints),
        open_width=gripper.open_width,
        closed_width=gripper.closed_width,
        max_width=gripper.max_width,
        scale=gripper.joint_for_width.scale,
        offset=gripper.joint_for_width.offset,
    )
