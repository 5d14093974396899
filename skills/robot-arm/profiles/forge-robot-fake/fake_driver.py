"""A forge-robot driver on a fake backend: doraforge's arm and gripper drive it unchanged.

The robot-arm skill's ``forge-robot-fake`` profile (``dataflow.yml`` beside this file) and
``examples/forge_robot.yml`` run this file as their ``robot`` node in place of the simulated
world. It is a ``forge_robot.BaseRobotDriver`` run through ``forge_robot.run_dora_robot_node``:
on each ``tick`` input it publishes ``state`` (a ``forge_msgs.JointState``), and every
``action/<source>`` input is a sparse ``forge_msgs.JointCommand`` that moves only the joints
it names. Any other forge-robot driver node (a real arm) takes its place by editing the
node's ``path``/``args`` in the dataflow; nothing in doraforge changes. The bundle carries
this file because a skill installed from an archive runs only what it ships or what is
installed on the host.

The fake backend keeps joints in memory: each joint moves toward its commanded position at
its actuator's ``max_velocity``, clipped to its position limits by
``forge_robot.clip_and_validate_command``. Joint names and limits are those of the sim arm
profile (``nodes/robot/profiles/sim_arm.yml``), so the arm and gripper nodes run with their
default profile.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from forge_msgs import JointCommand, JointState

# forge-robot 2.0 ships no type information (no py.typed).
from forge_robot import (  # type: ignore[import-untyped]
    ActuatorSpec,
    BaseRobotDriver,
    clip_and_validate_command,
    run_dora_robot_node,
    specs_by_name,
)

ACTUATORS = (
    ActuatorSpec("shoulder_pan", "revolute", min_position=-2.9, max_position=2.9, max_velocity=1.5),
    ActuatorSpec(
        "shoulder_lift", "revolute", min_position=-2.0, max_position=2.0, max_velocity=1.5
    ),
    ActuatorSpec("elbow", "revolute", min_position=-2.6, max_position=2.6, max_velocity=1.8),
    ActuatorSpec("forearm_roll", "revolute", min_position=-2.9, max_position=2.9, max_velocity=2.5),
    ActuatorSpec("wrist_pitch", "revolute", min_position=-2.1, max_position=2.1, max_velocity=2.5),
    ActuatorSpec("wrist_roll", "revolute", min_position=-6.28, max_position=6.28, max_velocity=3.0),
    # One finger's opening (m); the other finger mirrors it.
    ActuatorSpec("gripper", "prismatic", min_position=0.0, max_position=0.04, max_velocity=0.1),
)
#: The sim arm's home pose, gripper open: where the fake robot starts.
HOME = (0.0, 0.0, 1.92, 0.0, 1.22, 0.0, 0.04)


class FakeArmDriver(BaseRobotDriver):  # type: ignore[misc]
    """Joints that chase their commanded positions at bounded speed, in memory.

    ``clock`` is a monotonic clock in seconds (injected so tests can drive time). State is
    integrated lazily on each read, so the joint motion does not depend on the tick rate.
    """

    def __init__(
        self,
        actuators: tuple[ActuatorSpec, ...] = ACTUATORS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._specs = specs_by_name(actuators)
        self._order = [spec.name for spec in actuators]
        self._clock = clock
        self._lock = threading.Lock()
        self._position = dict(zip(self._order, HOME, strict=True))
        self._target = dict(self._position)
        self._velocity = dict.fromkeys(self._order, 0.0)
        self._last = clock()
        self.connected = False

    @property
    def joint_order(self) -> list[str]:
        return list(self._order)

    def connect(self) -> None:
        self.connected = True

    def disconnect(self) -> None:
        self.connected = False

    def set_command(self, command: JointCommand) -> None:
        """Retarget the joints ``command`` names (limits applied); the others keep theirs."""
        safe = clip_and_validate_command(command, self._specs)
        if safe.mode != "position" or len(safe.position) != len(safe.name):
            return  # this fake backend is position-controlled only
        with self._lock:
            self._advance()
            self._target.update(zip(safe.name, safe.position, strict=True))

    def get_state(self) -> JointState:
        with self._lock:
            self._advance()
            return JointState(
                name=list(self._order),
                position=[self._position[name] for name in self._order],
                velocity=[self._velocity[name] for name in self._order],
                effort=[0.0] * len(self._order),
            )

    def _advance(self) -> None:
        now = self._clock()
        dt, self._last = max(0.0, now - self._last), now
        if dt == 0.0:
            return
        for name in self._order:
            limit = self._specs[name].max_velocity or float("inf")
            error = self._target[name] - self._position[name]
            step = max(-limit * dt, min(limit * dt, error))
            self._position[name] += step
            self._velocity[name] = step / dt


def main() -> int:
    """Run the fake driver as a standard forge-robot Dora node until Dora stops it."""
    driver = FakeArmDriver()
    driver.connect()
    return int(run_dora_robot_node(driver))


if __name__ == "__main__":
    sys.exit(main())
