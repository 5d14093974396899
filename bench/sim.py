"""Benchmark: the simulated cell running as a dataflow, per shipped robot model, measured over
its public APIs.

For each robot (``sim_arm``: ``dataflows/sim.yml``; ``openarm``: ``dataflows/sim-openarm.yml``;
unpaced, cameras at 15 Hz), in alternating rounds (default 5) so one noisy moment spoils a
round, not a figure:
  * physics real-time factor: simulated seconds per wall second over a window of
    ``--seconds``, from ``scene_state``;
  * render cost per 480x640 frame in the world node over a window in which a bare
    ``mujoco.Renderer`` renders ``--frames`` frames of the same robot's scene in this
    process (the node's own render counters, differenced between two of its status
    reports around that window);
then the latest-frame latency (render timestamp to the frame first readable from
``GET /observations/images/scene/latest``) and a pick-and-place through the Tool API.
Each ratio is the median of its per-round ratios. The last line printed is one JSON object.

    python bench/sim.py [--rounds 5] [--seconds 2] [--frames 30] [--robot NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support import Rounds, benchmark_main, summary, wait_http, wait_json
from doraforge.cli.demos.pick_place import pick_and_place
from doraforge.dataflows import DATAFLOWS
from doraforge.paos.gateway_auth import bearer, dataflow_auth, http_client
from doraforge.skill_runtime.dora_run import (
    Dataflow,
    dora_environment,
    free_port,
)

#: Shipped robot models and the dataflow that runs each one's simulated cell.
ROBOTS = {"sim_arm": "sim.yml", "openarm": "sim-openarm.yml"}
READY_TOOLS = ("world.scene_state", "arm.move_to_pose", "gripper.grasp", "camera.capture")


def scene_clock(client: httpx.Client) -> float:
    """Simulated seconds since the last reset, read through the Tool API."""
    response = client.post("/tools/world/scene_state:invoke", json={"arguments": {}})
    result = response.json()["data"]["response"]["result"]
    if result.get("status") != "succeeded":
        raise RuntimeError(f"world.scene_state did not answer: {result}")
    return float(result["outputs"]["sim_time"])


def real_time_factor(client: httpx.Client, seconds: float) -> float:
    start_sim, start_wall = scene_clock(client), time.monotonic()
    time.sleep(seconds)  # the measurement window itself, not synchronisation
    return (scene_clock(client) - start_sim) / (time.monotonic() - start_wall)


def render_counters(client: httpx.Client) -> tuple[int, float]:
    """The world node's frames rendered and seconds spent rendering them, as of its last
    status report."""
    context = client.get("/tools/world.scene_state/context").json()["data"]
    details = context["endpoint_status"]["details"]
    return int(details["frames"]), float(details["render_seconds"])


def fresh_counters(client: httpx.Client, timeout_s: float = 30.0) -> tuple[int, float]:
    """Counters from a status report newer than this call (bounded wait; a report comes
    about every second)."""
    stale = render_counters(client)
    fresh: tuple[int, float] = wait_json(
        lambda: render_counters(client), lambda counters: counters[0] != stale[0], timeout_s
    )
    return fresh


class BareRenderer:
    """``mujoco.Renderer`` on the same robot's scene, no node around it (same thread per
    frame, the two cameras in turn as the node renders them)."""

    def __init__(self, robot: str) -> None:
        from doraforge.sim.render import gl_backend

        gl_backend()
        import mujoco

        from doraforge.nodes.robot.profile import load_profile, profile_path
        from doraforge.nodes.world.layout import build_world
        from doraforge.sim.environment import Environment
        from doraforge.sim.tasks import DEFAULT_TASK, TASKS

        world = build_world(load_profile(profile_path(robot)))
        self._physics = Environment(world, TASKS.create(DEFAULT_TASK), seed=0).physics
        self._cameras = [
            self._physics.layout.cameras.get(name, name) for name in ("scene", "wrist")
        ]
        self._renderer = mujoco.Renderer(self._physics.model, 480, 640)
        self._renderer.update_scene(self._physics.data, camera=self._cameras[0])
        self._renderer.render()

    def render_ms(self, frames: int) -> float:
        """Milliseconds per frame over ``frames`` frames, physics stepped between them."""
        started = time.perf_counter()
        for index in range(frames):
            self._physics.step(5)
            self._renderer.update_scene(self._physics.data, camera=self._cameras[index % 2])
            self._renderer.render()
        return 1000 * (time.perf_counter() - started) / frames

    def close(self) -> None:
        self._renderer.close()


def render_round(client: httpx.Client, bare: BareRenderer, frames: int) -> tuple[float, float]:
    """One round: the node's ms per frame between two fresh status reports around the
    bare renderer's ``frames`` frames, and the bare renderer's ms per frame."""
    before = fresh_counters(client)
    bare_ms = bare.render_ms(frames)
    after = fresh_counters(client)
    rendered = after[0] - before[0]
    if rendered <= 0:
        raise RuntimeError("the world node rendered no frame during the round")
    return 1000 * (after[1] - before[1]) / rendered, bare_ms


def frame_latency(client: httpx.Client, frames: int) -> dict[str, float]:
    """Render-to-readable latency of successive new frames (polled every millisecond)."""
    samples: list[float] = []
    last = -1
    deadline = time.monotonic() + 60
    while len(samples) < frames and time.monotonic() < deadline:
        response = client.get("/observations/images/scene/latest?format=jpeg")
        seq = int(response.headers.get("x-frame-seq", -1))
        if seq != last and last != -1:
            samples.append((time.time_ns() - int(response.headers["x-frame-timestamp-ns"])) / 1e9)
        last = seq
        time.sleep(0.001)
    return summary(samples)


def wait_ready(client: httpx.Client) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        contexts = [client.get(f"/tools/{tool}/context").json()["data"] for tool in READY_TOOLS]
        # world.scene_state is ready only once the world has stepped (endpoint_ready).
        if all(context["ready"] for context in contexts):
            return
        time.sleep(0.2)
    raise TimeoutError("the cell never became ready")


def measure(robot: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run ``robot``'s cell once and measure it; the dataflow stops before this returns."""
    port = free_port()
    with (
        tempfile.TemporaryDirectory(prefix=f"doraforge-bench-sim-{robot}-") as tmp,
        dataflow_auth(os.environ, generate=True) as auth,
    ):
        env = dora_environment(
            auth.environment(os.environ),
            DORAFORGE_GATEWAY_PORT=str(port),
            DORAFORGE_GATEWAY_JOURNAL=str(Path(tmp) / "gateway.journal"),
            DORAFORGE_SIM_UNPACED="1",
            DORAFORGE_SIM_CAMERA_HZ="15",
            DORAFORGE_LOG_LEVEL="WARNING",
        )
        base = f"http://127.0.0.1:{port}"
        with (
            (Path(tmp) / "sim.log").open("wb") as log,
            Dataflow(DATAFLOWS / ROBOTS[robot], env, log) as flow,
        ):
            wait_http(
                f"{base}/tools",
                120,
                "gateway",
                headers=bearer(auth.token),
                log=Path(tmp) / "sim.log",
                running=flow.running,
            )
            with http_client(base, auth.token, timeout_s=30) as client:
                wait_ready(client)
                rtf, render = measure_rounds(robot, client, args)
                print("  latest-frame latency ...", flush=True)
                latency = frame_latency(client, args.frames)
                print("  pick-and-place ...", flush=True)
                report = pick_and_place(client, Path(tmp), say=lambda _: None)
                print(f"  done in {report.seconds:.1f} s, success {report.success}", flush=True)
    return {
        "real_time_factor_unpaced_cameras_15hz": round(statistics.median(rtf), 3),
        "real_time_factor_rounds": [round(value, 3) for value in rtf],
        "render_ms_per_frame": {
            "world_node": round(render.median("subject"), 3),
            "bare_renderer": round(render.median("floor"), 3),
            **render.figures("bare_ms", "world_node_ms"),
        },
        "render_cost_over_bare": round(render.ratio, 3),
        "latest_frame_latency": latency,
        "pick_and_place": {"seconds": round(report.seconds, 2), "success": report.success},
    }


