"""The world node's physics thread and endpoint with the real MuJoCo cell (no Dora)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from forge_msgs import Image, JointState
from forge_tool import ToolContext, ToolEndpointError, ToolExecutionKey, ToolRequest

from doraforge.nodes.world.endpoint import ResetAction, SceneStateQuery, world_status
from doraforge.nodes.world.simulation import Simulation, SimulationOptions
from doraforge.sim.environment import Environment
from doraforge.sim.render import Cameras
from doraforge.sim.tasks.pick_place import PickPlace
from doraforge.sim.world import World
from tests.support.waiting import eventually

pytestmark = pytest.mark.anyio

PHYSICS_WAIT_S = 20.0


def wait_for(predicate: Callable[[], object], what: str) -> None:
    """Wait (bounded) for the physics thread; it steps far faster than this polls."""
    eventually(predicate, within=PHYSICS_WAIT_S, what=what, interval=0.01)


class Collector:
    """A thread-safe stand-in for the node's publish callable."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[tuple[str, Any, dict[str, Any]]] = []

    def __call__(self, output: str, value: Any, metadata: Any = None) -> None:
        with self.lock:
            self.messages.append((output, value, dict(metadata or {})))

    def of(self, output: str) -> list[tuple[Any, dict[str, Any]]]:
        with self.lock:
            return [(v, m) for o, v, m in self.messages if o == output]


@pytest.fixture
def simulation() -> Iterator[Simulation]:
    options = SimulationOptions(paced=False, camera_hz=20.0, width=160, height=120)
    worlds: list[World] = []

    def make_environment() -> Environment:
        worlds.append(World())
        return Environment(worlds[-1], PickPlace(), seed=3)

    sim = Simulation(
        make_environment,
        lambda world: Cameras(world.model, height=options.height, width=options.width),
        options,
    )
    collector = Collector()
    sim.start(collector)
    sim.collector = collector  # type: ignore[attr-defined]
    sim.worlds = worlds  # type: ignore[attr-defined]
    yield sim
    sim.stop()


def test_it_publishes_joint_state_and_numbered_frames(simulation: Simulation) -> None:
    collector: Collector = simulation.collector  # type: ignore[attr-defined]
    wait_for(
        lambda: len(collector.of("image_wrist")) >= 2 and len(collector.of("joint_state")) > 5,
        "frames and joint states published",
    )
    state = JointState.from_arrow(collector.of("joint_state")[-1][0])
    assert state.name[:2] == ["shoulder_pan", "shoulder_lift"]
    assert len(state.position) == len(state.name) == len(state.velocity)
    frames = collector.of("image_scene")
    image = Image.from_arrow(frames[-1][0])
    assert (image.height, image.width, image.encoding) == (120, 160, "rgb8")
    seqs = [metadata["seq"] for _, metadata in frames]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == len(seqs)
    assert all(metadata["source"] == "scene" for _, metadata in frames)
    assert frames[-1][1]["stamp_ns"] > 0


def test_position_commands_move_the_joints(simulation: Simulation) -> None:
    collector: Collector = simulation.collector  # type: ignore[attr-defined]
    wait_for(lambda: simulation.snapshot() is not None, "a first snapshot")
    simulation.command(["shoulder_pan"], [0.4])

    def pan() -> float:
        state = JointState.from_arrow(collector.of("joint_state")[-1][0])
        return state.position[state.name.index("shoulder_pan")]

    wait_for(lambda: abs(pan() - 0.4) < 0.02, "the pan joint at 0.4 rad")


async def test_reset_action_redraws_the_cube_and_answers_scene_state(
    simulation: Simulation,
) -> None:
    wait_for(lambda: simulation.snapshot() is not None, "a first snapshot")
    reset = ResetAction(simulation)
    finished = asyncio.Event()
    events: list[Any] = []

    class Emitter:
        async def emit(self, event: Any) -> None:
            events.append(event)
            finished.set()

    key = ToolExecutionKey(invocation_id="inv", attempt_id="att")
    context = ToolContext(
        execution_key=key,
        tool_id="world.reset",
        implementation_id="w",
        endpoint_id="world",
        operation="reset",
    )
    before = simulation.snapshot()["objects"]["cube"]["position"]  # type: ignore[index]
    await reset.start(ToolRequest(arguments={"seed": 11}), context, Emitter())
    await asyncio.wait_for(finished.wait(), timeout=20)
    result = (await reset.result(key)).result
    assert result is not None
    assert result.status == "succeeded"
    assert events[-1].type == "executor_completed"
    query = SceneStateQuery(simulation)
    scene = (await query.query(ToolRequest(arguments={}), context)).outputs
    assert scene["seed"] == 11
    assert scene["objects"]["cube"]["position"] != before


