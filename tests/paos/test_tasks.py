"""Governed AgentTasks against a real in-process Gateway with the mock provider."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app
from doraforge.gateway.local import LocalCarrier, LocalProvider
from doraforge.paos import finalize as finishing
from doraforge.paos.agent_tools import TOOLS
from doraforge.paos.binding import BindingCandidate, BindingError
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.errors import ForgeTimeout
from doraforge.paos.store import AgentTaskStore, NewRecord, TaskSlotTaken
from doraforge.paos.tasks import TaskError, TaskService
from tests.gateway.harness import mock_config, mock_handler
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1"
TOOLS_USED = ["mock.move", "mock.stream", "mock.stats", "mock.echo"]
OFF = {"mode": "off", "goal": "move the mock"}
QUICK = {"duration_s": 0, "behaviour": "succeed"}
MOVED = {
    "mode": "enforce",
    "goal": "the mock moved",
    "success_criteria": [
        {
            "kind": "state",
            "id": "moved",
            "tool_id": "mock.stats",
            "predicate": {"op": "greater_than", "value_path": "invokes.move", "value": 0},
        }
    ],
}


class Flaky(httpx.AsyncBaseTransport):
    """Forwards to the app, but loses the answer to chosen requests (a timeout)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.lose: Callable[[httpx.Request], bool] = lambda request: False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if self.lose(request):
            await response.aread()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response


@dataclass
class Cell:
    gateway: Gateway
    provider: LocalProvider
    transport: Flaky
    service: TaskService

    def invokes(self, operation: str) -> int:
        return sum(
            1
            for e in self.provider.received
            if e.message_type == "tool.invoke.request" and e.operation == operation
        )


@pytest.fixture
async def cell(tmp_path: Path) -> AsyncIterator[Cell]:
    carrier = LocalCarrier()
    gateway = Gateway(mock_config(), send=carrier.send)
    provider = carrier.add(LocalProvider("mock", mock_handler), gateway.on_message)
    provider.register()
    await eventually_async(
        lambda: gateway.registry.current("mock") is not None, what="the mock registered"
    )
    transport = Flaky(httpx.ASGITransport(app=create_app(gateway)))
    service = TaskService(
        AgentTaskStore(tmp_path / "paos.db"),
        lambda url: ForgeToolClient(url, transport=transport),
        workspace=tmp_path / "workspace",
    )
    yield Cell(gateway, provider, transport, service)
    await service.aclose()
    service.store.close()


async def new_task(cell: Cell, contract: dict[str, Any] = OFF) -> str:
    created = await cell.service.create_task(
        "move the mock", contract, BindingCandidate.adhoc(URL, TOOLS_USED)
    )
    task_id: str = created["task"]["task_id"]
    return task_id


async def until_terminal(cell: Cell, task_id: str, record_id: str) -> dict[str, Any]:
    async def available() -> dict[str, Any] | None:
        answer = await cell.service.result(task_id, record_id)
        return answer["record"] if answer["status"] == "available" else None

    return await eventually_async(available, what=f"record {record_id}", interval=0.01)


async def test_a_bound_action_is_an_intent_then_ids_then_a_terminal_fact(cell: Cell) -> None:
    task_id = await new_task(cell)
    started = await cell.service.start_action(
        task_id, "mock.move", {"duration_s": 0.05, "behaviour": "succeed"}
    )
    assert started["invocation_id"]
    assert started["attempt_id"]
    assert started["state"] in ("accepted", "running")
    gateway_view = cell.gateway.runtime.get(started["invocation_id"])
    assert gateway_view.caller_id == started["caller_id"]
    final = await until_terminal(cell, task_id, started["record_id"])
    assert final["state"] == "completed"
    assert final["result"]["outputs"] == {"travelled_s": 0.05}
    assert cell.invokes("move") == 1


