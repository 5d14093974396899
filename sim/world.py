"""The simulated cell's physics: one ``MjModel``/``MjData`` pair, stepped at a fixed timestep.

:class:`World` is the state a world node (or a test) drives: sparse joint position targets
in, joint state and a typed :class:`~doraforge.sim.state.SceneState` out. It knows nothing
about Dora or pacing (callers decide how fast to step) and nothing about scenarios: a
:class:`~doraforge.sim.task.Task` places the objects after a reset, and
:class:`~doraforge.sim.environment.Environment` runs the two together.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import mujoco
import numpy as np

from doraforge.sim.errors import PhysicsDiverged
from doraforge.sim.layout import SIM_ARM_LAYOUT, ArmLayout, GripperLayout, RobotLayout
from doraforge.sim.mjwarnings import warnings_logged
from doraforge.sim.state import (
    GripperState,
    ObjectState,
    Quaternion,
    SceneState,
    Vec3,
    Zone,
    quaternion,
    vec3,
)

ASSETS = Path(str(files(__package__))) / "assets"
DEFAULT_SCENE = ASSETS / "cell.xml"

#: The shipped sim_arm cell's data-plane names (:data:`~doraforge.sim.layout.SIM_ARM_LAYOUT`).
ARM_JOINTS: tuple[str, ...] = SIM_ARM_LAYOUT.primary.joints
GRIPPER_JOINT = SIM_ARM_LAYOUT.primary.gripper.name
JOINT_NAMES: tuple[str, ...] = SIM_ARM_LAYOUT.joint_names
CUBE_BODY = "cube"
TARGET_SITE = "target_zone"

__all__ = [
    "ARM_JOINTS",
    "GRIPPER_JOINT",
    "JOINT_NAMES",
    "MAX_SANE_SPEED",
    "PhysicsDiverged",
    "RobotLayout",
    "World",
]

# Far beyond anything the servos can produce (rad/s or m/s): a state this fast has blown up.
MAX_SANE_SPEED = 100.0
_INSTABILITY_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQACC,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQPOS,
)


class World:
    """Physics state of the robot cell.

    ``joint_names`` are the data-plane names from the robot layout: each arm's joints then
    its gripper (for sim_arm the six arm joints then ``gripper``, one finger's opening in
    metres; the other finger mirrors it). Positions reported by :meth:`scene_state` are in
    the robot base frame (metres, radians).

    ``scene_path`` defaults to the shipped sim_arm cell with :data:`SIM_ARM_LAYOUT`; another
    scene must hold the ``cube`` body and ``target_zone`` site and the layout's joints,
    actuators and sites (a layout without a home pose reads the model's ``home`` numeric).
    :meth:`from_spec` builds a world from a composed ``MjSpec`` instead (see
    :func:`doraforge.sim.cell.compose_cell`). ``shadows`` turns shadow casting on for every
    light (about 9x the CPU render cost). A new world is reset (:meth:`reset`).
    """

    def __init__(
        self,
        scene_path: str | Path | None = None,
        *,
        shadows: bool = False,
        layout: RobotLayout = SIM_ARM_LAYOUT,
        model: mujoco.MjModel | None = None,
    ) -> None:
        if model is None:
            path = Path(scene_path) if scene_path is not None else DEFAULT_SCENE
            model = mujoco.MjModel.from_xml_path(str(path))
        self.model = model
        self.layout = layout
        # Keep a blown-up state for inspection instead of MuJoCo's silent auto-reset; the
        # world stops stepping and the caller resets explicitly.
        self.model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_AUTORESET
        self.model.light_castshadow[:] = 1 if shadows else 0
        self.data = mujoco.MjData(self.model)
        self.joint_names: tuple[str, ...] = layout.joint_names
        self._index = _ModelIndex(self.model, layout)
        self._diverged: PhysicsDiverged | None = None
        self.reset()

    @classmethod
    def from_spec(cls, spec: mujoco.MjSpec, layout: RobotLayout, *, shadows: bool = False) -> World:
        """A world on the compiled ``spec`` (a cell composed with ``MjSpec``). Raises
        ``ValueError`` when the spec does not compile or lacks what ``layout`` names."""
        with warnings.catch_warnings(), warnings_logged():
            # A robot attached without a name prefix (compose_cell keeps the profile's
            # names) makes MuJoCo warn that the model may not save back to one file.
            warnings.filterwarnings("ignore", message="Attaching a spec with an empty prefix")
            model = spec.compile()
        return cls(layout=layout, model=model, shadows=shadows)

    @property
    def cube_region(self) -> tuple[tuple[float, float], tuple[float, float]] | None:
        """Where this cell's table lets a task put the cube: (x, y) ranges in the base
        frame (m), or ``None`` for the task's default."""
        return self.layout.cube_region

    @property
    def cube_yaw(self) -> tuple[float, float] | None:
        """How far this cell's robot lets a task turn the cube (rad), or ``None``."""
        return self.layout.cube_yaw

    @property
    def sim_time(self) -> float:
        """Simulated seconds since the last reset."""
        return float(self.data.time)

    @property
    def timestep(self) -> float:
        """Physics step in seconds."""
        return float(self.model.opt.timestep)

    @property
    def diverged(self) -> bool:
        """True after :class:`PhysicsDiverged` until the next :meth:`reset`."""
        return self._diverged is not None

    def reset(self) -> None:
        """Restore the model: time zero, everything at rest, every arm at home with its
        gripper open (targets too), other bodies where the scene file puts them; and clear
        a divergence. Always the same state: the physics draws nothing."""
        mujoco.mj_resetData(self.model, self.data)
        for arm in self._index.arms:
            self.data.qpos[arm.qpos] = arm.home
            self.data.ctrl[arm.ctrl] = arm.home
        for gripper in self._index.grippers:
            self.data.qpos[gripper.qpos] = gripper.open
            if gripper.mimic_qpos is not None:
                self.data.qpos[gripper.mimic_qpos] = gripper.open
            self.data.ctrl[gripper.channel.actuator] = gripper.channel.to_ctrl(gripper.open)
        self._diverged = None
        mujoco.mj_forward(self.model, self.data)

    def set_free_body_pose(self, body: str, position: Vec3, orientation_wxyz: Quaternion) -> None:
        """Place the free-floating ``body`` at ``position`` (m) with ``orientation_wxyz``,
        both in the robot base frame, at rest; the derived state is recomputed. Raises
        ``ValueError`` for an unknown body or one without a free joint."""
        qpos, dof = self._free_joint_addresses(body)
        index = self._index
        origin = self.data.xpos[index.base_body]
        self.data.qpos[qpos : qpos + 3] = index.base_rot(self.data) @ np.asarray(position) + origin
        mujoco.mju_mulQuat(
            self.data.qpos[qpos + 3 : qpos + 7],
            self.data.xquat[index.base_body],
            np.asarray(orientation_wxyz, dtype=float),
        )
        self.data.qvel[dof : dof + 6] = 0.0
        mujoco.mj_forward(self.model, self.data)

    def _free_joint_addresses(self, body: str) -> tuple[int, int]:
        try:
            body_id = self.model.body(body).id
        except KeyError:
            raise ValueError(f"unknown body {body!r}") from None
        joint = int(self.model.body_jntadr[body_id])
        if joint < 0 or self.model.jnt_type[joint] != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError(f"body {body!r} has no free joint")
        return int(self.model.jnt_qposadr[joint]), int(self.model.jnt_dofadr[joint])

    def set_targets(self, names: Sequence[str], positions: Sequence[float]) -> dict[str, float]:
        """Set position targets for the named joints; others keep their targets.

        Each target is clamped to its actuator's range (the joint limits) and the applied
        values are returned by name. Raises ``ValueError`` for an unknown name, a length
        mismatch, or a non-finite position; nothing is applied then.
        """
        if len(names) != len(positions):
            raise ValueError(f"{len(names)} names but {len(positions)} positions")
        updates: list[tuple[str, _Channel, float]] = []
        for name, position in zip(names, positions, strict=True):
            channel = self._index.channels.get(name)
            if channel is None:
                raise ValueError(f"unknown joint {name!r}; known: {list(self.joint_names)}")
            value = float(position)
            if not math.isfinite(value):
                raise ValueError(f"target for joint {name!r} is not finite: {position!r}")
            low, high = self.model.actuator_ctrlrange[channel.actuator]
            updates.append(
                (name, channel, min(max(channel.to_ctrl(value), float(low)), float(high)))
            )
        for _, channel, ctrl in updates:
            self.data.ctrl[channel.actuator] = ctrl
        return {name: channel.from_ctrl(ctrl) for name, channel, ctrl in updates}

    def target_limits(self) -> dict[str, tuple[float, float]]:
        """The ``(low, high)`` range :meth:`set_targets` clamps each data-plane joint to
        (its actuator's control range, in joint units)."""
        limits = {}
        for name in self.joint_names:
            channel = self._index.channels[name]
            low, high = self.model.actuator_ctrlrange[channel.actuator]
            ends = sorted((channel.from_ctrl(float(low)), channel.from_ctrl(float(high))))
            limits[name] = (ends[0], ends[1])
        return limits

    def targets(self) -> dict[str, float]:
        """The current position target of every data-plane joint."""
        channels = self._index.channels
        return {
            name: channels[name].from_ctrl(float(self.data.ctrl[channels[name].actuator]))
            for name in self.joint_names
        }

    def step(self, n: int = 1) -> None:
        """Advance physics by ``n`` timesteps.

        Raises :class:`PhysicsDiverged` when the state becomes non-finite, MuJoCo flags an
        unstable acceleration, velocity or position, or any speed exceeds
        ``MAX_SANE_SPEED``; from then on every call raises until :meth:`reset`.
        """
        if self._diverged is not None:
            raise self._diverged
        for _ in range(n):
            mujoco.mj_step(self.model, self.data)
            problem = self._instability()
            if problem is not None:
                self._diverged = PhysicsDiverged(
                    f"physics diverged at t={self.data.time:.4f}s: {problem}",
                    details={"sim_time": float(self.data.time), "reason": problem},
                )
                raise self._diverged

    def _instability(self) -> str | None:
        for warning in _INSTABILITY_WARNINGS:
            if self.data.warning[warning].number > 0:
                return f"MuJoCo warning {warning.name}"
        if not (np.isfinite(self.data.qacc).all() and np.isfinite(self.data.qvel).all()):
            return "non-finite acceleration or velocity"
        speed = float(np.max(np.abs(self.data.qvel)))
        if speed > MAX_SANE_SPEED:
            return f"speed {speed:.3g} exceeds {MAX_SANE_SPEED}"
        return None

    def joint_state(self) -> tuple[list[str], list[float], list[float], list[float]]:
        """``(names, positions, velocities, efforts)`` for ``joint_names``.

        Positions in rad (revolute) or m (prismatic; sim_arm's gripper is one finger's
        opening); efforts are the actuator forces (N·m or N).
        """
        index = self._index
        qpos = self.data.qpos[index.joint_qpos]
        qvel = self.data.qvel[index.joint_dof]
        effort = self.data.actuator_force[index.joint_ctrl]
        return (list(self.joint_names), qpos.tolist(), qvel.tolist(), effort.tolist())

    def gripper_width(self) -> float:
        """Distance between the primary gripper's finger pads (m)."""
        gripper = self._index.grippers[0]
        total = 0.0
        for address in gripper.width_qpos:
            total += float(self.data.qpos[address])
        return gripper.width_scale * total + gripper.width_offset

    def tool_position(self) -> np.ndarray:
        """The primary tool-centre site position in the base frame (m)."""
        return self._to_base(self.data.site_xpos[self._index.tool_site])

    def scene_state(self) -> SceneState:
        """What the physics measures now, in the robot base frame: the cube, the target
        zone, the primary gripper and the sim time. ``seed`` is ``None``: the physics
        knows no episode
        (:meth:`Environment.scene_state <doraforge.sim.environment.Environment.scene_state>`
        labels it)."""
        index = self._index
        gripper = index.grippers[0]
        return SceneState(
            objects={CUBE_BODY: self._cube_state()},
            target_zone=Zone(
                center=vec3(self._to_base(self.data.site_xpos[index.target_site]).tolist()),
                half_extents=vec3(self.model.site_size[index.target_site].tolist()),
            ),
            gripper=GripperState(
                width=self.gripper_width(),
                joint_positions={gripper.name: float(self.data.qpos[gripper.qpos])},
                tool_position=vec3(self.tool_position().tolist()),
            ),
            sim_time=self.sim_time,
        )

    def _cube_state(self) -> ObjectState:
        index = self._index
        body = index.cube_body
        quat_world = self.data.xquat[body]
        quat_base = np.empty(4)
        mujoco.mju_mulQuat(quat_base, index.base_quat_inv(self.data), quat_world)
        velocity = np.empty(6)
        # Translational velocity of the body frame, expressed in the world frame (flg 0).
        mujoco.mj_objectVelocity(self.model, self.data, mujoco.mjtObj.mjOBJ_BODY, body, velocity, 0)
        return ObjectState(
            position=vec3(self._to_base(self.data.xpos[body]).tolist()),
            orientation_wxyz=quaternion(quat_base.tolist()),
            linear_velocity=vec3((index.base_rot(self.data).T @ velocity[3:]).tolist()),
            size=vec3((2.0 * index.cube_half_extents).tolist()),
        )

    def _to_base(self, world_point: np.ndarray) -> np.ndarray:
        index = self._index
        origin = self.data.xpos[index.base_body]
        base_point: np.ndarray = index.base_rot(self.data).T @ (np.asarray(world_point) - origin)
        return base_point


@dataclass(frozen=True)
class _Channel:
    """One data-plane joint: where it is measured and the actuator that drives it
    (``ctrl = scale * q + offset``)."""

    qpos: int
    dof: int
    actuator: int
    scale: float = 1.0
    offset: float = 0.0

    def to_ctrl(self, value: float) -> float:
        return self.scale * value + self.offset

    def from_ctrl(self, ctrl: float) -> float:
        return (ctrl - self.offset) / self.scale


@dataclass(frozen=True)
class _Arm:
    qpos: list[int]
    ctrl: list[int]
    home: np.ndarray


@dataclass(frozen=True)
class _Gripper:
    name: str
    channel: _Channel
    qpos: int
    mimic_qpos: int | None
    open: float
    width_qpos: list[int]
    width_scale: float
    width_offset: float


class _ModelIndex:
    """Ids and qpos/dof/actuator addresses the layout names, looked up once. Raises
    ``ValueError`` naming what the model lacks."""

    def __init__(self, model: mujoco.MjModel, layout: RobotLayout) -> None:
        self.channels: dict[str, _Channel] = {}
        self.arms: list[_Arm] = []
        self.grippers: list[_Gripper] = []
        for arm in layout.arms:
            self.arms.append(self._arm(model, arm))
            self.grippers.append(self._gripper(model, arm.gripper))
        channels = [self.channels[name] for name in layout.joint_names]
        self.joint_qpos = [channel.qpos for channel in channels]
        self.joint_dof = [channel.dof for channel in channels]
        self.joint_ctrl = [channel.actuator for channel in channels]
        self.cube_body = _id(model, mujoco.mjtObj.mjOBJ_BODY, CUBE_BODY)
        self.cube_half_extents = np.array(model.geom(CUBE_BODY).size, dtype=float)
        self.tool_site = _id(model, mujoco.mjtObj.mjOBJ_SITE, layout.primary.tool_site)
        self.target_site = _id(model, mujoco.mjtObj.mjOBJ_SITE, TARGET_SITE)
        base = layout.base_body
        self.base_body = 0 if base is None else _id(model, mujoco.mjtObj.mjOBJ_BODY, base)

    def _arm(self, model: mujoco.MjModel, arm: ArmLayout) -> _Arm:
        for name in arm.joints:
            joint = _id(model, mujoco.mjtObj.mjOBJ_JOINT, arm.model_joint(name))
            self.channels[name] = _Channel(
                int(model.jnt_qposadr[joint]),
                int(model.jnt_dofadr[joint]),
                _actuator_for(model, joint),
            )
        home = _home_pose(model, arm)
        _check_tool_site(model, arm)
        return _Arm(
            qpos=[self.channels[name].qpos for name in arm.joints],
            ctrl=[self.channels[name].actuator for name in arm.joints],
            home=home,
        )

    def _gripper(self, model: mujoco.MjModel, gripper: GripperLayout) -> _Gripper:
        joint = _id(model, mujoco.mjtObj.mjOBJ_JOINT, gripper.model_joint)
        actuator = (
            _actuator_for(model, joint)
            if gripper.actuator is None
            else _id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, gripper.actuator)
        )
        channel = _Channel(
            int(model.jnt_qposadr[joint]),
            int(model.jnt_dofadr[joint]),
            actuator,
            gripper.command_scale,
            gripper.command_offset,
        )
        self.channels[gripper.name] = channel
        mimic = None
        if gripper.mimic is not None:
            mimic = int(model.jnt_qposadr[_id(model, mujoco.mjtObj.mjOBJ_JOINT, gripper.mimic)])
        width_qpos = [
            int(model.jnt_qposadr[_id(model, mujoco.mjtObj.mjOBJ_JOINT, name)])
            for name in gripper.width_joints
        ]
        opened = float(model.jnt_range[joint][1]) if gripper.open is None else gripper.open
        return _Gripper(
            gripper.name,
            channel,
            channel.qpos,
            mimic,
            opened,
            width_qpos,
            gripper.width_scale,
            gripper.width_offset,
        )

    def base_rot(self, data: mujoco.MjData) -> np.ndarray:
        rotation: np.ndarray = data.xmat[self.base_body].reshape(3, 3)
        return rotation

    def base_quat_inv(self, data: mujoco.MjData) -> np.ndarray:
        inverse = np.empty(4)
        mujoco.mju_negQuat(inverse, data.xquat[self.base_body])
        return inverse


