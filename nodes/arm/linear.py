"""Straight-line tool paths for ``move_to_pose`` with ``path: "linear"``.

The tool centre moves on the straight segment from its current position to the target;
yaw (the tool points down, see :mod:`nodes.arm.kinematics`) is interpolated along the
shorter way round, or left free when the caller gave none. The segment is sampled at
most :data:`SPACING_M` apart (and :data:`YAW_SPACING_RAD` of yaw), each waypoint solved by
the arm's IK seeded from its neighbour's solution. The whole path is checked before any
motion: every waypoint inside the workspace box, solvable, within joint limits, and no
joint moving more than :data:`MAX_JOINT_STEP_RAD` between neighbours (a bigger step is
an IK branch switch or a singularity, where the tool would leave the line).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from doraforge.nodes.arm.config import ArmConfig
from doraforge.nodes.arm.kinematics import Unreachable
from doraforge.nodes.motion.errors import rejection

if TYPE_CHECKING:
    from doraforge.nodes.arm.planners import Kinematics

LINEAR_INFEASIBLE = "ARM_LINEAR_PATH_INFEASIBLE"
#: Largest Cartesian distance between neighbouring waypoints (m).
SPACING_M = 0.005
#: Largest yaw change between neighbouring waypoints (rad, about 2 degrees).
YAW_SPACING_RAD = 0.035
#: Largest change of any joint between neighbouring waypoints (rad).
MAX_JOINT_STEP_RAD = 0.15
#: How far a solved waypoint may miss its point on the line (m).
LINE_TOLERANCE_M = 0.002


def wrap_angle(angle: float) -> float:
    """``angle`` wrapped to [-pi, pi): the shorter way round."""
    return (angle + math.pi) % (2 * math.pi) - math.pi


def line_points(
    start: np.ndarray, target: np.ndarray, start_yaw: float, yaw: float | None
) -> tuple[np.ndarray, list[float | None]]:
    """Evenly spaced positions from ``start`` to ``target`` (both included) and their yaws."""
    turn = 0.0 if yaw is None else wrap_angle(yaw - start_yaw)
    distance = float(np.linalg.norm(target - start))
    steps = max(1, math.ceil(distance / SPACING_M), math.ceil(abs(turn) / YAW_SPACING_RAD))
    fractions = np.linspace(0.0, 1.0, steps + 1)
    positions = start + np.outer(fractions, target - start)
    yaws: list[float | None] = [None if yaw is None else start_yaw + turn * f for f in fractions]
    if yaw is not None:
        yaws[-1] = yaw
    return positions, yaws


def plan_linear(
    config: ArmConfig,
    kinematics: Kinematics,
    q_start: np.ndarray,
    target: np.ndarray,
    yaw: float | None,
) -> np.ndarray:
    """Joint waypoints (rows, the first ``q_start``) of the straight path to ``target``.

    Raises ``ToolEndpointError`` (``ARM_LINEAR_PATH_INFEASIBLE``, details: waypoint index,
    count, position and reason) at the first waypoint that fails a check.
    """
    start, start_yaw = kinematics.fk(q_start)
    positions, yaws = line_points(np.asarray(start, float), target, start_yaw, yaw)
    count = len(positions)
    solved = [np.asarray(q_start, dtype=float)]
    for index in range(1, count):
        try:
            q = _waypoint(config, kinematics, positions[index], yaws[index], solved[-1])
        except _Refused as refused:
            raise rejection(
                LINEAR_INFEASIBLE,
                f"straight path refused at waypoint {index}/{count - 1}: {refused.reason}; "
                "use path 'joint' or a nearer target",
                waypoint=index,
                waypoints=count,
                position=[round(float(v), 6) for v in positions[index]],
                reason=refused.reason,
                **refused.details,
            ) from refused.__cause__
        solved.append(q)
    return np.array(solved)


class _Refused(Exception):
    """One waypoint failed a check: why, and the facts that show it."""

    def __init__(self, reason: str, **details: Any) -> None:
        super().__init__(reason)
        self.reason, self.details = reason, details


def _waypoint(
    config: ArmConfig,
    kinematics: Kinematics,
    position: np.ndarray,
    yaw: float | None,
    previous: np.ndarray,
) -> np.ndarray:
    """Solve and check one waypoint against its predecessor; :class:`_Refused` if it
    fails a check."""
    if not config.in_workspace(position):
        raise _Refused("outside the workspace box")
    try:
        q = np.asarray(kinematics.ik(position, yaw, q_seed=previous), dtype=float)
    except Unreachable as exc:
        raise _Refused("no IK solution", ik=str(exc)) from exc
    names = config.outside_limits(q)
    if names:
        raise _Refused("joint limit", joints=names)
    reached, _ = kinematics.fk(q)
    miss = float(np.linalg.norm(np.asarray(reached) - position))
    if not miss <= LINE_TOLERANCE_M:
        raise _Refused("IK solution misses the line", miss_m=round(miss, 6))
    step = np.abs(q - previous)
    if float(np.max(step)) > MAX_JOINT_STEP_RAD:
        joint = config.names[int(np.argmax(step))]
        raise _Refused(
            "joint jump between neighbouring waypoints",
            joint=joint,
            step_rad=round(float(np.max(step)), 4),
            max_step_rad=MAX_JOINT_STEP_RAD,
        )
    return q
