"""The arm controller's typed configuration, taken from a robot profile.

Everything robot-specific the arm endpoint knows comes from here: joint names and limits,
home pose, workspace box, frames and completion tolerances. :func:`from_profile` is the
one place that reads the shared robot profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from doraforge.nodes.motion.follow import FollowLimits
from doraforge.nodes.robot.limits import check_box, check_home, check_joint
from doraforge.nodes.robot.profile import RobotProfile

#: IK answers may sit on a limit up to float noise.
LIMIT_SLACK_RAD = 1e-6


@dataclass(frozen=True)
class JointSpec:
    """One arm joint: position limits (rad) and the speed the controller may command."""

    name: str
    lower: float
    upper: float
    max_velocity: float

    def __post_init__(self) -> None:
        check_joint(self)


@dataclass(frozen=True)
class ArmConfig:
    """Validated arm configuration; arrays follow the order of ``joints``."""

    robot_id: str
    base_frame: str
    tool_frame: str
    joints: tuple[JointSpec, ...]
    home: tuple[float, ...]
    workspace_min: tuple[float, float, float]
    workspace_max: tuple[float, float, float]
    joint_tolerance: float = 0.01  # rad: measured-vs-goal band for completion
    position_tolerance: float = 0.005  # m: IK solution must land this close to the target
    default_speed: float = 0.25  # m/s along the tool path when the caller gives none
    max_speed: float = 1.0  # m/s
    follow: FollowLimits = field(default_factory=FollowLimits)

    def __post_init__(self) -> None:
        check_home(self.joints, self.home)
        check_box(self.workspace_min, self.workspace_max)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(joint.name for joint in self.joints)

    @property
    def lower(self) -> np.ndarray:
        return np.array([joint.lower for joint in self.joints])

    @property
    def upper(self) -> np.ndarray:
        return np.array([joint.upper for joint in self.joints])

    @property
    def max_velocity(self) -> np.ndarray:
        return np.array([joint.max_velocity for joint in self.joints])

    @property
    def home_array(self) -> np.ndarray:
        return np.array(self.home, dtype=float)

    def outside_limits(self, q: np.ndarray) -> list[str]:
        """Names of the joints whose position in ``q`` lies beyond its limits (with slack)."""
        bad = (q < self.lower - LIMIT_SLACK_RAD) | (q > self.upper + LIMIT_SLACK_RAD)
        return [name for name, out in zip(self.names, bad, strict=True) if out]

    def in_workspace(self, position: np.ndarray) -> bool:
        """Whether ``position`` (base frame, m) lies inside the configured box."""
        return bool(
            np.all(np.asarray(self.workspace_min) <= position)
            and np.all(position <= np.asarray(self.workspace_max))
        )


def from_profile(profile: RobotProfile, *, joint_tolerance: float = 0.01) -> ArmConfig:
    """Build the arm configuration from a validated robot profile."""
    limits = FollowLimits(settle_velocity=profile.tolerances.settle_velocity)
    return ArmConfig(
        robot_id=profile.robot_id,
        base_frame=profile.base_frame,
        tool_frame=profile.tool_frame,
        joints=tuple(
            JointSpec(j.name, j.lower, j.upper, j.max_velocity) for j in profile.arm_joints
        ),
        home=tuple(profile.home),
        workspace_min=tuple(profile.workspace.min),  # type: ignore[arg-type]
        workspace_max=tuple(profile.workspace.max),  # type: ignore[arg-type]
        joint_tolerance=joint_tolerance,
        position_tolerance=profile.tolerances.position_m,
        follow=limits,
    )
