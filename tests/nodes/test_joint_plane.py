"""The joint data plane takes 100 Hz state on the Dora event thread and decodes on demand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from forge_msgs import JointState

from doraforge.nodes.dataplane import event_thread_inputs
from doraforge.nodes.dora_node import _Bridge, _pump
from doraforge.nodes.motion.plane import JointPlane

JOINTS = ("a", "b")


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


class RecordingLoop:
    """Stands in for the asyncio loop: records what the pump hands it."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, tuple[object, ...]]] = []

    def call_soon_threadsafe(self, callback: Any, *args: object) -> None:
        self.calls.append((callback, args))


def state(*positions: float, velocity: tuple[float, ...] = (0.0, 0.0)) -> pa.StructArray:
    message = JointState(name=list(JOINTS), position=list(positions), velocity=list(velocity))
    return message.to_arrow().to_struct_array()


def test_a_sample_is_decoded_when_read_with_its_arrival_time() -> None:
    clock = Clock()
    plane = JointPlane(JOINTS, clock)
    plane.on_input("joint_state", state(0.1, 0.2), {})
    clock.now = 12.5  # read 2.5 s after it arrived
    sample = plane.latest()
    assert sample is not None
    np.testing.assert_allclose(sample.positions, [0.1, 0.2])
    assert sample.received_at == 10.0
    assert plane.age() == 2.5
    assert plane.latest() is sample  # nothing new arrived: the same sample, not a recount


def test_only_the_newest_arrival_is_decoded_and_each_new_one_counts_once() -> None:
    plane = JointPlane(JOINTS, Clock())
    plane.on_input("joint_state", state(0.1, 0.2), {})
    plane.on_input("joint_state", state(0.3, 0.4), {})
    first = plane.latest()
    assert first is not None
    assert first.count == 1
    np.testing.assert_allclose(first.positions, [0.3, 0.4])
    plane.on_input("joint_state", state(0.5, 0.6), {})
    second = plane.latest()
    assert second is not None
    assert second.count == 2


def test_an_undecodable_newest_arrival_keeps_the_last_good_sample() -> None:
    plane = JointPlane(JOINTS, Clock())
    plane.on_input("joint_state", state(0.1, 0.2), {})
    good = plane.latest()
    plane.on_input("joint_state", pa.array(["garbage"]), {})
    plane.on_input("other_input", state(9.0, 9.0), {})
    assert plane.latest() is good


def test_the_pump_stores_joint_state_itself_without_waking_the_loop() -> None:
    plane = JointPlane(JOINTS, Clock())
    assert event_thread_inputs(plane) == {"joint_state"}
    loop = RecordingLoop()
    bridge = _Bridge(loop, permits=4)  # type: ignore[arg-type]
    events = [{"type": "INPUT", "id": "joint_state", "value": state(i, i)} for i in range(50)]
    _pump([*events, {"type": "STOP"}], bridge, lambda _: None, "tool_request", plane)
    assert [callback for callback, _ in loop.calls] == [bridge.request_stop]
    sample = plane.latest()
    assert sample is not None
    np.testing.assert_allclose(sample.positions, [49.0, 49.0])


def test_planes_without_event_thread_inputs_still_go_through_the_loop() -> None:
    class LoopPlane:
        inputs = frozenset({"image_scene"})

        def on_input(self, *_: object) -> None:
            raise AssertionError("must run on the loop, not the event thread")

    loop = RecordingLoop()
    bridge = _Bridge(loop, permits=4)  # type: ignore[arg-type]
    plane = LoopPlane()
    events = [{"type": "INPUT", "id": "image_scene", "value": pa.array([1])}, {"type": "STOP"}]
    _pump(events, bridge, lambda _: None, "tool_request", plane)  # type: ignore[arg-type]
    assert [callback for callback, _ in loop.calls] == [plane.on_input, bridge.request_stop]
