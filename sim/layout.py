"""Which parts of a loaded MJCF the world drives and reports: the robot layout.

The physics knows no robot by name. A :class:`RobotLayout` tells it which model joints are
each arm's, which actuator (joint or tendon transmission) drives each gripper and how its
joint reads as a finger width, which site is the tool centre, which body is the base frame,
the home pose, the data-plane joint names and which model camera serves each data-plane
camera. The world node builds one from a robot profile (``nodes/world/layout.py``);
:data:`SIM_ARM_LAYOUT` is the shipped ``sim_arm`` cell's, the default.

Everything is plain data so ``doraforge.sim`` needs no other doraforge package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

type Range = tuple[float, float]


@dataclass(frozen=True)
class GripperLayout:
    """One gripper.

    ``name`` is its data-plane joint name and ``model_joint`` the model joint measured for
    it. ``actuator`` names the model actuator that drives it (joint or tendon
    transmission); ``None`` finds the actuator whose transmission is ``model_joint``.
    A command ``q`` (joint units) becomes ``ctrl = command_scale * q + command_offset``
    (a tendon actuator's control is a tendon length, not a joint angle). ``mimic`` is a
    second finger joint set with the first at reset (the model's equality keeps them
    together afterwards). The finger width (m) reads
    ``width_scale * sum(qpos[width_joints]) + width_offset``. ``open`` is the open joint
    position (``None``: the joint's upper limit).
    """

    name: str
    model_joint: str
    width_joints: tuple[str, ...]
    width_scale: float = 1.0
    width_offset: float = 0.0
    actuator: str | None = None
    mimic: str | None = None
    command_scale: float = 1.0
    command_offset: float = 0.0
    open: float | None = None

    def __post_init__(self) -> None:
        if not self.width_joints:
            raise ValueError(f"gripper {self.name!r}: width_joints must not be empty")
        if self.command_scale == 0:
            raise ValueError(f"gripper {self.name!r}: command_scale must not be zero")


@dataclass(frozen=True)
class ArmLayout:
    """One arm: its data-plane joint names (``model_joints`` maps a name to the model's
    joint when they differ), its home pose (rad; ``None``: the model's ``home`` numeric),
    its tool-centre site and its gripper."""

    joints: tuple[str, ...]
    tool_site: str
    gripper: GripperLayout
    home: tuple[float, ...] | None = None
    model_joints: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not self.joints:
            raise ValueError("an arm needs at least one joint")
        if self.home is not None and len(self.home) != len(self.joints):
            raise ValueError(f"home holds {len(self.home)} values for {len(self.joints)} joints")

    def model_joint(self, name: str) -> str:
        """The model joint behind data-plane joint ``name``."""
        return self.model_joints.get(name, name)


@dataclass(frozen=True)
class RobotLayout:
    """The robot parts of a scene. ``arms[0]`` is the primary arm: its gripper and tool
    are the ones the scene state reports. ``base_body`` is the body whose frame is the base
    frame (``None``: the world frame, e.g. the table top of a composed cell). ``cameras``
    maps a data-plane camera name to the model camera rendering it. ``cube_region`` (x and
    y ranges in the base frame, m) is where this cell's free table area lets a task put
    its object and ``cube_yaw`` (rad) how far it may be turned for this robot's wrist;
    ``None`` keeps the task's own default."""

    arms: tuple[ArmLayout, ...]
    base_body: str | None = None
    cameras: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    cube_region: tuple[Range, Range] | None = None
    cube_yaw: Range | None = None

    def __post_init__(self) -> None:
        if not self.arms:
            raise ValueError("a robot layout needs at least one arm")
        names = self.joint_names
        if len(set(names)) != len(names):
            raise ValueError(f"data-plane joint names repeat: {list(names)}")

    @property
    def primary(self) -> ArmLayout:
        return self.arms[0]

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Data-plane order: each arm's joints then its gripper, primary arm first."""
        return tuple(name for arm in self.arms for name in (*arm.joints, arm.gripper.name))

    def camera(self, name: str) -> str:
        """The model camera behind data-plane camera ``name`` (itself when not mapped)."""
        return self.cameras.get(name, name)


#: The shipped cell (``sim/assets/cell.xml``): sim_arm's six joints and its slide gripper,
#: whose ``gripper`` joint is one finger's opening and ``gripper_mimic`` the other's.
SIM_ARM_LAYOUT = RobotLayout(
    arms=(
        ArmLayout(
            joints=(
                "shoulder_pan",
                "shoulder_lift",
                "elbow",
                "forearm_roll",
                "wrist_pitch",
                "wrist_roll",
            ),
            tool_site="tool_center",
            gripper=GripperLayout(
                name="gripper",
                model_joint="gripper",
                mimic="gripper_mimic",
                width_joints=("gripper", "gripper_mimic"),
            ),
        ),
    ),
    base_body="base",
)
