"""The simulated cell's physics: one ``MjModel``/``MjData`` pair, stepped at a fixed timestep.

:class:`World` is the state a world node (or a test) drives: sparse joint position targets
in, joint state and a typed :class:`~doraforge.sim.state.SceneState` out. It knows nothing
about Dora or pacing (callers decide how fast to step) and nothing about scenarios: a
:class:`~doraforge.sim.task.Task` places the objects after a reset, and
:class:`~doraforge.sim.environment.Environment` runs the two together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path

import mujoco
import numpy as np

from doraforge.sim.errors import PhysicsDiverged
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

ARM_JOINTS: tuple[str, ...] = (
    "shoulder_pan",
    "shoulder_lift",
    "elbow",
    "forearm_roll",
    "wrist_pitch",
    "wrist_roll",
)
GRIPPER_JOINT = "gripper"
GRIPPER_MIMIC_JOINT = "gripper_mimic"
JOINT_NAMES: tuple[str, ...] = (*ARM_JOINTS, GRIPPER_JOINT)
CUBE_BODY = "cube"
TOOL_SITE = "tool_center"
TARGET_SITE = "target_zone"
BASE_BODY = "base"

__all__ = [
    "ARM_JOINTS",
    "GRIPPER_JOINT",
    "JOINT_NAMES",
    "MAX_SANE_SPEED",
    "PhysicsDiverged",
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

    ``joint_names`` are the data-plane names: the six arm joints then ``gripper`` (one
    finger's opening in metres; the other finger mirrors it). Positions reported by
    :meth:`scene_state` are in the robot base frame (metres, radians).

    ``scene_path`` defaults to the shipped cell; another scene must keep its body, site and
    joint names (``base``, ``cube``, ``tool_center``, ``target_zone``, the joints above) and a
    ``home`` numeric. ``shadows`` turns shadow casting on for every light (about 9x the CPU
    render cost). A new world is reset (:meth:`reset`).
    """

    def __init__(self, scene_path: str | Path | None = None, *, shadows: bool = False) -> None:
        path = Path(scene_path) if scene_path is not None else DEFAULT_SCENE
        self.model = mujoco.MjModel.from_xml_path(str(path))
        # Keep a blown-up state for inspection instead of MuJoCo's silent auto-reset; the
        # world stops stepping and the caller resets explicitly.
        self.model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_AUTORESET
        self.model.light_castshadow[:] = 1 if shadows else 0
        self.data = mujoco.MjData(self.model)
        self.joint_names: tuple[str, ...] = JOINT_NAMES
        self._index = _ModelIndex(self.model)
        self._home = self._index.home_pose(self.model)
        self._diverged: PhysicsDiverged | None = None
        self.reset()

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
        """Restore the model: time zero, everything at rest, the arm at home with the
        gripper open (targets too), other bodies where the scene file puts them; and clear
        a divergence. Always the same state: the physics draws nothing."""
        mujoco.mj_resetData(self.model, self.data)
        index = self._index
        self.data.qpos[index.arm_qpos] = self._home
        self.data.qpos[index.gripper_qpos] = index.gripper_open
        self.data.qpos[index.mimic_qpos] = index.gripper_open
        self.data.ctrl[index.arm_ctrl] = self._home
        self.data.ctrl[index.gripper_ctrl] = index.gripper_open
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
        updates: list[tuple[str, int, float]] = []
        for name, position in zip(names, positions, strict=True):
            actuator = self._index.actuator_for_joint.get(name)
            if actuator is None:
                raise ValueError(f"unknown joint {name!r}; known: {list(self.joint_names)}")
            value = float(position)
            if not math.isfinite(value):
                raise ValueError(f"target for joint {name!r} is not finite: {position!r}")
            low, high = self.model.actuator_ctrlrange[actuator]
            updates.append((name, actuator, min(max(value, float(low)), float(high))))
        for _, actuator, value in updates:
            self.data.ctrl[actuator] = value
        return {name: value for name, _, value in updates}

    def targets(self) -> dict[str, float]:
        """The current position target of every data-plane joint."""
        return {
            name: float(self.data.ctrl[self._index.actuator_for_joint[name]])
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

        Positions in rad (arm) or m (gripper, one finger's opening); efforts are the
        actuator forces (N·m or N).
        """
        index = self._index
        qpos = self.data.qpos[index.joint_qpos]
        qvel = self.data.qvel[index.joint_dof]
        effort = self.data.actuator_force[index.joint_ctrl]
        return (list(self.joint_names), qpos.tolist(), qvel.tolist(), effort.tolist())

    def gripper_width(self) -> float:
        """Distance between the two finger pads (m)."""
        index = self._index
        return float(self.data.qpos[index.gripper_qpos] + self.data.qpos[index.mimic_qpos])

    def tool_position(self) -> np.ndarray:
        """The tool-centre site position in the base frame (m)."""
        return self._to_base(self.data.site_xpos[self._index.tool_site])

    def scene_state(self) -> SceneState:
        """What the physics measures now, in the robot base frame: the cube, the target
        zone, the gripper and the sim time. ``seed`` is ``None``: the physics knows no
        episode (:meth:`Environment.scene_state <doraforge.sim.environment.Environment.scene_state>`
        labels it)."""
        index = self._index
        _, positions, _, _ = self.joint_state()
        return SceneState(
            objects={CUBE_BODY: self._cube_state()},
            target_zone=Zone(
                center=vec3(self._to_base(self.data.site_xpos[index.target_site]).tolist()),
                half_extents=vec3(self.model.site_size[index.target_site].tolist()),
            ),
            gripper=GripperState(
                width=self.gripper_width(),
                joint_positions={GRIPPER_JOINT: positions[-1]},
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


class _ModelIndex:
    """Ids and qpos/dof addresses looked up once from the model by name."""

    def __init__(self, model: mujoco.MjModel) -> None:
        def joint(name: str) -> int:
            return int(model.joint(name).id)

        self.arm_qpos = [int(model.jnt_qposadr[joint(n)]) for n in ARM_JOINTS]
        self.gripper_qpos = int(model.jnt_qposadr[joint(GRIPPER_JOINT)])
        self.mimic_qpos = int(model.jnt_qposadr[joint(GRIPPER_MIMIC_JOINT)])
        self.joint_qpos = [*self.arm_qpos, self.gripper_qpos]
        self.joint_dof = [int(model.jnt_dofadr[joint(n)]) for n in JOINT_NAMES]
        self.actuator_for_joint = {n: _actuator_for(model, joint(n)) for n in JOINT_NAMES}
        self.arm_ctrl = [self.actuator_for_joint[n] for n in ARM_JOINTS]
        self.gripper_ctrl = self.actuator_for_joint[GRIPPER_JOINT]
        self.joint_ctrl = [*self.arm_ctrl, self.gripper_ctrl]
        self.gripper_open = float(model.jnt_range[joint(GRIPPER_JOINT)][1])
        self.cube_body = model.body(CUBE_BODY).id
        self.cube_half_extents = np.array(model.geom(CUBE_BODY).size, dtype=float)
        self.tool_site = model.site(TOOL_SITE).id
        self.target_site = model.site(TARGET_SITE).id
        self.base_body = model.body(BASE_BODY).id

    @staticmethod
    def home_pose(model: mujoco.MjModel) -> np.ndarray:
        home = np.array(model.numeric("home").data, dtype=float)
        if home.shape != (len(ARM_JOINTS),):
            raise ValueError(f"numeric 'home' must hold {len(ARM_JOINTS)} values")
        return home

    def base_rot(self, data: mujoco.MjData) -> np.ndarray:
        rotation: np.ndarray = data.xmat[self.base_body].reshape(3, 3)
        return rotation

    def base_quat_inv(self, data: mujoco.MjData) -> np.ndarray:
        inverse = np.empty(4)
        mujoco.mju_negQuat(inverse, data.xquat[self.base_body])
        return inverse


def _actuator_for(model: mujoco.MjModel, joint_id: int) -> int:
    for actuator in range(model.nu):
        if (
            model.actuator_trntype[actuator] == mujoco.mjtTrn.mjTRN_JOINT
            and model.actuator_trnid[actuator][0] == joint_id
        ):
            return actuator
    raise ValueError(f"joint {model.joint(joint_id).name!r} has no position actuator")
