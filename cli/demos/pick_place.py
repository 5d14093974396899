"""A scripted pick-and-place through the Gateway's HTTP Tool API only.

Query the scene, move above the cube, descend, grasp, lift, carry over the target zone,
lower, release, retreat and go home; camera frames before and after are saved as PNG.
Everything goes through ``/tools`` and ``/observations``: the script cannot tell a
simulated cell from a real one. ``python -m doraforge.cli.demos.pick_place URL`` runs it
on the Gateway at URL (``doraforge run sim`` prints it).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from doraforge.cli.parser import Parser
from doraforge.paos.gateway_auth import http_client, operator_token
from doraforge.wire.tokens import TokenError

APPROACH_M = 0.10  # above the cube before descending, clear of its top face
CARRY_M = 0.15  # carry height above the table
PLACE_CLEARANCE_M = 0.005  # release with the cube just above the zone's surface
STEP_TIMEOUT_S = 60.0

type Say = Callable[[str], None]


class PickPlaceError(RuntimeError):
    """A step did not end as the contract requires (the message says which)."""


@dataclass
class PickPlaceReport:
    """What happened: per-step outcomes, the final scene and the evidence files."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    scene_before: dict[str, Any] = field(default_factory=dict)
    scene_after: dict[str, Any] = field(default_factory=dict)
    before_png: Path | None = None
    after_png: Path | None = None
    seconds: float = 0.0

    @property
    def success(self) -> bool:
        """The success predicate reported by the world for the final scene."""
        return bool(self.scene_after.get("predicates", {}).get("cube_in_target_and_resting"))


