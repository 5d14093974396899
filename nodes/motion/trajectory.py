"""Minimum-jerk joint-space trajectories, timed to respect per-joint velocity limits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Peak speed of a minimum-jerk profile relative to the mean speed (distance / duration).
PEAK_TO_MEAN_SPEED = 1.875
#: Even a tiny correction takes this long, so the command never steps.
MIN_DURATION_S = 0.2


def min_jerk(s: float) -> float:
    """Normalised minimum-jerk position at normalised time ``s`` in [0, 1]."""
    s = min(1.0, max(0.0, s))
    return s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)


def duration_for(distance: np.ndarray, max_velocity: np.ndarray) -> float:
    """Shortest minimum-jerk duration whose peak speed stays within ``max_velocity``."""
    per_joint = PEAK_TO_MEAN_SPEED * np.abs(distance) / max_velocity
    return max(MIN_DURATION_S, float(np.max(per_joint, initial=0.0)))


@dataclass(frozen=True)
class JointTrajectory:
    """A straight joint-space path from ``start`` to ``goal`` over ``duration`` seconds."""

    start: np.ndarray
    goal: np.ndarray
    duration: float

    @classmethod
    def plan(
        cls,
        start: np.ndarray,
        goal: np.ndarray,
        max_velocity: np.ndarray,
        *,
        min_duration: float = MIN_DURATION_S,
    ) -> JointTrajectory:
        """Time the path so no joint's peak speed exceeds its ``max_velocity``."""
        duration = max(min_duration, duration_for(goal - start, max_velocity))
        return cls(start=start.copy(), goal=goal.copy(), duration=duration)

    def at(self, t: float) -> np.ndarray:
        """Commanded positions ``t`` seconds after the start."""
        positions: np.ndarray = self.start + (self.goal - self.start) * min_jerk(t / self.duration)
        return positions

    def fraction(self, t: float) -> float:
        """Share of the path's time elapsed at ``t``, in [0, 1]."""
        return min(1.0, max(0.0, t / self.duration))


@dataclass(frozen=True)
class WaypointTrajectory(JointTrajectory):
    """A joint path through ``waypoints`` (rows; first = ``start``, last = ``goal``).

    One minimum-jerk profile runs over the whole path's parameter and the command is
    interpolated linearly between neighbouring waypoints, so a path sampled evenly in
    Cartesian space is also traversed at an even Cartesian pace (no stop per waypoint).
    """

    waypoints: np.ndarray

    @classmethod
    def through(
        cls,
        waypoints: np.ndarray,
        max_velocity: np.ndarray,
        *,
        min_duration: float = MIN_DURATION_S,
    ) -> WaypointTrajectory:
        """Time the path so no joint's peak speed on any segment exceeds ``max_velocity``."""
        points = np.array(waypoints, dtype=float)
        segments = len(points) - 1
        # With s = min_jerk(t / T) over [0, 1] and ``segments`` equal parameter steps, a
        # joint moves at most PEAK_TO_MEAN_SPEED * |step| * segments / T on its largest step.
        largest = np.max(np.abs(np.diff(points, axis=0)), axis=0, initial=0.0)
        duration = max(min_duration, duration_for(largest * max(segments, 1), max_velocity))
        return cls(
            start=points[0].copy(), goal=points[-1].copy(), duration=duration, waypoints=points
        )

    def at(self, t: float) -> np.ndarray:
        """Commanded positions ``t`` seconds after the start, on the waypoint polyline."""
        segments = len(self.waypoints) - 1
        if segments == 0:
            return self.goal.copy()
        s = min_jerk(t / self.duration) * segments
        index = min(int(s), segments - 1)
        low, high = self.waypoints[index], self.waypoints[index + 1]
        positions: np.ndarray = low + (high - low) * (s - index)
        return positions