async def test_a_binding_names_the_robot_its_tools_act_on(cell: Cell) -> None:
    task_id = await new_task(cell)
    assert cell.service.describe(task_id)["binding"]["robots"] == ["mock-arm"]


async def test_a_diagnostic_query_needs_no_task_and_leaves_no_record(cell: Cell) -> None:
    data = await cell.service.query("mock.echo", {"message": "hi"}, gateway_url=URL)
    assert data["response"]["result"]["outputs"] == {"message": "hi"}
    task_id = await new_task(cell)
    assert cell.service.store.records(task_id) == []
    bound = await cell.service.query("mock.echo", {"message": "yo"}, task_id=task_id)
    assert bound["response"]["result"]["status"] == "succeeded"
    (record,) = cell.service.store.records(task_id)
    assert (record.semantics, record.state) == ("query", "completed")


async def test_only_one_task_is_active(cell: Cell) -> None:
    await new_task(cell)
    with pytest.raises(TaskSlotTaken):
        await new_task(cell)


async def test_a_lost_admission_answer_is_indeterminate_and_never_sent_again(cell: Cell) -> None:
    task_id = await new_task(cell)
    cell.transport.lose = lambda r: r.method == "POST" and r.url.path.endswith("mock.move:invoke")
    with pytest.raises(ForgeTimeout) as caught:
        await cell.service.start_action(
            task_id, "mock.move", {"duration_s": 0, "behaviour": "succeed"}
        )
    assert caught.value.remote_state == "unknown"
    (record,) = cell.service.store.records(task_id)
    assert (record.state, record.invocation_id) == ("indeterminate", None)
    assert cell.invokes("move") == 1
    cell.transport.lose = lambda r: False
    await eventually_async(
        lambda: (
            (invocation := cell.gateway.runtime.store.latest_for_caller(record.caller_id))
            is not None
            and invocation.terminal
        ),
        what="the lost invocation to end at the Gateway",
    )
    (reconciled,) = await cell.service.reconcile(task_id)
    assert reconciled["invocation_id"] is not None  # found by caller_id, read only
    assert reconciled["state"] == "completed"
    assert cell.invokes("move") == 1  # reconcile never POSTs


async def test_a_crash_between_intent_and_post_reconciles_to_unknown_without_posting(
    cell: Cell,
) -> None:
    task_id = await new_task(cell)
    task = cell.service.store.task(task_id)
    cell.service.store.record_intent(
        NewRecord(
            record_id="rec_crash",
            task_id=task_id,
            revision_id=cell.service.store.current_revision(task_id).revision_id,
            tool_id="mock.move",
            semantics="action",
            caller_id="paos:crash:1",
            arguments_sha256="x",
            spec_sha256="y",
        )
    )
    del task
    (record,) = await cell.service.reconcile(task_id)
    assert record["state"] == "unknown"
    assert record["error"]["code"] == "PAOS_NEVER_ADMITTED"
    assert cell.invokes("move") == 0


async def test_toolspec_drift_after_binding_is_refused_before_any_post(cell: Cell) -> None:
    task_id = await new_task(cell)
    spec = cell.gateway.catalog.get("mock.move")
    assert spec is not None
    spec.sha256 = "0" * 64  # the Gateway now serves another spec
    with pytest.raises(BindingError) as caught:
        await cell.service.start_action(
            task_id, "mock.move", {"duration_s": 0, "behaviour": "succeed"}
        )
    assert caught.value.code == "PAOS_TOOL_SPEC_DRIFT"
    assert cell.service.store.records(task_id) == []
    assert cell.invokes("move") == 0


async def test_non_finite_arguments_are_refused_before_an_intent_or_a_post(cell: Cell) -> None:
    task_id = await new_task(cell)
    with pytest.raises(TaskError) as caught:
        await cell.service.start_action(
            task_id, "mock.move", {"duration_s": float("nan"), "behaviour": "succeed"}
        )
    assert caught.value.code == "PAOS_ARGUMENTS_INVALID"
    assert cell.service.store.records(task_id) == []
    assert cell.invokes("move") == 0