async def test_reset_rejects_a_bad_seed_before_acceptance(simulation: Simulation) -> None:
    reset = ResetAction(simulation)
    context = ToolContext(
        execution_key=ToolExecutionKey(invocation_id="i", attempt_id="a"),
        tool_id="world.reset",
        implementation_id="w",
        endpoint_id="world",
        operation="reset",
    )
    for arguments in ({"seed": -1}, {"seed": True}, {"seed": 1.5}, {"other": 1}):
        with pytest.raises(ToolEndpointError) as caught:
            await reset.start(ToolRequest(arguments=arguments), context, None)  # type: ignore[arg-type]
        assert caught.value.error.code == "WORLD_INVALID_ARGUMENTS"


def test_divergence_makes_the_endpoint_unavailable_until_reset(simulation: Simulation) -> None:
    wait_for(lambda: simulation.snapshot() is not None, "a first snapshot")
    world: World = simulation.worlds[0]  # type: ignore[attr-defined]
    world.data.qvel[:] = 1e9  # fault injection: an exploded state, as a bad contact would make
    wait_for(lambda: simulation.diverged is not None, "the divergence detected")
    assert world_status(simulation).state == "unavailable"
    steps = simulation.stats.steps
    assert world.diverged
    done = threading.Event()
    simulation.request_reset(None, lambda outcome: done.set())
    assert done.wait(20)
    wait_for(lambda: simulation.diverged is None, "the divergence cleared")
    assert world_status(simulation).state == "ready"
    wait_for(lambda: simulation.stats.steps > steps, "stepping again after the reset")


def test_scene_snapshots_carry_the_success_predicates(simulation: Simulation) -> None:
    wait_for(lambda: simulation.snapshot() is not None, "a first snapshot")
    scene = simulation.snapshot()
    assert scene is not None
    # A fresh cell: the cube rests on the table outside the target zone.
    assert scene["predicates"] == {"cube_in_target_and_resting": False, "cube_lifted": False}


class SlowCameras:
    """Cameras whose every frame takes ``seconds`` (an expensive model on a loaded CPU)."""

    def __init__(self, world: World, seconds: float) -> None:
        self._cameras = Cameras(world.model, height=24, width=32)
        self._seconds = seconds
        self.camera_names = self._cameras.camera_names

    def render(self, data: Any, camera_name: str) -> Any:
        frame = self._cameras.render(data, camera_name)
        threading.Event().wait(self._seconds)  # the cost of the frame, not a test wait
        return frame

    def close(self) -> None:
        self._cameras.close()


class ReceiptClock(Collector):
    """A collector that also notes when (wall clock) each joint state arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.received: list[float] = []

    def __call__(self, output: str, value: Any, metadata: Any = None) -> None:
        super().__call__(output, value, metadata)
        if output == "joint_state":
            with self.lock:
                self.received.append(time.monotonic())


def test_joint_state_keeps_flowing_while_a_frame_renders_slowly() -> None:
    options = SimulationOptions(paced=True, camera_hz=15.0, width=32, height=24)
    sim = Simulation(
        lambda: Environment(World(), PickPlace(), seed=3),
        lambda world: SlowCameras(world, seconds=1.5),  # type: ignore[arg-type,return-value]
        options,
    )
    collector = ReceiptClock()
    sim.start(collector)
    try:
        wait_for(lambda: len(collector.of("image_wrist")) >= 1, "two slow frames")
    finally:
        sim.stop()
    with collector.lock:
        received = list(collector.received)
    gaps = [later - earlier for earlier, later in itertools.pairwise(received)]
    # Frames take 1.5 s each; the physics thread publishes state at 100 Hz through them.
    assert len(received) > 100
    assert max(gaps) < 0.5
