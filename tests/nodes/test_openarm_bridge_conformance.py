"""The OpenArm bridge with ``dora-openarm-dummy`` behind it, run through the robot-adapter
conformance suite (``tests/nodes/test_robot_contract.py``).

The adapter is the pair as a dataflow wires it: the bridge (``nodes/bridges/openarm.py``)
and the dummy's own, unchanged ``main()`` from the installed package, running in its thread
on a scripted stand-in for ``dora.Node`` (events in, outputs out; nothing else of Dora).
Every ``request_position`` and ``move_position`` the bridge sends reaches the dummy, and
every ``position`` the dummy answers reaches the bridge. The suite's generic checks are
imported and run here on this adapter; its sparse-command and clamp checks name the sim
arm's joints, so they are restated for the profile's joints with the suite's own helpers.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import dora_openarm_dummy.main as dummy_main
import pyarrow as pa
import pytest
from forge_msgs import JointCommand, JointState

from doraforge.nodes.bridges.openarm import (
    ARM_COMMAND,
    JOINT_STATE,
    MOVE_POSITION,
    POSITION,
    REQUEST_POSITION,
    ROBOT_STATUS,
    STAMP_NS,
    TICK,
    OpenArmBridge,
    joints_from_profile,
)
from doraforge.nodes.robot import contract
from doraforge.nodes.robot.contract import clamp, merge_command
from doraforge.nodes.robot.profile import RobotProfile, load_profile
from tests.nodes.test_robot_contract import (
    TOLERANCE,
    at,
    by_name,
    held_targets,
    settle_at,
    test_state_is_named_joint_state_rows_that_pass_forge_robots_validator,
    test_state_stamps_are_nanoseconds_the_stale_rule_can_judge,
)
from tests.support.clock import FakeClock

PROFILE = Path(__file__).resolve().parents[2] / "nodes" / "robot" / "profiles" / "openarm_dummy.yml"
TICK_S = 1.0 / contract.STATE_HZ
MAX_TICKS = 200
REPLY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0

__all__ = [
    "test_state_is_named_joint_state_rows_that_pass_forge_robots_validator",
    "test_state_stamps_are_nanoseconds_the_stale_rule_can_judge",
]


class ScriptedNode:
    """What ``dora_openarm_dummy.main`` uses of ``dora.Node``: iteration and ``send_output``."""

    def __init__(self) -> None:
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.outputs: queue.Queue[tuple[str, pa.Array, Mapping[str, Any]]] = queue.Queue()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while (event := self.events.get()) is not None:
            yield event

    def send_output(self, output_id: str, data: pa.Array, metadata: Any = None) -> None:
        self.outputs.put((output_id, data, dict(metadata or {})))


class BridgedDummy:
    """The bridge and the real dummy, wired as ``dataflows/openarm-dummy.yml`` wires them.

    The bridge's staleness clock is a fake one advanced one state period per tick; the
    stamps are the dummy's own (``time.time_ns()``), so ``now_ns`` is the wall clock.
    """

    state_output = contract.JOINT_STATE

    def __init__(self, profile: RobotProfile) -> None:
        joints = joints_from_profile(profile)
        self.joint_names = list(joints.names)
        self.limits = dict(joints.limits)
        self.node = ScriptedNode()
        self.clock = FakeClock()
        self.bridge = OpenArmBridge(joints, self._route, clock=self.clock)
        self.sent: list[tuple[str, Any, int]] = []
        self._to_dummy: list[tuple[str, pa.Array]] = []
        self._patch = mock.patch.object(dummy_main, "dora", SimpleNamespace(Node=self._node))
        self._patch.start()
        self._thread = threading.Thread(target=dummy_main.main, name="openarm-dummy", daemon=True)
        self._thread.start()

    def _node(self) -> ScriptedNode:
        return self.node

    def _route(self, output: str, value: pa.Array, metadata: Mapping[str, Any] | None) -> None:
        if output == JOINT_STATE:
            self.sent.append((output, value, int((metadata or {})[STAMP_NS])))
        elif output in (REQUEST_POSITION, MOVE_POSITION):
            self._to_dummy.append((output, value))

    def _flush(self) -> None:
        """Deliver what the bridge sent the dummy, and each answer back to the bridge."""
        pending, self._to_dummy = self._to_dummy, []
        for output, value in pending:
            self.node.events.put({"type": "INPUT", "id": output, "value": value, "metadata": {}})
            if output == REQUEST_POSITION:
                self._answer()

    def _answer(self) -> None:
        while True:
            output, value, metadata = self.node.outputs.get(timeout=REPLY_TIMEOUT_S)
            if output == "status":
                self.bridge.on_input(ROBOT_STATUS, value, metadata)
                continue
            assert output == "position", output
            self.bridge.on_input(POSITION, value, metadata)
            return

    def tick(self) -> None:
        self.clock.advance(TICK_S)
        self.bridge.on_input(TICK, pa.array([], type=pa.null()), {})
        self._flush()

    def states(self) -> list[tuple[str, Any, int]]:
        if not self.sent:
            self.tick()
        return list(self.sent)

    def now_ns(self) -> int:
        return time.time_ns()

    def send(self, command: JointCommand) -> None:
        self.bridge.on_input(ARM_COMMAND, command.to_arrow().to_struct_array(), {})
        self._flush()

    def until(self, holds: Callable[[JointState], bool], what: str) -> JointState:
        for _ in range(MAX_TICKS):
            self.tick()
            state = JointState.from_arrow(self.sent[-1][1])
            if holds(state):
                return state
        raise AssertionError(f"no {what} within {MAX_TICKS} ticks")

    def close(self) -> None:
        self.node.events.put(None)  # the end of the event stream ends the dummy's loop
        self._thread.join(timeout=STOP_TIMEOUT_S)
        self._patch.stop()
        assert not self._thread.is_alive(), "the dummy's loop did not end"


@pytest.fixture(scope="module")
def profile() -> RobotProfile:
    return load_profile(PROFILE)


@pytest.fixture(scope="module")
def adapter(profile: RobotProfile) -> Iterator[BridgedDummy]:
    bridged = BridgedDummy(profile)
    yield bridged
    bridged.close()


def test_a_sparse_command_moves_its_joint_and_keeps_the_others_on_openarm(
    adapter: BridgedDummy, profile: RobotProfile
) -> None:
    held = held_targets(profile)
    settle_at(adapter, held, "the home pose")
    sparse = JointCommand(name=["openarm_right_joint4"], mode="position", position=[1.5])
    expected = merge_command(held, sparse)
    adapter.send(sparse)
    state = adapter.until(at(expected), "joint 4 at 1.5 with the other joints held")
    assert abs(by_name(state)["openarm_right_joint4"] - 1.5) < TOLERANCE


def test_a_target_beyond_the_limits_is_clamped_to_what_the_contract_says_was_sent_on_openarm(
    adapter: BridgedDummy, profile: RobotProfile
) -> None:
    held = held_targets(profile)
    settle_at(adapter, held, "the home pose")
    joint = "openarm_right_joint1"
    beyond = adapter.limits[joint].upper + 0.6
    sparse = JointCommand(name=[joint], mode="position", position=[beyond])
    sent, clamped = clamp(merge_command(held, sparse), adapter.limits)
    assert clamped == (joint,)
    adapter.send(sparse)
    adapter.until(at(sent), "joint 1 at its upper limit, the others held")
    reached = [by_name(JointState.from_arrow(v))[joint] for _, v, _ in adapter.states()]
    assert max(reached) < adapter.limits[joint].upper + TOLERANCE


def test_the_gripper_opening_reaches_the_dummy_as_an_angle_and_comes_back_as_an_opening(
    adapter: BridgedDummy, profile: RobotProfile
) -> None:
    gripper = profile.gripper.joints[0]
    opening = profile.gripper.joint_for_width.joint_for(0.03)  # 3 cm between the pads
    held = {**held_targets(profile), gripper: opening}
    state = settle_at(adapter, held, "the gripper 3 cm open")
    assert by_name(state)[gripper] == pytest.approx(opening, abs=1e-6)