async def test_a_cancel_is_recorded_as_a_request_not_as_a_stop(cell: Cell) -> None:
    task_id = await new_task(cell)
    started = await cell.service.start_action(
        task_id, "mock.move", {"duration_s": 5, "behaviour": "hang"}
    )
    answer = await cell.service.cancel(task_id, started["record_id"])
    assert answer["record"]["cancel"]["status"] == "accepted"
    assert answer["record"]["state"] != "cancelled"  # a request, not a stop
    final = await until_terminal(cell, task_id, started["record_id"])
    assert final["state"] == "cancelled"


async def test_a_record_that_ends_while_its_cancel_is_on_the_way_is_answered_terminal(
    cell: Cell,
) -> None:
    task_id = await new_task(cell)
    started = await cell.service.start_action(
        task_id, "mock.move", {"duration_s": 5, "behaviour": "hang"}
    )
    other = AgentTaskStore(cell.service.store.path)  # another process: the agent polling

    def ended_meanwhile(request: httpx.Request) -> bool:
        if request.url.path.endswith("/cancel"):
            other.record_terminal(started["record_id"], "completed", result={"status": "succeeded"})
        return False

    cell.transport.lose = ended_meanwhile
    answer = await cell.service.cancel(task_id, started["record_id"])
    other.close()
    assert answer["control"]["status"] == "terminal"
    assert answer["record"]["state"] == "completed"


async def test_a_result_another_process_recorded_first_is_read_not_refused(cell: Cell) -> None:
    task_id = await new_task(cell)
    started = await cell.service.start_action(task_id, "mock.move", QUICK)
    other = AgentTaskStore(cell.service.store.path)  # the canceller's process, reconciling
    outcome = {"status": "succeeded", "outputs": {"by": "the other process"}}

    def recorded_meanwhile(request: httpx.Request) -> bool:
        # The Gateway answered the result: the other process records it before this one.
        answered = cell.gateway.runtime.get(started["invocation_id"]).terminal
        first = not other.record(started["record_id"]).terminal
        if request.url.path.endswith("/result") and answered and first:
            other.record_terminal(started["record_id"], "completed", result=outcome)
        return False

    cell.transport.lose = recorded_meanwhile
    final = await until_terminal(cell, task_id, started["record_id"])
    other.close()
    assert final["state"] == "completed"
    assert final["result"]["outputs"] == {"by": "the other process"}


async def test_task_owned_sessions_block_finalize_and_shared_ones_survive(cell: Cell) -> None:
    task_id = await new_task(cell)
    owned = await cell.service.start_session(task_id, "mock.stream", {}, ownership="task")
    shared = await cell.service.start_session(task_id, "mock.stream", {}, ownership="shared")
    with pytest.raises(TaskError) as caught:
        await finishing.finalize(cell.service, task_id)
    assert caught.value.code == "PAOS_SESSIONS_LIVE"
    with pytest.raises(TaskError) as refused:
        await cell.service.stop(task_id, shared["record_id"])
    assert refused.value.code == "PAOS_SESSION_NOT_OWNED"
    await cell.service.stop(task_id, owned["record_id"])
    assert (await until_terminal(cell, task_id, owned["record_id"]))["state"] == "stopped"
    described = await finishing.finalize(cell.service, task_id)
    assert described["task"]["state"] == "succeeded"
    assert cell.gateway.runtime.get(shared["invocation_id"]).terminal is False


async def test_enforce_mode_finalizes_on_the_verifier_and_records_the_attempt(cell: Cell) -> None:
    task_id = await new_task(cell, MOVED)
    started = await cell.service.start_action(
        task_id, "mock.move", {"duration_s": 0, "behaviour": "succeed"}
    )
    await until_terminal(cell, task_id, started["record_id"])
    described = await finishing.finalize(cell.service, task_id)
    assert described["task"]["state"] == "succeeded"
    (attempt,) = described["verifications"]
    assert attempt["verdict"]["status"] == "success"
    assert described["revisions"][0]["verdict"]["status"] == "success"


