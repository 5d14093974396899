"""The simulated cell under a real ``dora run dataflows/sim.yml``, driven over HTTP only."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from doraforge.cli.demos.pick_place import pick_and_place
from tests.e2e.conftest import MockStack, sim_stack
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

WORLD_MARK = "-m doraforge.nodes.world"


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    """One simulated cell (unpaced physics) shared by the module's tests."""
    with sim_stack(tmp_path_factory.mktemp("sim-dataflow")) as running:
        yield running


def scene(cell: MockStack) -> dict[str, Any]:
    response = cell.http.post("/tools/world/scene_state:invoke", json={"arguments": {}})
    result = cell.data(response)["response"]["result"]
    assert result["status"] == "succeeded", result
    return result["outputs"]


def run_action(cell: MockStack, tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    admitted = cell.start(tool_id, arguments)
    return cell.terminal(admitted["invocation_id"], timeout_s=60.0)


def red_mask(path: Path) -> np.ndarray:
    """Pixels of the red cube in a saved frame."""
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    blue, green, red = (bgr[:, :, channel].astype(int) for channel in range(3))
    return (red > 120) & (green < 70) & (blue < 70)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pick_and_place_puts_the_cube_in_the_target_zone(
    cell: MockStack, tmp_path: Path, seed: int
):
    reset = run_action(cell, "world.reset", {"seed": seed})
    assert reset["phase"] == "completed", reset
    assert scene(cell)["seed"] == seed
    report = pick_and_place(cell.http, tmp_path, say=lambda _: None)
    final = scene(cell)
    assert report.success
    assert final["predicates"]["cube_in_target_and_resting"] is True
    # The evidence shows it: where the cube was red before, it is not red after.
    before, after = red_mask(report.before_png), red_mask(report.after_png)
    assert before.sum() > 30, "the cube is visible in the before frame"
    assert after.sum() > 30, "the cube is visible in the after frame"
    assert (before & after).sum() < 0.2 * before.sum()


def test_targets_outside_the_workspace_or_malformed_are_rejected_before_motion(cell: MockStack):
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


def test_cancel_mid_motion_holds_the_arm_still_and_reports_cancelled(cell: MockStack):
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
        velocity = cell.http.get("/observations/state").json()["data"]["joint_state"]["velocity"]
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


def test_one_motion_at_a_time_a_second_is_503(cell: MockStack):
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


def test_killing_the_world_mid_motion_never_reports_success(cell: MockStack):
    run_action(cell, "arm.home", {})
    origin = scene(cell)["gripper"]["tool_position"]
    target = [origin[0], origin[1] - 0.25, origin[2] - 0.1]
    admitted = cell.start("arm.move_to_pose", {"position": target, "speed": 0.03})
    invocation_id = admitted["invocation_id"]
    cell.poll(invocation_id, lambda s: s["phase"] == "running", 30.0)
    cell.node(WORLD_MARK).send_signal(signal.SIGKILL)
    final = cell.terminal(invocation_id, timeout_s=30.0)
    assert final["phase"] in ("failed", "unknown"), final