def measure_rounds(
    robot: str, client: httpx.Client, args: argparse.Namespace
) -> tuple[list[float], Rounds]:
    """``args.rounds`` rounds of a real-time-factor window, then a render window."""
    bare = BareRenderer(robot)
    rtf: list[float] = []
    node_ms: list[float] = []
    bare_ms: list[float] = []
    try:
        for index in range(args.rounds):
            rtf.append(real_time_factor(client, args.seconds))
            node, floor = render_round(client, bare, args.frames)
            node_ms.append(node)
            bare_ms.append(floor)
            print(
                f"{robot} round {index + 1}/{args.rounds}: {rtf[-1]:.1f}x real time; "
                f"render {node:.1f} ms/frame (bare {floor:.1f})",
                flush=True,
            )
    finally:
        bare.close()
    return rtf, Rounds(floor=tuple(bare_ms), subject=tuple(node_ms))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="real-time-factor window")
    parser.add_argument("--frames", type=int, default=30, help="bare frames per render window")
    parser.add_argument("--robot", action="append", choices=sorted(ROBOTS), default=None)
    args = parser.parse_args()
    robots = args.robot or list(ROBOTS)
    results = {robot: measure(robot, args) for robot in robots}
    targets: dict[str, dict[str, Any]] = {}
    for robot, figures in results.items():
        targets[f"{robot}.real_time_factor"] = {
            "value": figures["real_time_factor_unpaced_cameras_15hz"],
            "limit": 3.0,
            "better": "higher",
        }
        targets[f"{robot}.render_cost_over_bare"] = {
            "value": figures["render_cost_over_bare"],
            "limit": 1.2,
            "better": "lower",
        }
        targets[f"{robot}.pick_and_place_success"] = {
            "value": int(figures["pick_and_place"]["success"]),
            "limit": 1,
            "better": "higher",
        }
    print(json.dumps({"benchmark": "sim", "robots": results, "targets": targets}))
    return 0


if __name__ == "__main__":
    benchmark_main(main)
