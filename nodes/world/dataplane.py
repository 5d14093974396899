"""The world node's data plane: joint commands in; joint state and camera frames out."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from forge_msgs import JointCommand

from doraforge.nodes.dataplane import Publish
from doraforge.nodes.robot.contract import ARM_COMMAND, GRIPPER_COMMAND
from doraforge.nodes.world.simulation import Simulation

log = logging.getLogger(__name__)

COMMAND_INPUTS = frozenset({ARM_COMMAND, GRIPPER_COMMAND})


class WorldDataPlane:
    """Feeds position commands to the simulation and starts it once it can publish."""

    def __init__(self, simulation: Simulation) -> None:
        self._simulation = simulation
        self.rejected = 0

    @property
    def inputs(self) -> frozenset[str]:
        return COMMAND_INPUTS

    def attach(self, publish: Publish) -> None:
        self._simulation.start(publish)

    def on_input(self, input_id: str, value: pa.Array, metadata: Mapping[str, Any]) -> None:
        try:
            command = JointCommand.from_arrow(value)
        except (ValueError, TypeError) as exc:
            self.rejected += 1
            log.warning("dropping malformed %s: %s", input_id, exc)
            return
        if command.mode != "position" or len(command.position) != len(command.name):
            self.rejected += 1
            log.warning("dropping %s: only full position commands are supported", input_id)
            return
        self._simulation.command(list(command.name), list(command.position))

    def close(self) -> None:
        self._simulation.stop()
