"""The world node's data plane: joint commands in; joint state and camera frames out."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
from forge_msgs import JointCommand

from doraforge.nodes.dataplane import Publish
from doraforge.nodes.robot.contract import ARM_COMMAND, GRIPPER_COMMAND
from doraforge.nodes.world.simulation import Simulation

log = logging.getLogger(__name__)

COMMAND_INPUTS = frozenset({ARM_COMMAND, GRIPPER_COMMAND})


def arm_command_inputs(arms: Iterable[str]) -> frozenset[str]:
    """The command inputs of a robot's further arms: ``arm_<arm>_command`` and
    ``gripper_<arm>_command`` (the primary arm's are ``arm_command``, ``gripper_command``)."""
    return frozenset(f"{part}_{arm}_command" for arm in arms for part in ("arm", "gripper"))


class WorldDataPlane:
    """Feeds position commands to the simulation and starts it once it can publish.

    ``extra_inputs`` are the command inputs of a multi-arm robot's further arms
    (:func:`arm_command_inputs`); every command input feeds the same sparse targets."""

    def __init__(self, simulation: Simulation, extra_inputs: frozenset[str] = frozenset()) -> None:
        self._simulation = simulation
        self._inputs = COMMAND_INPUTS | extra_inputs
        self.rejected = 0

    @property
    def inputs(self) -> frozenset[str]:
        return self._inputs

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
