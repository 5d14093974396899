"""Forward and inverse kinematics of the tool frame on the controller's own model copy.

The controller loads the arm's MJCF alone (``RobotProfile.model_file``): the arm's model
world frame is the robot base frame, so every position here is in the base frame (metres)
and every angle in radians. The simulated world and a real robot are both irrelevant here;
this is pure geometry.

IK is damped least squares on the tool site's Jacobian. Targets are a position plus the
orientation "tool pointing straight down" with either a free or a given yaw (rotation of the
tool's x axis about the vertical, measured from the base x axis). It serves any profile's
model (sim_arm's 6 joints, OpenArm's 7): a joint pinned at a limit leaves the solve instead of
being clipped (clipping stalled the 7-DOF arm against its wrist limits), a redundant arm is
pulled toward its starting posture inside the null space, and random restarts are tripled
for it.

Why this solver and not ``mink`` (1.3.0, Apache-2.0, on the index): mink solves the same
differential IK as a QP per step, so it handles limits as constraints rather than by column
removal, but it is as local as this solver (the restarts stay ours) and brings qpsolvers and
daqp into every arm node for a problem of at most seven joints and five or six task rows. The
generalised DLS solves every pose the shipped pick-and-place needs on both robots; mink stays
the candidate when a robot needs collision or velocity constraints in the IK itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from doraforge.nodes.robot.model import compile_robot
from doraforge.nodes.robot.profile import RobotProfile

DOWN = np.array([0.0, 0.0, -1.0])


class Unreachable(ValueError):
    """No joint configuration within limits puts the tool at the target."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "ARM_TARGET_UNREACHABLE",
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = False
        self.details = details or {}


@dataclass(frozen=True)
class IkSettings:
    """Solver tuning. ``damping`` is the DLS lambda (larger: slower, more robust near
    singularities); tolerances are the accepted residuals."""

    damping: float = 0.05
    max_iterations: int = 150
    position_tol: float = 1e-3  # m
    orientation_tol: float = 1e-2  # rad
    max_step: float = 0.3  # rad per iteration, keeps the linearisation honest
    restarts: int = 6
    null_gain: float = 0.02  # of the distance to the start per iteration (redundant arms)


def yaw_of(rotation: np.ndarray) -> float:
    """Yaw (rad) of a tool rotation matrix: the angle of its x axis about the base z axis."""
    return math.atan2(float(rotation[1, 0]), float(rotation[0, 0]))


def down_rotation(yaw: float) -> np.ndarray:
    """Tool rotation pointing straight down (tool z = -base z) with the given yaw."""
    c, s = math.cos(yaw), math.sin(yaw)
    # Rz(yaw) @ Rx(pi): x = (c, s, 0), y = (s, -c, 0), z = (0, 0, -1) as columns.
    return np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])


