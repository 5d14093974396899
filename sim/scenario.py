"""Seeded scenario setup and success predicates for the pick-and-place cell.

Kept apart from the physics (``sim.world``) as in dm_control's Physics/Task split: a
:class:`CubeRegion` says where the cube may start, :func:`draw_cube_pose` draws from it with a
seeded generator, and the predicates are plain functions over a ``scene_state`` dict, so the
same checks run on the simulator, in the demo over HTTP, and against a real robot's report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_SPEED_TOL = 0.01  # m/s: below this a cube on the table counts as resting


@dataclass(frozen=True)
class CubeRegion:
    """Where a reset may put the cube: x/y ranges in the base frame (m), yaw range (rad)."""

    x: tuple[float, float] = (0.28, 0.42)
    y: tuple[float, float] = (0.08, 0.22)
    yaw: tuple[float, float] = (-math.pi / 4, math.pi / 4)

    def __post_init__(self) -> None:
        for name in ("x", "y", "yaw"):
            low, high = getattr(self, name)
            if not (math.isfinite(low) and math.isfinite(high) and low <= high):
                raise ValueError(f"CubeRegion.{name} must be a finite (low, high) with low <= high")


@dataclass(frozen=True)
class CubePose:
    """A drawn cube pose: centre ``x, y`` (m, base frame) and ``yaw`` about z (rad)."""

    x: float
    y: float
    yaw: float

    def quaternion_wxyz(self) -> tuple[float, float, float, float]:
        return (math.cos(self.yaw / 2), 0.0, 0.0, math.sin(self.yaw / 2))


def draw_cube_pose(region: CubeRegion, seed: int) -> CubePose:
    """Draw a cube pose uniformly from ``region``; the same seed always gives the same pose."""
    rng = np.random.default_rng(seed)
    return CubePose(
        x=float(rng.uniform(*region.x)),
        y=float(rng.uniform(*region.y)),
        yaw=float(rng.uniform(*region.yaw)),
    )


def _vec(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=float)


def cube_in_target_and_resting(
    state: Mapping[str, Any], speed_tol: float = DEFAULT_SPEED_TOL
) -> bool:
    """True when the cube's centre lies inside the target zone box and it moves slower than
    ``speed_tol`` (m/s). ``state`` is a ``scene_state`` dict (positions in the base frame)."""
    cube = state["objects"]["cube"]
    zone = state["target_zone"]
    offset = np.abs(_vec(cube["position"]) - _vec(zone["center"]))
    inside = bool(np.all(offset <= _vec(zone["half_extents"])))
    speed = float(np.linalg.norm(_vec(cube["linear_velocity"])))
    return inside and speed < speed_tol


def cube_lifted(state: Mapping[str, Any], height: float) -> bool:
    """True when the cube's bottom face is more than ``height`` metres above the table top
    (z = 0 in the base frame)."""
    cube = state["objects"]["cube"]
    bottom = float(cube["position"][2]) - _half_height(cube["size"])
    return bottom > height


def _half_height(size: Sequence[float]) -> float:
    # ``size`` is the cube's full edge lengths; an upright cube's bottom is half an edge below.
    return float(size[2]) / 2.0