def _id(model: mujoco.MjModel, kind: mujoco.mjtObj, name: str) -> int:
    found = int(mujoco.mj_name2id(model, kind, name))
    if found < 0:
        label = mujoco.mju_type2Str(kind) if hasattr(mujoco, "mju_type2Str") else str(kind)
        raise ValueError(f"the model has no {label} named {name!r}")
    return found


def _home_pose(model: mujoco.MjModel, arm: ArmLayout) -> np.ndarray:
    if arm.home is not None:
        return np.array(arm.home, dtype=float)
    home = np.array(model.numeric("home").data, dtype=float)
    if home.shape != (len(arm.joints),):
        raise ValueError(f"numeric 'home' must hold {len(arm.joints)} values")
    return home


def _check_tool_site(model: mujoco.MjModel, arm: ArmLayout) -> None:
    _id(model, mujoco.mjtObj.mjOBJ_SITE, arm.tool_site)


def _actuator_for(model: mujoco.MjModel, joint_id: int) -> int:
    for actuator in range(model.nu):
        if (
            model.actuator_trntype[actuator] == mujoco.mjtTrn.mjTRN_JOINT
            and model.actuator_trnid[actuator][0] == joint_id
        ):
            return actuator
    raise ValueError(f"joint {model.joint(joint_id).name!r} has no position actuator")
