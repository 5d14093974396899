"""Pick-and-place on every shipped robot model under a real ``dora run``, over HTTP only.

sim_arm runs in ``test_sim_cell.py``; here the OpenArm v2 cell (``dataflows/sim-openarm.yml``:
the same nodes, each with ``--profile openarm``, and the left arm's pair with ``--arm left``)
runs the demo's unchanged script for three seeds, the world reset between them rather than
Dora restarted; then the left arm moves on its own endpoints; and ``doraforge demo --robot
openarm`` verifies its task.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doraforge.cli.demos.pick_place import pick_and_place
from doraforge.dataflows import DATAFLOWS
from doraforge.skill_runtime.dora_run import dora_environment
from tests.e2e.conftest import SIM_ENV, SIM_TOOLS, MockStack, dataflow_stack
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

OPENARM_TOOLS = (*SIM_TOOLS, "arm_left.move_to_pose", "gripper_left.grasp")


# First, before the module's cell starts: the demo runs its own OpenArm cell, and two
# unpaced OpenArm worlds rendering side by side would share the same two cores.
# The whole demo (pack, install, start, nine tool calls, verify, stop) outlasts the default
# per-test timeout on a loaded machine; run_demo bounds it itself and stops what it started.
@pytest.mark.timeout(480)
def test_the_demo_on_openarm_verifies_its_pick_and_place(tmp_path: Path) -> None:
    from tests.e2e.test_demo import run_demo

    out = tmp_path / "demo"
    env = dora_environment({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    stdout = run_demo(env, "--robot", "openarm", "--seed", "2", "--out", str(out), timeout_s=400)
    assert "(sim-openarm profile, robot openarm)" in stdout
    assert "verdict: success · task succeeded · robot openarm" in stdout


@pytest.fixture(scope="module")
def openarm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    directory = tmp_path_factory.mktemp("sim-openarm-dataflow")
    with dataflow_stack(
        directory, DATAFLOWS / "sim-openarm.yml", OPENARM_TOOLS, SIM_ENV, start_timeout_s=180.0
    ) as running:
        yield running


def scene(cell: MockStack) -> dict[str, Any]:
    response = cell.http.post("/tools/world/scene_state:invoke", json={"arguments": {}})
    result = cell.data(response)["response"]["result"]
    assert result["status"] == "succeeded", result
    outputs: dict[str, Any] = result["outputs"]
    return outputs


def test_the_world_is_ready_only_once_it_has_stepped(openarm: MockStack) -> None:
    """The first row on the cell: the fixture waited for readiness only, and OpenArm's
    model takes seconds to build after its tools register, so a scene Query answered at
    once shows that ``world.scene_state`` waits for the world's own ``ready`` status."""
    context = openarm.context("world.scene_state")
    assert context["readiness"] == {"endpoint_registered": True, "endpoint_ready": True}
    assert context["endpoint_status"]["state"] == "ready"
    assert scene(openarm)["sim_time"] > 0  # not WORLD_NOT_READY
    # world.reset is how a diverged (unavailable) world recovers: it must stay callable.
    assert "endpoint_ready" not in openarm.context("world.reset")["readiness"]


def test_the_tools_carry_openarms_frames(openarm: MockStack) -> None:
    frames = openarm.context("arm.move_to_pose")["robot_frame_profile"]
    assert frames["robot_id"] == "openarm"
    assert frames["tool_frame"] == "right_tool_center"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pick_and_place_on_openarm_puts_the_cube_in_the_target(
    openarm: MockStack, tmp_path: Path, seed: int
) -> None:
    admitted = openarm.start("world.reset", {"seed": seed})
    assert openarm.terminal(admitted["invocation_id"], timeout_s=60.0)["phase"] == "completed"
    assert scene(openarm)["seed"] == seed
    report = pick_and_place(openarm.http, tmp_path, say=lambda _: None)
    assert report.success, report.steps
    assert scene(openarm)["predicates"]["cube_in_target_and_resting"] is True


def outputs(cell: MockStack, endpoint: str, operation: str) -> dict[str, Any]:
    """A state Query's outputs, once it has state to answer from (a node just started may
    answer ``*_NO_STATE`` until its first joint_state arrives)."""

    def answered() -> dict[str, Any] | None:
        response = cell.http.post(f"/tools/{endpoint}/{operation}:invoke", json={"arguments": {}})
        result = cell.data(response)["response"]["result"]
        return dict(result["outputs"]) if result["status"] == "succeeded" else None

    found = eventually(answered, within=30.0, what=f"{endpoint}/{operation} to answer")
    assert found is not None
    return found


def test_the_left_arm_is_its_own_pair_of_endpoints_in_its_own_frame(openarm: MockStack) -> None:
    frames = openarm.context("arm_left.move_to_pose")["robot_frame_profile"]
    assert frames["tool_frame"] == "left_tool_center"
    assert frames["directions"]["approach"]["frame"] == "left_tool_center"
    right_before = outputs(openarm, "arm", "arm_state")["position"]
    target = [0.2, 0.15, 0.1]
    admitted = openarm.start("arm_left.move_to_pose", {"position": target, "yaw": 3.1})
    assert openarm.terminal(admitted["invocation_id"], timeout_s=60.0)["phase"] == "completed"
    reached = outputs(openarm, "arm_left", "arm_state")["position"]
    assert max(abs(a - b) for a, b in zip(reached, target, strict=True)) < 0.01
    right_after = outputs(openarm, "arm", "arm_state")["position"]
    assert max(abs(a - b) for a, b in zip(right_before, right_after, strict=True)) < 0.005
    grasp = openarm.start("gripper_left.grasp", {})
    assert openarm.terminal(grasp["invocation_id"], timeout_s=60.0)["phase"] == "completed"
    assert outputs(openarm, "gripper_left", "gripper_state")["width"] < 0.01
    assert (
        outputs(openarm, "gripper", "gripper_state")["width"] > 0.08
    )  # the right gripper stayed open
