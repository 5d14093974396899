"""A fake robot on the joint data plane, and time that only moves when the controller waits.

:class:`FakeRobot` integrates commanded positions toward their targets with a first-order
lag each tick and reports ``joint_state`` through the plane's real ``on_input``. A joint
can be blocked at a position (an object between the fingers, an arm against a wall).
:class:`TickTiming` advances a fake clock by each pause and steps the robot meanwhile, so
controllers run at full speed with no real sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from forge_msgs import JointCommand, JointState

from doraforge.nodes.dataplane import DataPlane

TICK_S = 0.01  # the fake robot's state rate: 100 Hz, as the world publishes
LAG_S = 0.04  # position-servo time constant


class FakeRobot:
    """Joints that chase their last commanded position; records every command."""

    def __init__(self, names: Sequence[str], start: Sequence[float] | np.ndarray) -> None:
        self.names = list(names)
        self.q = np.array(start, dtype=float)
        self.velocity = np.zeros_like(self.q)
        self.target = self.q.copy()
        self.commands: list[JointCommand] = []
        self.blocks: dict[str, tuple[float, int]] = {}  # joint -> (position, side)
        self.alive = True
        self.planes: list[DataPlane] = []

    def connect(self, plane: DataPlane) -> None:
        self.planes.append(plane)
        plane.attach(self.publish)

    def publish(self, output_id: str, value: pa.Array, metadata: Mapping[str, Any] | None) -> None:
        assert output_id == "joint_command"
        command = JointCommand.from_arrow(value)
        assert command.mode == "position"
        self.commands.append(command)
        for name, position in zip(command.name, command.position, strict=True):
            self.target[self.names.index(name)] = position

    def block(self, joint: str, position: float, side: int) -> None:
        """Stop ``joint`` from passing ``position`` while moving in direction ``side``."""
        self.blocks[joint] = (position, side)

    def step(self, dt: float) -> None:
        before = self.q.copy()
        self.q += (self.target - self.q) * min(1.0, dt / LAG_S)
        for joint, (position, side) in self.blocks.items():
            i = self.names.index(joint)
            if (self.q[i] - position) * side > 0:
                self.q[i] = position
        self.velocity = (self.q - before) / dt
        self.report()

    def report(self) -> None:
        if not self.alive:
            return
        state = JointState(
            name=self.names, position=self.q.tolist(), velocity=self.velocity.tolist()
        )
        value = state.to_arrow().to_struct_array()
        for plane in self.planes:  # every provider on the topic sees the same state
            plane.on_input("joint_state", value, {})


class TickTiming:
    """Fake monotonic time; each pause steps the robot through the paused interval."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.robots: list[FakeRobot] = []
        self._carry = 0.0

    def now(self) -> float:
        return self.clock

    async def pause(self, seconds: float, wake: asyncio.Event) -> None:
        if not wake.is_set():
            self._carry += max(seconds, 1e-3)
            while self._carry >= TICK_S - 1e-12:
                self._carry -= TICK_S
                self.clock += TICK_S
                for robot in self.robots:
                    robot.step(TICK_S)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        """Let time pass with no controller running (state keeps flowing)."""
        for _ in range(round(seconds / TICK_S)):
            self.clock += TICK_S
            for robot in self.robots:
                robot.step(TICK_S)
