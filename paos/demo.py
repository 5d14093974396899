"""``doraforge demo``: the main job on embedded defaults, driven over HTTP only.

It starts ``dataflows/sim.yml`` (MuJoCo world, arm, gripper, camera, Gateway) under
``dora run``, performs a scripted pick-and-place through the Tool API, saves the before and
after camera frames as PNG files and reports whether the cube ended in the target zone.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import httpx

from paos.dataflow import DATAFLOWS, Dataflow, dora_environment, free_port, wait_until
from paos.pick_place import PickPlaceError, pick_and_place

READY_TOOLS = ("world.scene_state", "arm.move_to_pose", "gripper.grasp", "camera.capture")
STARTUP_TIMEOUT_S = 120.0


def say(text: str) -> None:
    """Print one line of the demo narrative."""
    print(text, flush=True)


def run_demo(port: int | None = None, out_dir: Path | None = None, seed: int = 0) -> int:
    """Run the pick-and-place demo; 0 only when the cube ends in the target zone."""
    port = port or free_port()
    out_dir = (out_dir or Path("out") / "demo").resolve()
    with tempfile.TemporaryDirectory(prefix="doraforge-demo-") as tmp:
        log_path = out_dir / "dataflow.log"
        out_dir.mkdir(parents=True, exist_ok=True)
        env = dora_environment(
            os.environ,
            DORAFORGE_GATEWAY_PORT=str(port),
            DORAFORGE_GATEWAY_JOURNAL=str(Path(tmp) / "gateway.journal"),
            DORAFORGE_SIM_SEED=str(seed),
            DORAFORGE_LOG_LEVEL="WARNING",
        )
        with log_path.open("wb") as log, Dataflow(DATAFLOWS / "sim.yml", env, log):
            base = f"http://127.0.0.1:{port}"
            try:
                _wait_ready(base)
                with httpx.Client(base_url=base, timeout=30) as client:
                    say("\npick-and-place through the Gateway HTTP API:")
                    report = pick_and_place(client, out_dir, say=say)
            except (PickPlaceError, httpx.HTTPError, TimeoutError) as exc:
                say(f"\nDEMO FAILED: {exc}")
                say(f"dataflow log: {log_path}")
                return 1
    say(f"\nbefore: {report.before_png}\nafter:  {report.after_png}")
    cube = report.scene_after["objects"]["cube"]["position"]
    say(
        f"cube now at ({cube[0]:.3f}, {cube[1]:.3f}, {cube[2]:.3f}) m; "
        f"in the target zone and resting: {report.success}  ({report.seconds:.1f} s)"
    )
    return 0 if report.success else 1


def _wait_ready(base: str) -> None:
    say(f"starting dataflows/sim.yml with `dora run` (Gateway on {base}) ...")

    def ready() -> bool:
        try:
            return all(
                httpx.get(f"{base}/tools/{tool}/context", timeout=1).json()["data"]["ready"]
                for tool in READY_TOOLS
            )
        except (httpx.HTTPError, KeyError, ValueError):
            return False

    def progress(elapsed: float) -> None:
        sys.stdout.write(
            f"\r  waiting for the Gateway, world, arm, gripper and camera ... {elapsed:5.1f}s"
        )
        sys.stdout.flush()

    if not wait_until(ready, STARTUP_TIMEOUT_S, interval_s=0.25, on_wait=progress):
        raise TimeoutError(f"the cell was not ready within {STARTUP_TIMEOUT_S:.0f} s")
    say("\r  the cell is up: every tool is registered and ready." + " " * 30)
