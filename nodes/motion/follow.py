"""Follow a joint trajectory on the data plane until it settles, halts, times out or loses state.

The follower streams interpolated position targets at a fixed control period and decides
completion from *measured* state only: the robot must be within tolerance of the goal and
at rest for a few consecutive fresh samples. It never reports completion on a silent
robot: if ``joint_state`` stops arriving for ``state_timeout_s`` it ends ``STATE_LOST``.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from doraforge.nodes.motion.plane import JointPlane, JointSample
from doraforge.nodes.motion.trajectory import JointTrajectory
from doraforge.nodes.timing import Timing

type ProgressSink = Callable[[float], Awaitable[None]]


class Outcome(enum.StrEnum):
    """How a follow ended."""

    REACHED = "reached"
    HALTED = "halted"
    STATE_LOST = "state_lost"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class FollowLimits:
    """Control period, completion and failure thresholds of one follower."""

    period_s: float = 0.02
    settle_velocity: float = 0.02  # joint units per second
    settle_samples: int = 5
    settle_timeout_s: float = 3.0  # allowed beyond the trajectory's own duration
    state_timeout_s: float = 1.0
    progress_interval_s: float = 0.1
    hold_timeout_s: float = 1.5  # how long a cancelled motion may take to come to rest


@dataclass(frozen=True)
class FollowReport:
    """The outcome, the last measured sample, and seconds since the follow began."""

    outcome: Outcome
    sample: JointSample | None
    elapsed_s: float


class SettleCounter:
    """Counts consecutive *fresh* samples that are at rest (and within tolerance)."""

    def __init__(self, limits: FollowLimits, goal: np.ndarray, tolerance: np.ndarray | None):
        self._limits = limits
        self._goal = goal
        self._tolerance = tolerance
        self._last_count = -1
        self._streak = 0

    def settled(self, sample: JointSample) -> bool:
        """Feed the newest sample; true once enough consecutive ones qualify."""
        if sample.count == self._last_count:
            return self._streak >= self._limits.settle_samples
        self._last_count = sample.count
        at_rest = bool(
            np.max(np.abs(sample.velocities), initial=0.0) < self._limits.settle_velocity
        )
        in_band = self._tolerance is None or bool(
            np.all(np.abs(sample.positions - self._goal) <= self._tolerance)
        )
        self._streak = self._streak + 1 if at_rest and in_band else 0
        return self._streak >= self._limits.settle_samples


class Follower:
    """Drives one :class:`JointPlane` through trajectories under :class:`FollowLimits`."""

    def __init__(self, plane: JointPlane, timing: Timing, limits: FollowLimits) -> None:
        self.plane = plane
        self.timing = timing
        self.limits = limits

    def fresh_sample(self) -> JointSample | None:
        """The newest sample if it is younger than the state timeout, else ``None``."""
        if self.plane.age() > self.limits.state_timeout_s:
            return None
        return self.plane.latest()

    async def follow(
        self,
        trajectory: JointTrajectory,
        tolerance: np.ndarray | None,
        halt: asyncio.Event,
        progress: ProgressSink,
    ) -> FollowReport:
        """Stream ``trajectory`` and wait for it to settle; ``tolerance=None`` means rest only."""
        limits, timing = self.limits, self.timing
        settle = SettleCounter(limits, trajectory.goal, tolerance)
        begin = timing.now()
        next_report = begin
        deadline = trajectory.duration + limits.settle_timeout_s
        while True:
            elapsed = timing.now() - begin
            sample = self.fresh_sample()
            if halt.is_set():
                return FollowReport(Outcome.HALTED, self.plane.latest(), elapsed)
            if sample is None:
                return FollowReport(Outcome.STATE_LOST, self.plane.latest(), elapsed)
            self.plane.command(trajectory.at(elapsed))
            if elapsed >= trajectory.duration and settle.settled(sample):
                return FollowReport(Outcome.REACHED, sample, elapsed)
            if elapsed > deadline:
                return FollowReport(Outcome.TIMEOUT, sample, elapsed)
            if timing.now() >= next_report:
                # 0.99 at most until measured completion: the path's clock is not the robot.
                await progress(min(0.99, round(trajectory.fraction(elapsed), 4)))
                next_report = timing.now() + limits.progress_interval_s
            await timing.pause(limits.period_s, halt)

    async def hold(self) -> JointSample | None:
        """Command the measured position and wait (bounded) for the robot to come to rest."""
        sample = self.fresh_sample()
        if sample is None:
            return self.plane.latest()
        self.plane.command(sample.positions)
        settle = SettleCounter(self.limits, sample.positions, None)
        never = asyncio.Event()
        begin = self.timing.now()
        while self.timing.now() - begin < self.limits.hold_timeout_s:
            current = self.fresh_sample()
            if current is None or settle.settled(current):
                break
            await self.timing.pause(self.limits.period_s, never)
        return self.plane.latest()
