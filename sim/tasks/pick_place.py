"""The pick-and-place task: a seeded cube pose on the table, the cube judged in the zone.

:class:`PickPlace` draws the cube's start from a :class:`CubeRegion` and reports two
predicates, pure functions of a :class:`~doraforge.sim.state.SceneState`:
``cube_in_target_and_resting`` and ``cube_lifted`` (bottom face above ``lift_height``).
The scene must hold a free body ``cube`` and a target zone (the shipped cell does).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from doraforge.sim.state import Quaternion, SceneState
from doraforge.sim.task import Predicate, Task

if TYPE_CHECKING:
    from doraforge.sim.world import World

CUBE = "cube"
DEFAULT_SPEED_TOL = 0.01  # m/s: below this a cube on the table counts as resting
DEFAULT_LIFT_HEIGHT = 0.05  # m: "lifted" means the cube's bottom face at least this high


@dataclass(frozen=True)
class CubeRegion:
    """Where an episode may put the cube: x/y ranges in the base frame (m), yaw range (rad)."""

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

    def quaternion_wxyz(self) -> Quaternion:
        return (math.cos(self.yaw / 2), 0.0, 0.0, math.sin(self.yaw / 2))


def draw_cube_pose(region: CubeRegion, rng: np.random.Generator) -> CubePose:
    """Draw a pose uniformly from ``region``: x, then y, then yaw from ``rng``."""
    return CubePose(
        x=float(rng.uniform(*region.x)),
        y=float(rng.uniform(*region.y)),
        yaw=float(rng.uniform(*region.yaw)),
    )


def cube_in_target_and_resting(state: SceneState, speed_tol: float = DEFAULT_SPEED_TOL) -> bool:
    """True when the cube's centre lies inside the target zone box and it moves slower than
    ``speed_tol`` (m/s)."""
    cube = state.object(CUBE)
    return state.target_zone.contains(cube.position) and cube.speed < speed_tol


def cube_lifted(state: SceneState, height: float) -> bool:
    """True when the cube's bottom face is more than ``height`` metres above the table top
    (z = 0 in the base frame)."""
    cube = state.object(CUBE)
    # ``size`` is the full edge lengths; an upright cube's bottom is half an edge below.
    return cube.position[2] - cube.size[2] / 2.0 > height


class PickPlace(Task):
    """Pick the cube where the episode put it and leave it resting in the target zone.

    ``region`` bounds the drawn cube pose; without one the cell's own region is used
    (:attr:`World.cube_region <doraforge.sim.world.World.cube_region>`, fitted to its
    robot's reach), else the default :class:`CubeRegion`. ``lift_height`` (m) and
    ``speed_tol`` (m/s) parameterise the predicates.
    """

    def __init__(
        self,
        region: CubeRegion | None = None,
        *,
        lift_height: float = DEFAULT_LIFT_HEIGHT,
        speed_tol: float = DEFAULT_SPEED_TOL,
    ) -> None:
        self._given = region
        self.region = region or CubeRegion()
        self._predicates: Mapping[str, Predicate] = MappingProxyType(
            {
                "cube_in_target_and_resting": partial(
                    cube_in_target_and_resting, speed_tol=speed_tol
                ),
                "cube_lifted": partial(cube_lifted, height=lift_height),
            }
        )

    @property
    def predicates(self) -> Mapping[str, Predicate]:
        return self._predicates

    def initialize_episode(self, physics: World, rng: np.random.Generator) -> None:
        """Set the cube upright on the table at a pose drawn from the region, at rest."""
        pose = draw_cube_pose(self._region_for(physics), rng)
        half_height = physics.scene_state().object(CUBE).size[2] / 2.0
        physics.set_free_body_pose(CUBE, (pose.x, pose.y, half_height), pose.quaternion_wxyz())

    def _region_for(self, physics: World) -> CubeRegion:
        cell = physics.cube_region
        if self._given is not None or cell is None:
            return self.region
        x, y = cell
        return CubeRegion(x=x, y=y, yaw=physics.cube_yaw or self.region.yaw)
