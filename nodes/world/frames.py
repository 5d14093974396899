"""The world node's camera frames, rendered in their own thread from physics snapshots.

A frame of a packaged robot's meshes can cost more than the camera period on a CPU renderer
(OpenArm: about 60-90 ms a scene frame, several times that on a loaded machine). Rendered
in the physics thread, each frame held back the joint state behind it, long enough under
load for a controller to call the state lost. Here the physics thread only copies its
``MjData`` into a snapshot when the renderer is idle and a frame is due (microseconds), and
this thread renders the snapshot (MuJoCo releases the GIL while it renders). The GL context
belongs to this thread: it creates the cameras and closes them.

Scheduling: one camera per snapshot, the most overdue first, each at most ``camera_hz``;
and rendering takes at most half the wall clock, so an expensive model drops its frame rate
rather than the CPU the physics needs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from forge_msgs import Image

if TYPE_CHECKING:  # sim imports MuJoCo, which must wait until the GL backend is chosen
    from doraforge.nodes.world.simulation import SimulationOptions, SimulationStats
    from doraforge.sim.render import Cameras
    from doraforge.sim.world import World

log = logging.getLogger(__name__)

type Emit = Callable[[str, Any, dict[str, Any]], None]


class FrameWorker:
    """Renders ``options.cameras`` of ``world`` from snapshots the physics thread offers."""

    def __init__(
        self,
        world: World,
        make_cameras: Callable[[World], Cameras],
        options: SimulationOptions,
        emit: Emit,
        stats: SimulationStats,
        on_failure: Callable[[str], None],
    ) -> None:
        import mujoco

        self._mujoco = mujoco
        self._world = world
        self._make_cameras = make_cameras
        self._options = options
        self._emit = emit
        self._stats = stats
        self._on_failure = on_failure
        self._snapshot = mujoco.MjData(world.model)
        self._requested = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._stop = threading.Event()
        now = time.monotonic()
        self._due = dict.fromkeys(options.cameras, now)
        self._not_before = now
        self._seq = dict.fromkeys(options.cameras, 0)
        self._thread = threading.Thread(target=self._run, name="frames", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def offer(self) -> None:
        """Called by the physics thread between steps: snapshot the state if a frame is
        due and the renderer is free (never waits)."""
        if not self._idle.is_set() or not self._due:
            return
        if time.monotonic() < max(self._not_before, min(self._due.values())):
            return
        model, data = self._world.model, self._world.data
        self._mujoco.mj_copyData(self._snapshot, model, data)
        self._idle.clear()
        self._requested.set()

    def close(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._requested.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            cameras = self._make_cameras(self._world)
        except Exception as exc:  # reported as the world's failure: frames are its output
            log.exception("cannot create the world's cameras")
            self._on_failure(f"cameras failed to load: {exc}")
            return
        try:
            while not self._stop.is_set():
                if not self._requested.wait(0.1):
                    continue
                self._requested.clear()
                if self._stop.is_set():
                    break
                self._render_next(cameras)
                self._idle.set()
        finally:
            cameras.close()

    def _render_next(self, cameras: Cameras) -> None:
        began = time.monotonic()
        name = min(self._due, key=self._due.__getitem__)
        pixels: np.ndarray = cameras.render(self._snapshot, name)
        rendered = time.monotonic()
        self._stats.render_seconds += rendered - began
        self._stats.frames += 1
        self._seq[name] += 1
        metadata = {"seq": self._seq[name], "stamp_ns": time.time_ns(), "source": name}
        self._emit(f"image_{name}", Image.from_numpy(pixels, "rgb8").to_arrow(), metadata)
        self._due[name] = max(self._due[name] + 1.0 / self._options.camera_hz, began)
        self._not_before = rendered + (rendered - began)