class Kinematics:
    """FK and IK of ``profile.tool_site`` over ``profile.arm_joints`` (in that order).

    Owns its own ``MjModel``/``MjData``; not thread-safe (use one per thread).
    """

    def __init__(self, profile: RobotProfile, settings: IkSettings | None = None) -> None:
        self.model = compile_robot(profile)
        self.data = mujoco.MjData(self.model)
        self.settings = settings or IkSettings(position_tol=profile.tolerances.ik_position_m)
        self.joint_names = profile.arm_joint_names
        joint_ids = [self.model.joint(name).id for name in self.joint_names]
        self._qpos = np.array([self.model.jnt_qposadr[j] for j in joint_ids])
        self._dof = np.array([self.model.jnt_dofadr[j] for j in joint_ids])
        self.lower = np.array([joint.lower for joint in profile.arm_joints])
        self.upper = np.array([joint.upper for joint in profile.arm_joints])
        self.home = np.array(profile.home, dtype=float)
        self._site = self.model.site(profile.tool_site).id
        self._jacp = np.zeros((3, self.model.nv))
        self._jacr = np.zeros((3, self.model.nv))
        self._rng = np.random.default_rng(0)
        # Position and pointing down (with yaw) constrain six DOF: beyond that an arm has
        # a self-motion to spend.
        self._redundant = len(self.joint_names) > 6

    def fk(self, q: npt.ArrayLike) -> tuple[np.ndarray, float]:
        """Tool position (base frame, m) and yaw (rad) for arm joint positions ``q``."""
        position, rotation = self.tool_pose(q)
        return position, yaw_of(rotation)

    def tool_pose(self, q: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Tool position (m) and 3x3 rotation matrix in the base frame for ``q``.

        Raises ``ValueError`` unless ``q`` holds one finite position per arm joint.
        """
        self._set(self._joint_vector(q, "q"))
        return self._site_pose()

    def within_limits(self, q: npt.ArrayLike) -> bool:
        """True when every arm joint position lies within the profile limits."""
        values = np.asarray(q, dtype=float)
        return bool(np.all(values >= self.lower) and np.all(values <= self.upper))

    def ik(
        self,
        position: npt.ArrayLike,
        yaw: float | None = None,
        q_seed: npt.ArrayLike | None = None,
    ) -> np.ndarray:
        """Joint positions that put the tool at ``position`` pointing down (with ``yaw`` when
        given), within joint limits, starting from ``q_seed`` (home when None).

        Raises ``ValueError`` for non-finite input and :class:`Unreachable`
        (``ARM_TARGET_UNREACHABLE``) when the residual stays above tolerance from every
        start tried.
        """
        target = np.asarray(position, dtype=float)
        if target.shape != (3,) or not np.all(np.isfinite(target)):
            raise ValueError("position must be three finite numbers")
        if yaw is not None and not math.isfinite(yaw):
            raise ValueError("yaw must be finite")
        seed = self.home if q_seed is None else self._joint_vector(q_seed, "q_seed")
        best: tuple[float, float, np.ndarray] | None = None
        for start in self._starts(seed):
            q, pos_err, rot_err = self._solve(start, target, yaw)
            if pos_err <= self.settings.position_tol and rot_err <= self.settings.orientation_tol:
                return q
            if best is None or pos_err + rot_err < best[0] + best[1]:
                best = (pos_err, rot_err, q)
        assert best is not None
        raise Unreachable(
            f"no joint solution within limits reaches {target.tolist()} "
            f"(residual {best[0]:.4f} m, {best[1]:.4f} rad)",
            details={
                "position": target.tolist(),
                "yaw": yaw,
                "position_residual_m": best[0],
                "orientation_residual_rad": best[1],
            },
        )

    def _joint_vector(self, q: npt.ArrayLike, name: str) -> np.ndarray:
        values = np.asarray(q, dtype=float)
        if values.shape != (len(self.joint_names),) or not np.all(np.isfinite(values)):
            raise ValueError(f"{name} must hold {len(self.joint_names)} finite joint positions")
        return values

    def _starts(self, seed: np.ndarray) -> list[np.ndarray]:
        # The seed first (continuity with the current pose), then home, then random starts:
        # DLS is local, and a folded elbow or a wrist flip can trap it.
        starts = [np.clip(seed, self.lower, self.upper), self.home.copy()]
        # A redundant arm's solution set is larger but so is its space of wrong basins.
        for _ in range(self.settings.restarts * (3 if self._redundant else 1)):
            starts.append(self._rng.uniform(self.lower, self.upper))
        return starts

    def _solve(
        self, q: np.ndarray, target: np.ndarray, yaw: float | None
    ) -> tuple[np.ndarray, float, float]:
        settings = self.settings
        rest = q.copy()
        q = q.copy()
        damping = settings.damping**2
        pos_err = rot_err = math.inf
        for _ in range(settings.max_iterations):
            self._set(q)
            error, jacobian, pos_err, rot_err = self._residual(target, yaw)
            if pos_err <= settings.position_tol * 0.5 and rot_err <= settings.orientation_tol * 0.5:
                break
            step = self._step(q, rest, jacobian, error, damping)
            largest = float(np.max(np.abs(step)))
            if largest > settings.max_step:
                step *= settings.max_step / largest
            q = np.clip(q + step, self.lower, self.upper)
        self._set(q)
        _, _, pos_err, rot_err = self._residual(target, yaw)
        return q, pos_err, rot_err

    def _step(
        self,
        q: np.ndarray,
        rest: np.ndarray,
        jacobian: np.ndarray,
        error: np.ndarray,
        damping: float,
    ) -> np.ndarray:
        # A joint pinned at a limit with the step pushing it further is taken out of the
        # solve (its Jacobian column zeroed) and the step solved again: plain clipping
        # would throw that joint's share away and stall the others with it.
        free = np.ones(len(q), dtype=bool)
        step = np.zeros(len(q))
        for _ in range(3):
            masked = jacobian * free
            pinv = masked.T @ np.linalg.inv(masked @ masked.T + damping * np.eye(len(error)))
            step = pinv @ error
            if self._redundant:
                # A redundant arm (more joints than the task constrains) drifts along its
                # self-motion under plain DLS; a pull toward the start inside the null
                # space keeps it near the posture it started from (continuity between moves).
                null = np.eye(len(q)) - pinv @ masked
                step += (null @ (self.settings.null_gain * (rest - q))) * free
            pinned = ((q <= self.lower) & (step < 0)) | ((q >= self.upper) & (step > 0))
            if not np.any(pinned & free):
                break
            free &= ~pinned
        return step

    def _residual(
        self, target: np.ndarray, yaw: float | None
    ) -> tuple[np.ndarray, np.ndarray, float, float]:
        position, rotation = self._site_pose()
        mujoco.mj_jacSite(self.model, self.data, self._jacp, self._jacr, self._site)
        jacp = self._jacp[:, self._dof]
        jacr = self._jacr[:, self._dof]
        pos_error = target - position
        if yaw is None:
            # Only the tool axis must point down: the rotation error is the axis-angle that
            # swings tool z onto -z, and rotation about the vertical is left free by
            # projecting the angular Jacobian onto the horizontal plane.
            rot_error = np.cross(rotation[:, 2], DOWN)
            jac_rot = jacr[:2]
            rot_error = rot_error[:2]
        else:
            rot_error = _rotation_error(down_rotation(yaw), rotation)
            jac_rot = jacr
        error = np.concatenate([pos_error, rot_error])
        jacobian = np.vstack([jacp, jac_rot])
        return error, jacobian, float(np.linalg.norm(pos_error)), float(np.linalg.norm(rot_error))

    def _set(self, q: np.ndarray) -> None:
        self.data.qpos[self._qpos] = q
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)

    def _site_pose(self) -> tuple[np.ndarray, np.ndarray]:
        position = self.data.site_xpos[self._site].copy()
        rotation = self.data.site_xmat[self._site].reshape(3, 3).copy()
        return position, rotation


def _rotation_error(desired: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Axis-angle vector (base frame) rotating ``current`` onto ``desired``."""
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, (desired @ current.T).flatten())
    velocity = np.empty(3)
    mujoco.mju_quat2Vel(velocity, quat, 1.0)
    return velocity
