"""The joint-limit and workspace rules, once for the robot profile and the arm's config.

A profile is validated when it is read and the arm builds its own typed config from it
(tests build that config directly), so both hold the same rules and say the same words.
Each check raises ``ValueError``, which pydantic reports under the field being validated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class JointLimits(Protocol):
    """A joint's name, position limits (rad) and speed limit (rad/s)."""

    @property
    def name(self) -> str: ...

    @property
    def lower(self) -> float: ...

    @property
    def upper(self) -> float: ...

    @property
    def max_velocity(self) -> float: ...


def check_joint(joint: JointLimits) -> None:
    """Refuse limits that leave no range to move in, or no speed to move at."""
    if not joint.lower < joint.upper:
        raise ValueError(f"joint {joint.name!r}: lower must be below upper")
    if not joint.max_velocity > 0:
        raise ValueError(f"joint {joint.name!r}: max_velocity must be positive")


def check_home(joints: Sequence[JointLimits], home: Sequence[float]) -> None:
    """Refuse a home pose that is not one in-limits position per joint."""
    if len(home) != len(joints):
        raise ValueError(f"home must hold one position per arm joint ({len(joints)})")
    for joint, value in zip(joints, home, strict=True):
        if not joint.lower <= value <= joint.upper:
            raise ValueError(f"home position of {joint.name!r} is outside its limits")


def check_box(low: Sequence[float], high: Sequence[float]) -> None:
    """Refuse a workspace box that is empty on some axis."""
    if any(lo >= hi for lo, hi in zip(low, high, strict=True)):
        raise ValueError("workspace min must be below max on every axis")
