"""The simulated cell under a real ``dora run dataflows/sim.yml``, driven over HTTP only:
pick-and-place for three seeds, refusals, cancel, one motion at a time, straight-line
moves, a governed PAOS task verified in enforce mode, and last the world killed mid-motion.

One cell serves every row (starting one is the slowest part of each): each row first puts
the cell in the state it needs (``world.reset`` with its seed, or ``arm.home``), and a row
that kills the world leaves a spent cell that the next row asking for one replaces.
"""

from __future__ import annotations

import contextlib
import hashlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from doraforge.cli.demos.pick_place import pick_and_place, plan_steps
from doraforge.dataflows import DATAFLOWS
from doraforge.gateway.config import load_config
from doraforge.paos.binding import BindingCandidate
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.finalize import finalize
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.tasks import TaskService
from tests.e2e.conftest import MockStack, sim_stack
from tests.support.geometry import distance_to_segment
from tests.support.waiting import eventually, eventually_async

pytestmark = pytest.mark.e2e

WORLD_MARK = "-m doraforge.nodes.world"
#: Measured tool-centre distance from the line allowed under physics (m): tracking lag
#: runs along the line, so the sideways error stays small.
SIM_LINE_TOLERANCE_M = 0.01


class Cells:
    """The module's one simulated cell, started on first use and again only after a row
    killed its world (the world node has no restart policy)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._stack = contextlib.ExitStack()
        self._cell: MockStack | None = None

    def current(self) -> MockStack:
        if self._cell is None or not self._cell.nodes(WORLD_MARK):
            self.close()
            self._cell = self._stack.enter_context(sim_stack(self._factory.mktemp("sim-dataflow")))
        return self._cell

    def close(self) -> None:
        self._stack.close()
        self._stack, self._cell = contextlib.ExitStack(), None


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cells]:
    shared = Cells(tmp_path_factory)
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def cell(cells: Cells) -> MockStack:
    """The shared simulated cell (unpaced physics), running."""
    return cells.current()


def test_every_shipped_scene_state_waits_for_the_worlds_own_ready_status() -> None:
    """The world answers ``WORLD_NOT_READY`` (and reports ``unavailable``) before its first
    physics step, so each shipped ``world.scene_state`` requires ``endpoint_ready``; and
    ``world.reset``, which recovers a diverged (also ``unavailable``) world, does not."""
    checked = []
    for path in sorted(DATAFLOWS.glob("*.gateway.yml")):
        tools = {tool.tool_id: tool for tool in load_config(path).tools}
        if "world.scene_state" in tools:
            assert "endpoint_ready" in tools["world.scene_state"].readiness, path.name
            assert "endpoint_ready" not in tools["world.reset"].readiness, path.name
            checked.append(path.name)
    assert checked == ["sim-openarm.gateway.yml", "sim.gateway.yml"]


def test_the_cell_is_ready_only_once_the_world_has_stepped(cell: MockStack) -> None:
    context = cell.context("world.scene_state")
    assert context["ready"] is True
    assert context["readiness"]["endpoint_ready"] is True
    assert context["endpoint_status"]["state"] == "ready"
    assert scene(cell)["sim_time"] > 0


def scene(cell: MockStack) -> dict[str, Any]:
    response = cell.http.post("/tools/world/scene_state:invoke", json={"arguments": {}})
    result = cell.data(response)["response"]["result"]
    assert result["status"] == "succeeded", result
    outputs: dict[str, Any] = result["outputs"]
    return outputs


def run_action(cell: MockStack, tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    admitted = cell.start(tool_id, arguments)
    return cell.terminal(admitted["invocation_id"], timeout_s=60.0)


def red_mask(path: Path) -> np.ndarray:
    """Pixels of the red cube in a saved frame."""
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert bgr is not None, path
    blue, green, red = (bgr[:, :, channel].astype(int) for channel in range(3))
    return (red > 120) & (green < 70) & (blue < 70)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pick_and_place_puts_the_cube_in_the_target_zone(
    cell: MockStack, tmp_path: Path, seed: int
) -> None:
    reset = run_action(cell, "world.reset", {"seed": seed})
    assert reset["phase"] == "completed", reset
    assert scene(cell)["seed"] == seed
    report = pick_and_place(cell.http, tmp_path, say=lambda _: None)
    final = scene(cell)
    assert report.success
    assert final["predicates"]["cube_in_target_and_resting"] is True
    # The evidence shows it: where the cube was red before, it is not red after.
    assert report.before_png is not None
    assert report.after_png is not None
    before, after = red_mask(report.before_png), red_mask(report.after_png)
    assert before.sum() > 30, "the cube is visible in the before frame"
    assert after.sum() > 30, "the cube is visible in the after frame"
    assert (before & after).sum() < 0.2 * before.sum()


def test_targets_outside_the_workspace_or_malformed_are_rejected_before_motion(
    cell: MockStack,
) -> None:
    state_before = cell.http.get("/observations/state").json()["data"]["joint_state"]
    far = cell.invoke("arm.move_to_pose", {"position": [5.0, 5.0, 5.0]})
    malformed = cell.invoke("arm.move_to_pose", {"position": ["x", 0, 0]})
    short = cell.invoke("arm.move_to_pose", {"position": [0.3, 0.0]})
    assert far.status_code in (400, 422), far.text
    assert malformed.status_code == 400, malformed.text
    assert short.status_code == 400, short.text
    state_after = cell.http.get("/observations/state").json()["data"]["joint_state"]
    moved = np.abs(np.array(state_after["position"]) - np.array(state_before["position"]))
    assert moved[:6].max() < 1e-3  # no arm joint moved


def test_cancel_mid_motion_holds_the_arm_still_and_reports_cancelled(cell: MockStack) -> None:
    run_action(cell, "arm.home", {})
    origin = scene(cell)["gripper"]["tool_position"]
    target = [origin[0], origin[1] + 0.25, origin[2] - 0.1]
    admitted = cell.start("arm.move_to_pose", {"position": target, "speed": 0.03})
    invocation_id = admitted["invocation_id"]
    cell.poll(invocation_id, lambda s: (s["progress"] or {}).get("fraction", 0) > 0.2, 30.0)
    cancel = cell.http.post(f"/invocations/{invocation_id}/cancel")
    assert cancel.status_code in (200, 202), cancel.text
    final = cell.terminal(invocation_id, timeout_s=30.0)
    assert final["phase"] == "cancelled"

    def still() -> bool:
        state = cell.http.get("/observations/state").json()["data"]["joint_state"]
        velocity: list[float] = state["velocity"]
        return max(abs(v) for v in velocity[:6]) < 0.01

    eventually(still, within=10.0, what="the arm to stand still")
    held = scene(cell)
    first = held["gripper"]["tool_position"]
    # Half a simulated second later the tool is where it was: the arm holds position.
    later = held["sim_time"] + 0.5
    eventually(lambda: scene(cell)["sim_time"] > later, within=10.0, what="half a simulated second")
    second = scene(cell)["gripper"]["tool_position"]
    assert np.linalg.norm(np.array(first) - np.array(second)) < 0.005  # holding position
    assert np.linalg.norm(np.array(second) - np.array(target)) > 0.02  # stopped short


def test_one_motion_at_a_time_a_second_is_503(cell: MockStack) -> None:
    run_action(cell, "arm.home", {})
    origin = scene(cell)["gripper"]["tool_position"]
    target = [origin[0], origin[1] + 0.2, origin[2] - 0.1]
    first = cell.start("arm.move_to_pose", {"position": target, "speed": 0.03})
    cell.poll(first["invocation_id"], lambda s: s["phase"] == "running", 30.0)
    same_tool = cell.invoke("arm.move_to_pose", {"position": origin})
    other_tool = cell.invoke("arm.home", {})
    for response in (same_tool, other_tool):
        assert response.status_code == 503, response.text
        assert response.json()["error"]["retryable"] is True
    cell.http.post(f"/invocations/{first['invocation_id']}/cancel")
    assert cell.terminal(first["invocation_id"], timeout_s=30.0)["phase"] == "cancelled"


# ------------------------------------------------------------------ straight lines


def tool_position(cell: MockStack) -> np.ndarray:
    response = cell.http.post("/tools/world/scene_state:invoke", json={"arguments": {}})
    outputs = cell.data(response)["response"]["result"]["outputs"]
    return np.array(outputs["gripper"]["tool_position"], dtype=float)


def test_a_linear_move_keeps_the_measured_tool_on_the_line(cell: MockStack) -> None:
    home = cell.start("arm.home", {})
    assert cell.terminal(home["invocation_id"], timeout_s=60.0)["phase"] == "completed"
    start = tool_position(cell)
    end = start + np.array([0.1, 0.2, -0.15])
    admitted = cell.start(
        "arm.move_to_pose", {"position": end.tolist(), "path": "linear", "speed": 0.1}
    )
    seen: list[np.ndarray] = []

    def done(status: dict[str, Any]) -> bool:
        seen.append(tool_position(cell))
        return bool(status["terminal"])

    final = cell.poll(admitted["invocation_id"], done, timeout_s=60.0)
    assert final["phase"] == "completed", final
    assert len(seen) >= 5
    assert max(distance_to_segment(p, start, end) for p in seen) < SIM_LINE_TOLERANCE_M
    assert np.linalg.norm(tool_position(cell) - end) < 0.01


def test_an_infeasible_line_is_refused_with_its_code_and_nothing_moves(cell: MockStack) -> None:
    before = tool_position(cell)
    refused = cell.invoke("arm.move_to_pose", {"position": [0.55, 0.4, 0.4], "path": "linear"})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    # The Gateway's pre-dispatch code; the provider's own code and details ride along.
    assert error["code"] == "FORGE_TOOL_ACTION_ADMISSION_REJECTED"
    assert error["details"]["provider_code"] == "ARM_LINEAR_PATH_INFEASIBLE"
    details = error["details"]["provider_error"]["details"]
    # Past the reach the seeded IK either fails or leaps to another branch.
    assert details["reason"] in ("no IK solution", "joint jump between neighbouring waypoints")
    assert 0 < details["waypoint"] < details["waypoints"]
    assert np.linalg.norm(tool_position(cell) - before) < 1e-3


# ------------------------------------------------------------------ a governed task

BOUND_TOOLS = [
    "world.scene_state",
    "arm.move_to_pose",
    "arm.home",
    "gripper.grasp",
    "gripper.release",
]
CONTRACT: dict[str, Any] = {
    "mode": "enforce",
    "goal": "the red cube rests inside the green target zone",
    "success_criteria": [
        {
            "kind": "state",
            "id": "cube_in_zone",
            "tool_id": "world.scene_state",
            "predicate": {
                "op": "inside_box",
                "value_path": "objects.cube.position",
                "center_path": "target_zone.center",
                "half_extents_path": "target_zone.half_extents",
            },
        },
        {
            "kind": "vision",
            "id": "cube_seen_in_zone",
            "source": "scene",
            "object_color": "red",
            "target_color": "green",
        },
    ],
    "evidence_policy": {"required_sources": ["scene"], "max_age_s": 5.0},
}


async def run_to_end(
    service: TaskService, task_id: str, tool_id: str, args: dict[str, Any]
) -> dict[str, Any]:
    record = await service.start_action(task_id, tool_id, args)

    async def finished() -> dict[str, Any] | None:
        answer = await service.result(task_id, record["record_id"])
        return answer["record"] if answer["status"] == "available" else None

    return await eventually_async(finished, within=60, what=f"{tool_id} to finish", interval=0.05)


@pytest.mark.anyio
async def test_a_bound_pick_and_place_is_verified_in_enforce_mode(
    cell: MockStack, tmp_path: Path
) -> None:
    reset = cell.start("world.reset", {"seed": 4})
    assert cell.terminal(reset["invocation_id"], timeout_s=30)["phase"] == "completed"
    service = TaskService(
        AgentTaskStore(tmp_path / "paos.db"),
        lambda url: ForgeToolClient(url, timeout_s=30),
        workspace=tmp_path / "workspace",
    )
    try:
        created = await service.create_task(
            CONTRACT["goal"], CONTRACT, BindingCandidate.adhoc(cell.base_url, BOUND_TOOLS)
        )
        task_id = created["task"]["task_id"]
        scene = await service.query("world.scene_state", {}, task_id=task_id)
        outputs: dict[str, Any] = scene["response"]["result"]["outputs"]
        for _, tool_id, arguments in plan_steps(outputs, say=lambda _: None):
            record = await run_to_end(service, task_id, tool_id, arguments)
            assert record["state"] == "completed", record
        described = await finalize(service, task_id)
    finally:
        await service.aclose()
    assert described["task"]["state"] == "succeeded", described["verifications"]
    (attempt,) = described["verifications"]
    statuses = {r["criterion_id"]: r["status"] for r in attempt["verdict"]["results"]}
    assert statuses == {"cube_in_zone": "pass", "cube_seen_in_zone": "pass"}
    captured = [a for a in described["evidence"] if a["error"] is None]
    phases = {a["phase"] for a in captured}
    assert phases == {"before", "after"}
    for artifact in captured:  # the retained bytes are the ones that were hashed
        data = (tmp_path / "workspace" / artifact["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == artifact["sha256"]
        assert data[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ last: the world killed


def test_killing_the_world_mid_motion_never_reports_success(cell: MockStack) -> None:
    run_action(cell, "arm.home", {})
    origin = scene(cell)["gripper"]["tool_position"]
    target = [origin[0], origin[1] - 0.25, origin[2] - 0.1]
    admitted = cell.start("arm.move_to_pose", {"position": target, "speed": 0.03})
    invocation_id = admitted["invocation_id"]
    cell.poll(invocation_id, lambda s: s["phase"] == "running", 30.0)
    cell.node(WORLD_MARK).send_signal(signal.SIGKILL)
    final = cell.terminal(invocation_id, timeout_s=30.0)
    assert final["phase"] in ("failed", "unknown"), final
