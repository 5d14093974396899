"""The physics thread of the world node: fixed timestep, joint state out, cameras out.

The simulation owns a ``sim.Environment`` (the physics and its task) in one thread; its
camera frames are rendered from snapshots of that physics in a second thread that owns the
``sim.render.Cameras`` and their GL context (``nodes/world/frames.py``), so an expensive
frame never holds back the joint state. Other threads talk to it only through thread-safe
requests: joint targets, a reset, and reading the latest scene snapshot (the ``scene_state``
JSON with the task's predicates).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forge_msgs import JointState

from doraforge.nodes.dataplane import Publish
from doraforge.nodes.world.frames import FrameWorker
from doraforge.nodes.world.scene import SceneJson, scene_json

if TYPE_CHECKING:  # sim imports MuJoCo, which must wait until the GL backend is chosen
    from doraforge.sim.environment import Environment
    from doraforge.sim.render import Cameras
    from doraforge.sim.world import World

log = logging.getLogger(__name__)

type ResetDone = Callable[[SceneJson | Exception], None]


@dataclass(frozen=True)
class SimulationOptions:
    """Rates, rendering choices and the task (a ``doraforge.sim.tasks`` name) of the world
    node.

    ``state_hz`` is in simulated time (joint state is a physical signal); ``camera_hz`` is
    in wall-clock time (frames are for observers, and rendering is the expensive part).
    """

    paced: bool = True
    state_hz: float = 100.0
    camera_hz: float = 15.0
    cameras: tuple[str, ...] = ("scene", "wrist")
    width: int = 640
    height: int = 480
    seed: int = 0
    task: str = "pick_place"
    shadows: bool = False


@dataclass
class SimulationStats:
    """Counters for health and benchmarks."""

    steps: int = 0
    sim_time: float = 0.0
    wall_time: float = 0.0
    frames: int = 0
    render_seconds: float = 0.0


class Simulation:
    """Steps an environment's physics at its timestep in a background thread and publishes
    what it sees. ``make_environment`` runs in that thread; ``make_cameras`` in the frame
    thread that renders snapshots of it (:class:`~doraforge.nodes.world.frames.FrameWorker`)."""

    def __init__(
        self,
        make_environment: Callable[[], Environment],
        make_cameras: Callable[[World], Cameras],
        options: SimulationOptions,
    ) -> None:
        self._make_environment = make_environment
        self._make_cameras = make_cameras
        self.options = options
        self._publish: Publish | None = None
        self._lock = threading.Lock()
        self._targets: dict[str, float] = {}
        self._reset: tuple[int | None, ResetDone] | None = None
        self._snapshot: SceneJson | None = None
        self._diverged: str | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="physics", daemon=True)
        self.stats = SimulationStats()

    # ---------------------------------------------------------------- control (any thread)

    def start(self, publish: Publish) -> None:
        """Begin stepping and publishing through ``publish``."""
        self._publish = publish
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the physics thread."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def command(self, names: list[str], positions: list[float]) -> None:
        """Queue position targets; applied before the next step."""
        with self._lock:
            self._targets.update(zip(names, positions, strict=True))

    def request_reset(self, seed: int | None, done: ResetDone) -> None:
        """Ask for a new episode (``seed`` None: the current one again); ``done`` runs in
        the physics thread with the new scene's JSON (without predicates) or the error."""
        with self._lock:
            self._reset = (seed, done)
        self._wake.set()

    def snapshot(self) -> SceneJson | None:
        """The latest scene state JSON with the task's ``predicates``, or ``None`` before
        the first step."""
        with self._lock:
            return self._snapshot

    @property
    def diverged(self) -> str | None:
        """Why physics stopped, or ``None`` while healthy."""
        return self._diverged

    # ---------------------------------------------------------------- physics thread

    def _run(self) -> None:
        try:
            environment = self._make_environment()
            world = environment.physics
            frames = FrameWorker(
                world, self._make_cameras, self.options, self._emit, self.stats, self._failed
            )
        except Exception as exc:  # the node stays up and reports itself unavailable
            log.exception("cannot build the simulated world")
            self._diverged = f"world failed to load: {exc}"
            return
        frames.start()
        steps_per_state = max(1, round(1.0 / (self.options.state_hz * world.timestep)))
        started = time.monotonic()
        sim_origin = world.sim_time
        next_state = started
        state_period = 1.0 / self.options.state_hz
        self._publish_state(environment)
        while not self._stop.is_set():
            if self._serve_reset(environment):
                started, sim_origin = time.monotonic(), world.sim_time
            if world.diverged:
                self._wake.wait(0.1)
                self._wake.clear()
                continue
            self._apply_targets(world)
            if not self._step(world, steps_per_state):
                continue
            now = time.monotonic()
            # At most state_hz per wall second as well: unpaced physics would otherwise
            # flood consumers whose controllers run on wall time anyway.
            if now >= next_state:
                self._publish_state(environment)
                next_state = max(next_state + state_period, now)
            frames.offer()
            self._account(world, started, sim_origin)
            if self.options.paced:
                self._pace(started, world.sim_time - sim_origin)
        frames.close()

    def _step(self, world: World, n: int) -> bool:
        from doraforge.sim.world import PhysicsDiverged

        try:
            world.step(n)
        except PhysicsDiverged as exc:
            self._diverged = str(exc)
            log.error("physics diverged: %s; the world is unavailable until reset", exc)
            return False
        self.stats.steps += n
        return True

    def _apply_targets(self, world: World) -> None:
        with self._lock:
            targets, self._targets = self._targets, {}
        if not targets:
            return
        try:
            world.set_targets(list(targets), list(targets.values()))
        except ValueError as exc:
            log.warning("joint command rejected: %s", exc)

    def _serve_reset(self, environment: Environment) -> bool:
        with self._lock:
            request, self._reset = self._reset, None
            if request is not None:
                self._targets.clear()  # commands from before the reset no longer apply
        if request is None:
            return False
        seed, done = request
        try:
            scene = environment.reset(seed)
        except Exception as exc:  # reported to the caller of world.reset as its failure
            done(exc)
            return True
        self._diverged = None
        self._publish_state(environment)
        done(scene_json(scene))
        return True

    def _publish_state(self, environment: Environment) -> None:
        world = environment.physics
        names, positions, velocities, efforts = world.joint_state()
        state = JointState(name=names, position=positions, velocity=velocities, effort=efforts)
        scene = environment.scene_state()
        snapshot = scene_json(scene, environment.success(scene))
        with self._lock:
            self._snapshot = snapshot
        self._emit("joint_state", state.to_arrow(), {"sim_time_ns": int(world.sim_time * 1e9)})

    def _failed(self, reason: str) -> None:
        self._diverged = reason

    def _emit(self, output: str, value: Any, metadata: dict[str, Any]) -> None:
        if self._publish is not None:
            self._publish(output, value, metadata)

    def _account(self, world: World, started: float, sim_origin: float) -> None:
        self.stats.sim_time = world.sim_time
        self.stats.wall_time = time.monotonic() - started

    def _pace(self, started: float, simulated: float) -> None:
        # Paced to real time: never ahead of the wall clock (a slow step is not caught up
        # by skipping physics; the real-time factor simply drops below 1).
        ahead = simulated - (time.monotonic() - started)
        if ahead > 0:
            self._stop.wait(ahead)
