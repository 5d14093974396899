"""The joint data plane of a motion provider: ``joint_state`` in, ``joint_command`` out.

:class:`JointPlane` implements :class:`~nodes.dataplane.DataPlane`. It keeps only the
newest measured state of the joints it tracks (in its own order, with the controller's
receipt time) and publishes sparse position commands for those joints.

Joint state arrives at the robot's rate (100 Hz in simulation) while the controller looks
at it only when a tool runs: an arrival is kept as it came, on the Dora event thread,
and decoded when :meth:`JointPlane.latest` or :meth:`JointPlane.age` asks. An idle arm
therefore pays neither the decoding nor a wake of its event loop per sample.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from forge_msgs import JointCommand, JointState

from doraforge.nodes.dataplane import Publish
from doraforge.nodes.robot.contract import JOINT_COMMAND, JOINT_STATE

logger = logging.getLogger(__name__)

STATE_INPUT = JOINT_STATE
COMMAND_OUTPUT = JOINT_COMMAND


@dataclass(frozen=True)
class JointSample:
    """One measured state of the tracked joints, in the plane's joint order.

    ``received_at`` is the controller's monotonic clock at receipt (the robot's own clock
    is never compared with ours); ``count`` increases by one per accepted sample.
    """

    positions: np.ndarray
    velocities: np.ndarray
    received_at: float
    count: int


@dataclass(frozen=True, slots=True)
class _Arrival:
    """One ``joint_state`` input as it came, not yet decoded."""

    value: pa.Array
    received_at: float


class JointPlane:
    """Tracks the newest state of ``joints`` and publishes their position commands."""

    def __init__(
        self,
        joints: Sequence[str],
        clock: Callable[[], float],
        *,
        state_input: str = STATE_INPUT,
        command_output: str = COMMAND_OUTPUT,
    ) -> None:
        self.joints: tuple[str, ...] = tuple(joints)
        self._clock = clock
        self._state_input = state_input
        self._command_output = command_output
        self._publish: Publish | None = None
        self._latest: JointSample | None = None
        # Written only by the Dora event thread, read by the loop: one reference swap each.
        self._arrival: _Arrival | None = None
        self._decoded: _Arrival | None = None
        self._index_cache: tuple[tuple[str, ...], np.ndarray | None] = ((), None)
        self._warned = False

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset((self._state_input,))

    @property
    def event_thread_inputs(self) -> frozenset[str]:
        """``joint_state`` is taken on the Dora event thread (one reference swap)."""
        return self.inputs

    def attach(self, publish: Publish) -> None:
        self._publish = publish

    def close(self) -> None:
        self._publish = None

    def on_input(self, input_id: str, value: pa.Array, metadata: Mapping[str, Any]) -> None:
        """Keep the newest ``joint_state`` as it came (any thread; decoded on demand)."""
        if input_id == self._state_input:
            self._arrival = _Arrival(value, self._clock())

    def update(self, state: JointState, received_at: float | None = None) -> None:
        """Record ``state`` (received at ``received_at``, default now) if it names every
        tracked joint with finite values."""
        index = self._indices(tuple(state.name))
        if index is None or len(state.position) != len(state.name):
            self._warn_once(f"joint_state lacks some of {self.joints}; dropped")
            return
        positions = np.asarray(state.position, dtype=float)[index]
        now = self._clock() if received_at is None else received_at
        velocities = self._velocities(state, index, positions, now)
        if not (np.all(np.isfinite(positions)) and np.all(np.isfinite(velocities))):
            self._warn_once("non-finite joint_state dropped")
            return
        count = self._latest.count + 1 if self._latest is not None else 1
        self._latest = JointSample(positions, velocities, now, count)

    def _velocities(
        self, state: JointState, index: np.ndarray, positions: np.ndarray, now: float
    ) -> np.ndarray:
        velocities: np.ndarray
        if len(state.velocity) == len(state.name):
            velocities = np.asarray(state.velocity, dtype=float)[index]
            return velocities
        previous = self._latest
        # A robot that reports no velocity still settles: difference successive samples.
        if previous is None or now <= previous.received_at:
            return np.zeros_like(positions)
        velocities = (positions - previous.positions) / (now - previous.received_at)
        return velocities

    def _indices(self, names: tuple[str, ...]) -> np.ndarray | None:
        cached_names, cached = self._index_cache
        if names == cached_names:
            return cached
        where = {name: i for i, name in enumerate(names)}
        index = (
            np.array([where[j] for j in self.joints], dtype=int)
            if all(j in where for j in self.joints)
            else None
        )
        self._index_cache = (names, index)
        return index

    def latest(self) -> JointSample | None:
        """Return the newest accepted sample, or ``None`` before the first one."""
        self._decode_arrival()
        return self._latest

    def age(self) -> float:
        """Seconds since the newest sample arrived; infinite before the first one."""
        self._decode_arrival()
        if self._latest is None:
            return math.inf
        return max(0.0, self._clock() - self._latest.received_at)

    def command(self, positions: np.ndarray) -> None:
        """Publish a position command for every tracked joint (sparse by name)."""
        if self._publish is None:
            logger.warning("joint command dropped: the data plane is not attached")
            return
        message = JointCommand(
            name=list(self.joints), mode="position", position=[float(p) for p in positions]
        )
        self._publish(self._command_output, message.to_arrow(), None)

    def _decode_arrival(self) -> None:
        arrival = self._arrival
        if arrival is None or arrival is self._decoded:
            return
        self._decoded = arrival
        try:
            state = JointState.from_arrow(arrival.value)
        except (ValueError, TypeError, KeyError, pa.ArrowException):
            self._warn_once("undecodable joint_state dropped")
            return
        self.update(state, arrival.received_at)

    def _warn_once(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            logger.warning(message)