class ToolApi:
    """The few Tool API calls the script needs, with bounded waits."""

    def __init__(self, client: httpx.Client) -> None:
        self._client = client

    def query(self, endpoint: str, operation: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Invoke a Query; return its outputs or raise with the Gateway's error."""
        response = self._client.post(
            f"/tools/{endpoint}/{operation}:invoke", json={"arguments": arguments}
        )
        data = _data(response, 200)
        result = data["response"]["result"]
        if result["status"] != "succeeded":
            raise PickPlaceError(
                f"{endpoint}/{operation} {result['status']}: {result.get('error')}"
            )
        return dict(result["outputs"])

    def act(self, tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run an Action to its terminal result; raise unless it succeeded."""
        admitted = _data(
            self._client.post(f"/tools/{tool_id}:invoke", json={"arguments": arguments}), 202
        )
        invocation_id = admitted["invocation_id"]
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while time.monotonic() < deadline:
            response = self._client.get(f"/invocations/{invocation_id}/result")
            if response.status_code == 200:
                data = response.json()["data"]
                result = data["result"]
                if result["status"] != "succeeded":
                    raise PickPlaceError(f"{tool_id} ended {data['phase']}: {result.get('error')}")
                return dict(result["outputs"])
            _data(response, 202)
            time.sleep(0.02)
        raise PickPlaceError(f"{tool_id} did not finish within {STEP_TIMEOUT_S:.0f} s")

    def save_frame(self, source: str, path: Path) -> Path:
        """Save the newest frame of ``source`` as PNG."""
        response = self._client.get(f"/observations/images/{source}/latest?format=png")
        if response.status_code != 200:
            raise PickPlaceError(f"no frame from {source}: HTTP {response.status_code}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(response.content)
        return path

    def latest_frame_seq(self, source: str) -> int:
        """Sequence number of the newest frame of ``source`` (-1 when none yet)."""
        sources = _data(self._client.get("/observations/images"), 200)["sources"]
        latest = next((s["latest"] for s in sources if s["source"] == source), None)
        return -1 if latest is None else int(latest["seq"])


def _data(response: httpx.Response, status: int) -> dict[str, Any]:
    if response.status_code != status:
        raise PickPlaceError(
            f"{response.request.url.path}: HTTP {response.status_code} {response.text}"
        )
    return dict(response.json()["data"])


def grasp_yaw(orientation_wxyz: list[float]) -> float:
    """The gripper yaw that closes the fingers across two faces of the cube.

    A cube's faces repeat every quarter turn, so the yaw is folded into [-pi/4, pi/4].
    """
    w, x, y, z = orientation_wxyz
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return (yaw + math.pi / 4) % (math.pi / 2) - math.pi / 4


def pick_and_place(
    client: httpx.Client, out_dir: Path, *, source: str = "scene", say: Say = print
) -> PickPlaceReport:
    """Run the whole task; raise :class:`PickPlaceError` when a step fails.

    ``client`` carries the Gateway's base URL and, when it has one, its bearer token
    (:func:`paos.gateway_auth.http_client` builds such a client).
    """
    api = ToolApi(client)
    report = PickPlaceReport()
    started = time.monotonic()
    report.before_png = _fresh_frame(api, source, out_dir / "before.png")
    scene = api.query("world", "scene_state", {})
    report.scene_before = scene
    plan = plan_steps(scene, say=say)
    for label, tool_id, arguments in plan:
        began = time.monotonic()
        outputs = api.act(tool_id, arguments)
        elapsed = time.monotonic() - began
        report.steps.append(
            {"step": label, "tool_id": tool_id, "seconds": round(elapsed, 2), "outputs": outputs}
        )
        say(f"   {label:24s} {tool_id:18s} done in {elapsed:4.1f} s")
        if tool_id == "gripper.grasp" and not outputs.get("holding", False):
            raise PickPlaceError(f"the gripper closed on nothing: {outputs}")
    report.scene_after = _settled_scene(api)
    report.after_png = _fresh_frame(api, source, out_dir / "after.png")
    report.seconds = time.monotonic() - started
    return report


def plan_steps(scene: dict[str, Any], *, say: Say = print) -> list[tuple[str, str, dict[str, Any]]]:
    """The pick-and-place as ``(label, tool_id, arguments)`` steps for this scene."""
    cube = scene["objects"]["cube"]
    x, y, z = cube["position"]
    zone_x, zone_y, zone_z = scene["target_zone"]["center"]
    half = cube["size"][2] / 2
    yaw = grasp_yaw(cube["orientation_wxyz"])
    say(
        f"   cube at ({x:.3f}, {y:.3f}, {z:.3f}) m, yaw {math.degrees(yaw):.0f} deg; "
        f"target at ({zone_x:.3f}, {zone_y:.3f})"
    )
    place_z = zone_z + half + PLACE_CLEARANCE_M
    return [
        ("move above the cube", "arm.move_to_pose", _pose(x, y, z + APPROACH_M, yaw)),
        ("descend", "arm.move_to_pose", _pose(x, y, z, yaw, speed=0.05)),
        ("grasp", "gripper.grasp", {}),
        ("lift", "arm.move_to_pose", _pose(x, y, CARRY_M, yaw, speed=0.08)),
        ("carry over the target", "arm.move_to_pose", _pose(zone_x, zone_y, CARRY_M, yaw)),
        ("lower", "arm.move_to_pose", _pose(zone_x, zone_y, place_z, yaw, speed=0.05)),
        ("release", "gripper.release", {}),
        ("retreat", "arm.move_to_pose", _pose(zone_x, zone_y, CARRY_M, yaw)),
        ("home", "arm.home", {}),
    ]


def _pose(x: float, y: float, z: float, yaw: float, *, speed: float = 0.15) -> dict[str, Any]:
    return {
        "position": [round(x, 4), round(y, 4), round(z, 4)],
        "yaw": round(yaw, 4),
        "speed": speed,
    }


def _settled_scene(api: ToolApi, timeout_s: float = 10.0) -> dict[str, Any]:
    # The released cube needs a moment to stop; the predicate asks for a resting cube.
    deadline = time.monotonic() + timeout_s
    scene = api.query("world", "scene_state", {})
    while time.monotonic() < deadline and not scene["predicates"]["cube_in_target_and_resting"]:
        time.sleep(0.1)
        scene = api.query("world", "scene_state", {})
    return scene


def _fresh_frame(api: ToolApi, source: str, path: Path, timeout_s: float = 10.0) -> Path:
    # Evidence must show the scene as it is now (after a reset, after the last action), not
    # a frame rendered before: wait for one whose sequence is newer than the current one.
    seen = api.latest_frame_seq(source)
    deadline = time.monotonic() + timeout_s
    while api.latest_frame_seq(source) <= seen and time.monotonic() < deadline:
        time.sleep(0.05)
    return api.save_frame(source, path)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(
        prog="python -m doraforge.cli.demos.pick_place",
        description="Pick and place the cube through a running cell's Gateway (e.g. the one "
        "`doraforge run sim` prints), over plain HTTP; the bearer token, when the Gateway "
        "needs one, comes from $DORAFORGE_GATEWAY_TOKEN or $DORAFORGE_GATEWAY_TOKEN_FILE. "
        "Exit 0 when the cube rests in the target zone.",
    )
    parser.add_argument("url", help="the Gateway's base URL, e.g. http://127.0.0.1:9001")
    parser.add_argument("--out", type=Path, default=Path("out") / "pick_place")
    parser.add_argument("--source", default="scene", help="the camera of the PNG evidence")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the pick-and-place on the Gateway the command line names; the exit status."""
    args = _arguments(argv)
    try:
        token = operator_token(os.environ)
        with http_client(args.url, token, timeout_s=STEP_TIMEOUT_S) as client:
            report = pick_and_place(client, args.out, source=args.source)
    except httpx.TransportError as exc:
        print(
            f"pick_place: cannot reach a Gateway at {args.url} ({exc}); start a cell with "
            "`doraforge run sim` and pass the URL its `ready:` line prints",
            file=sys.stderr,
        )
        return 1
    except (PickPlaceError, TokenError, httpx.HTTPError) as exc:
        print(f"pick_place: {exc}", file=sys.stderr)
        return 1
    print(
        f"{'success' if report.success else 'failure'} in {report.seconds:.1f} s; "
        f"frames {report.before_png} and {report.after_png}"
    )
    return 0 if report.success else 1


if __name__ == "__main__":
    sys.exit(main())