async def test_enforce_fails_closed_when_the_action_failed(cell: Cell) -> None:
    task_id = await new_task(cell, MOVED)
    started = await cell.service.start_action(
        task_id, "mock.move", {"duration_s": 0, "behaviour": "fail"}
    )
    assert (await until_terminal(cell, task_id, started["record_id"]))["state"] == "failed"
    described = await finishing.finalize(cell.service, task_id)
    assert described["task"]["state"] == "failed"


async def test_cancel_task_cancels_live_actions_and_ends_cancelled(cell: Cell) -> None:
    task_id = await new_task(cell)
    await cell.service.start_action(task_id, "mock.move", {"duration_s": 5, "behaviour": "hang"})

    described = await finishing.cancel_task(cell.service, task_id)
    assert described["task"]["state"] == "cancelled"
    (record,) = described["records"]
    assert record["state"] == "cancelled"
    assert cell.service.store.active_task() is None


async def test_agent_tools_validate_arguments_and_answer_envelopes(cell: Cell) -> None:
    assert len(TOOLS) == 16  # the 15 forge_* tools and activate_skill
    bad = await TOOLS["forge_tool_start_action"](cell.service, {"task_id": "t"})
    assert bad["ok"] is False
    assert bad["error"]["code"] == "PAOS_INVALID_ARGUMENTS"
    created = await TOOLS["forge_task_create"](
        cell.service,
        {"goal": "g", "contract": OFF, "gateway_url": URL, "required_tools": ["mock.move"]},
    )
    assert created["ok"] is True
    task_id = created["data"]["task"]["task_id"]
    unbound = await TOOLS["forge_tool_start_action"](
        cell.service, {"task_id": task_id, "tool_id": "mock.stream", "arguments": {}}
    )
    assert unbound["ok"] is False
    assert unbound["error"]["code"] == "PAOS_TOOL_NOT_BOUND"
    got = await TOOLS["forge_task_get"](cell.service, {"task_id": task_id})
    assert got["data"]["binding"]["tools"]["mock.move"]["spec_sha256"]


async def test_recovery_mode_replans_once_after_a_failed_verdict_and_then_succeeds(
    cell: Cell,
) -> None:
    contract = {
        "mode": "recovery",
        "goal": "the mock moved twice",
        "replan_budget": 1,
        "success_criteria": [
            {
                "kind": "state",
                "id": "twice",
                "tool_id": "mock.stats",
                "predicate": {"op": "greater_than", "value_path": "invokes.move", "value": 1},
            }
        ],
    }
    task_id = await new_task(cell, contract)
    quick = {"duration_s": 0, "behaviour": "succeed"}
    first = await cell.service.start_action(task_id, "mock.move", quick)
    await until_terminal(cell, task_id, first["record_id"])
    described = await finishing.finalize(cell.service, task_id)
    assert described["task"]["state"] == "awaiting_replan"
    assert described["revisions"][0]["verdict"]["status"] == "replan_required"
    with pytest.raises(TaskError):  # no Action while awaiting a replan
        await cell.service.start_action(task_id, "mock.move", quick)
    await finishing.begin_revision(cell.service, task_id, "move once more")
    second = await cell.service.start_action(task_id, "mock.move", quick)
    await until_terminal(cell, task_id, second["record_id"])
    described = await finishing.finalize(cell.service, task_id)
    assert described["task"]["state"] == "succeeded"
    assert [r["ordinal"] for r in described["revisions"]] == [1, 2]
    assert described["task"]["replans_used"] == 1


