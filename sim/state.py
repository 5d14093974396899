"""The typed scene state: what the physics measures, what a task's predicates judge.

A :class:`SceneState` is a frozen value in the robot base frame (metres, seconds,
quaternions (w, x, y, z)). :class:`~doraforge.sim.world.World` produces it; a task's
predicates are pure functions of it; the world node serialises it to the ``scene_state``
JSON of the ``world`` endpoint. Nothing here touches MuJoCo.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

type Vec3 = tuple[float, float, float]
type Quaternion = tuple[float, float, float, float]


def vec3(values: Iterable[float]) -> Vec3:
    """Three floats from ``values``; raises ``ValueError`` for another length."""
    x, y, z = _floats(values, 3)
    return (x, y, z)


def quaternion(values: Iterable[float]) -> Quaternion:
    """Four floats (w, x, y, z) from ``values``; raises ``ValueError`` for another length."""
    w, x, y, z = _floats(values, 4)
    return (w, x, y, z)


def _floats(values: Iterable[float], length: int) -> list[float]:
    # No finiteness check: a diverging physics must still be reportable; the world stops
    # stepping (PhysicsDiverged) and the node reports itself unavailable instead.
    floats = [float(value) for value in values]
    if len(floats) != length:
        raise ValueError(f"expected {length} values, got {len(floats)}")
    return floats


@dataclass(frozen=True)
class ObjectState:
    """A rigid object: centre ``position`` (m), ``orientation_wxyz``, ``linear_velocity``
    of its centre (m/s) and ``size``, its full edge lengths (m)."""

    position: Vec3
    orientation_wxyz: Quaternion
    linear_velocity: Vec3
    size: Vec3

    @property
    def speed(self) -> float:
        """Magnitude of the linear velocity (m/s)."""
        return math.hypot(*self.linear_velocity)


@dataclass(frozen=True)
class Zone:
    """An axis-aligned box: ``center`` and ``half_extents`` (m)."""

    center: Vec3
    half_extents: Vec3

    def contains(self, point: Vec3) -> bool:
        """True when ``point`` lies inside the box or on its faces."""
        return all(
            abs(p - c) <= h for p, c, h in zip(point, self.center, self.half_extents, strict=True)
        )


@dataclass(frozen=True)
class GripperState:
    """The gripper: ``width`` between the pads (m), its data-plane ``joint_positions`` by
    name (read-only) and the tool-centre ``tool_position`` (m)."""

    width: float
    joint_positions: Mapping[str, float] = field(hash=False)
    tool_position: Vec3

    def __post_init__(self) -> None:
        frozen = MappingProxyType({str(k): float(v) for k, v in self.joint_positions.items()})
        object.__setattr__(self, "joint_positions", frozen)


@dataclass(frozen=True)
class SceneState:
    """One snapshot of the cell.

    ``objects`` by name (read-only; the pick-and-place cell reports ``cube``),
    ``target_zone``, ``gripper``, ``sim_time`` (s since the physics was reset) and ``seed``,
    the seed of the episode whose scenario is in the scene (``None`` when no task drew one).
    """

    objects: Mapping[str, ObjectState] = field(hash=False)
    target_zone: Zone
    gripper: GripperState
    sim_time: float
    seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "objects", MappingProxyType(dict(self.objects)))

    def object(self, name: str) -> ObjectState:
        """The object called ``name``; raises ``KeyError`` naming the known objects."""
        try:
            return self.objects[name]
        except KeyError:
            raise KeyError(
                f"no object {name!r} in the scene; known: {sorted(self.objects)}"
            ) from None
