"""A governed pick-and-place task on the simulated cell, verified in enforce mode."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doraforge.cli.demos.pick_place import plan_steps
from doraforge.paos.binding import BindingCandidate
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.finalize import finalize
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.tasks import TaskService
from tests.e2e.conftest import MockStack, sim_stack
from tests.support.waiting import eventually_async

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

BOUND_TOOLS = [
    "world.scene_state",
    "arm.move_to_pose",
    "arm.home",
    "gripper.grasp",
    "gripper.release",
]
CONTRACT = {
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


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    with sim_stack(tmp_path_factory.mktemp("paos-sim")) as running:
        yield running


async def run_to_end(service: TaskService, task_id: str, tool_id: str, args: dict) -> dict:
    record = await service.start_action(task_id, tool_id, args)

    async def finished() -> dict | None:
        answer = await service.result(task_id, record["record_id"])
        return answer["record"] if answer["status"] == "available" else None

    return await eventually_async(finished, within=60, what=f"{tool_id} to finish", interval=0.05)


async def test_a_bound_pick_and_place_is_verified_in_enforce_mode(cell: MockStack, tmp_path: Path):
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