@pytest.fixture
async def camera_cell(tmp_path: Path) -> AsyncIterator[Cell]:
    """The mock cell plus a camera source fed with fresh, textured frames."""
    import numpy as np
    from forge_msgs import Image

    from doraforge.gateway.config import ImageSource, ObservationsConfig

    carrier = LocalCarrier()
    observations = ObservationsConfig(images=[ImageSource(source="scene", input="image_scene")])
    gateway = Gateway(mock_config(observations=observations), send=carrier.send)
    provider = carrier.add(LocalProvider("mock", mock_handler), gateway.on_message)
    provider.register()
    await eventually_async(
        lambda: gateway.registry.current("mock") is not None, what="the mock registered"
    )
    rng = np.random.default_rng(7)

    async def feed() -> None:
        for seq in range(1, 100_000):
            pixels = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
            value = Image.from_numpy(pixels).to_arrow()
            gateway.observations.on_input(
                "image_scene", value, {"seq": seq, "stamp_ns": time.time_ns()}
            )
            await asyncio.sleep(0.01)

    feeder = asyncio.get_running_loop().create_task(feed())
    transport = Flaky(httpx.ASGITransport(app=create_app(gateway)))
    service = TaskService(
        AgentTaskStore(tmp_path / "paos.db"),
        lambda url: ForgeToolClient(url, transport=transport),
        workspace=tmp_path / "workspace",
    )
    yield Cell(gateway, provider, transport, service)
    feeder.cancel()
    await service.aclose()
    service.store.close()


WITH_EVIDENCE = {**MOVED, "evidence_policy": {"required_sources": ["scene"], "max_age_s": 5.0}}


async def moved_with_evidence(cell: Cell) -> str:
    task_id = await new_task(cell, WITH_EVIDENCE)
    started = await cell.service.start_action(task_id, "mock.move", QUICK)
    await until_terminal(cell, task_id, started["record_id"])
    return task_id


async def test_before_and_after_evidence_is_captured_and_hashed_on_disk(camera_cell: Cell) -> None:
    task_id = await moved_with_evidence(camera_cell)
    evidence = camera_cell.service.store.evidence(task_id)
    assert [(a["phase"], a["error"]) for a in evidence] == [("before", None), ("after", None)]
    before, after = evidence
    assert after["captured_at_ns"] > before["captured_at_ns"]
    described = await finishing.finalize(camera_cell.service, task_id)
    assert described["task"]["state"] == "succeeded"
    assert described["verifications"][0]["bundle"]["ok"] is True


async def test_the_step_an_agent_names_captions_its_record_and_evidence_frames(
    camera_cell: Cell,
) -> None:
    task_id = await new_task(camera_cell, WITH_EVIDENCE)
    answer = await TOOLS["forge_tool_start_action"](
        camera_cell.service,
        {"task_id": task_id, "tool_id": "mock.move", "arguments": QUICK, "step": "descend"},
    )
    assert answer["ok"] is True, answer
    await until_terminal(camera_cell, task_id, answer["data"]["record_id"])
    evidence = camera_cell.service.store.evidence(task_id)
    assert [(a["phase"], a["step"]) for a in evidence] == [
        ("before", "descend"),
        ("after", "descend"),
    ]
    [record] = camera_cell.service.describe(task_id)["records"]
    assert record["step"] == "descend"


async def test_evidence_altered_on_disk_makes_verification_refuse_the_bundle(
    camera_cell: Cell,
) -> None:
    task_id = await moved_with_evidence(camera_cell)
    after = camera_cell.service.store.evidence(task_id)[-1]
    file = camera_cell.service.workspace / after["path"]
    file.write_bytes(file.read_bytes()[:-16] + b"\x00" * 16)
    described = await finishing.finalize(camera_cell.service, task_id)
    assert described["task"]["state"] == "failed"
    (attempt,) = described["verifications"]
    assert attempt["bundle"]["ok"] is False
    assert "EVIDENCE_HASH_MISMATCH" in {p["code"] for p in attempt["bundle"]["problems"]}
    assert {r["status"] for r in attempt["verdict"]["results"]} == {"inconclusive"}
