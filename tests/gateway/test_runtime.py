"""The Tool Runtime through the public Gateway surface, with a fake clock where time matters."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from forge_tool import ToolEnvelope, ToolEvent, ToolEventType, make_event_envelope

from doraforge.gateway import wire
from doraforge.gateway.invocation import TERMINAL_PHASES, can_advance
from doraforge.gateway.journal import FileJournal
from tests.gateway.harness import Stack, running_stack
from tests.gateway.support import (
    assert_error,
    data,
    invoke_requests,
    read,
    start,
    tool_spec,
    wait_terminal,
    with_overrides,
)
from tests.support.clock import FakeClock
from tests.support.waiting import eventually_async, settle

pytestmark = pytest.mark.anyio

HANG = {"duration_s": 1, "behaviour": "hang"}
QUICK = {"duration_s": 0, "behaviour": "succeed"}
RANK = {"dispatching": 0, "accepted": 1, "running": 2, "stopping": 3}


def rank(phase: str) -> int:
    return 4 if phase in TERMINAL_PHASES else RANK[phase]


async def context(stack: Stack, tool_id: str = "mock.move") -> dict[str, Any]:
    document: dict[str, Any] = data(await stack.client.get(f"/tools/{tool_id}/context"))
    return document


def halt_at_provider(stack: Stack, invocation_id: str) -> None:
    """Cancel an attempt directly at the provider, as if its own operator stopped it."""
    invocation = stack.gateway.runtime.store.get(invocation_id)
    assert invocation is not None
    spec = tool_spec(stack.gateway, invocation.tool_id)
    envelope = wire.control_request(
        wire.execution_context(spec, invocation.invocation_id, invocation.attempt_id),
        "cancel",
        request_id=f"operator-{invocation_id}",
        instance_id=str(invocation.endpoint_instance_id),
    )
    stack.provider.receive(envelope)


async def renew_lease(stack: Stack) -> None:
    """Send the provider's periodic registration and wait for the Gateway's answer."""
    answered = len(stack.provider.registry_responses)
    stack.provider.register()
    await eventually_async(
        lambda: len(stack.provider.registry_responses) > answered, what="the registry answer"
    )


async def cancel_and_wait(stack: Stack, invocation_id: str) -> None:
    response = await stack.client.post(f"/invocations/{invocation_id}/cancel")
    assert response.status_code in (200, 202), response.text
    await wait_terminal(stack, invocation_id)


# ---------------------------------------------------------------- phases


def test_phase_order_is_forward_only_and_terminal_is_final() -> None:
    assert can_advance("dispatching", "accepted")
    assert can_advance("accepted", "running")
    assert can_advance("running", "stopping")
    assert not can_advance("running", "accepted")
    assert not can_advance("stopping", "running")
    assert not can_advance("running", "running")
    for terminal in TERMINAL_PHASES:
        assert can_advance("running", terminal)
        assert not can_advance(terminal, "running")
        assert not can_advance(terminal, "unknown")


async def test_phases_never_regress_and_result_is_retained_before_terminal_phase() -> None:
    async with running_stack() as stack:
        admitted = await start(stack, "mock.move", {"duration_s": 0.2, "behaviour": "succeed"})
        invocation = stack.gateway.runtime.store.get(admitted["invocation_id"])
        assert invocation is not None
        seen: list[str] = [admitted["phase"]]

        def observe() -> bool:
            if invocation.phase != seen[-1]:
                seen.append(invocation.phase)
            if invocation.terminal:
                assert invocation.result is not None  # retained before the phase shows
            return invocation.terminal

        await eventually_async(observe, what="move completion")
        assert seen[-1] == "completed"
        assert "running" in seen
        assert [rank(p) for p in seen] == sorted(rank(p) for p in seen)
        assert invocation.result == {"status": "succeeded", "outputs": {"travelled_s": 0.2}}
        terminal_events = [e for e in invocation.events if e.type == "terminal"]
        assert len(terminal_events) == 1
        assert terminal_events[0].data["result"] == invocation.result


async def test_late_provider_events_do_not_change_a_terminal_invocation() -> None:
    async with running_stack() as stack:
        admitted = await start(stack, "mock.move", QUICK)
        done = await wait_terminal(stack, admitted["invocation_id"])
        invocation = stack.gateway.runtime.store.get(admitted["invocation_id"])
        assert invocation is not None
        events_before = len(invocation.events)
        spec = tool_spec(stack.gateway, "mock.move")
        context_ = wire.execution_context(spec, invocation.invocation_id, invocation.attempt_id)
        kinds: tuple[ToolEventType, ...] = ("progress", "heartbeat", "executor_failed")
        for sequence, kind in enumerate(kinds, 100):
            stack.gateway.on_message(
                "mock",
                make_event_envelope(
                    ToolEvent(type=kind, data={}),
                    context_,
                    endpoint_instance_id=stack.provider.instance_id,
                    sequence=sequence,
                ),
            )
        after = await read(stack, admitted["invocation_id"])
        assert after["phase"] == "completed"
        assert after["result"] == done["result"]
        assert len(invocation.events) == events_before


# ---------------------------------------------------------------- deadlines and fencing


async def test_missed_deadline_is_unknown_and_keeps_the_slot_fenced_until_provider_terminal() -> (
    None
):
    clock = FakeClock()
    config = with_overrides(cancel_on_deadline=False)
    async with running_stack(config, clock=clock) as stack:
        admitted = await start(stack, "mock.move", HANG, timeout_ms=1000)
        invocation_id = admitted["invocation_id"]
        assert admitted["phase"] in ("accepted", "running")
        clock.advance(0.999)
        stack.gateway.runtime.tick()
        assert (await read(stack, invocation_id))["phase"] in ("accepted", "running")

        clock.advance(0.002)
        stack.gateway.runtime.tick()
        status = await read(stack, invocation_id)
        assert status["phase"] == "unknown"
        assert status["terminal"] is True
        error = status["result"]["error"]
        assert error["code"] == "FORGE_TOOL_DEADLINE_EXCEEDED_OUTCOME_UNKNOWN"
        result = data(await stack.client.get(f"/invocations/{invocation_id}/result"))
        assert result["status"] == "available"
        assert result["result"]["status"] == "unknown"

        # The attempt may still be moving: its slot stays taken.
        assert (await context(stack))["active_invocations"] == 1
        busy = await stack.client.post("/tools/mock.move:invoke", json={"arguments": QUICK})
        assert_error(busy, 503, "FORGE_TOOL_GATEWAY_BUSY")
        # Later ticks and polls do not free it while the provider still runs it.
        for _ in range(3):
            clock.advance(1.5)
            await renew_lease(stack)
            stack.gateway.runtime.tick()
            await settle()
        assert (await context(stack))["active_invocations"] == 1

        halt_at_provider(stack, invocation_id)
        await eventually_async(
            lambda: stack.gateway.runtime.active_count(tool_spec(stack.gateway, "mock.move")) == 0,
            what="slot release",
        )
        final = await read(stack, invocation_id)
        assert final["phase"] == "unknown"  # the provider's ``cancelled`` changes nothing
        assert final["result"] == status["result"]
        again = await start(stack, "mock.move", QUICK)
        assert (await wait_terminal(stack, again["invocation_id"]))["phase"] == "completed"


async def test_fenced_slot_is_freed_when_the_instance_is_gone() -> None:
    clock = FakeClock()
    config = with_overrides(cancel_on_deadline=False)
    async with running_stack(config, clock=clock) as stack:
        admitted = await start(stack, "mock.move", HANG, timeout_ms=500)
        clock.advance(1.0)
        stack.gateway.runtime.tick()
        assert (await read(stack, admitted["invocation_id"]))["phase"] == "unknown"
        assert (await context(stack))["active_invocations"] == 1
        halt_at_provider(stack, admitted["invocation_id"])  # tidy the old process's task
        await settle()
        stack.provider.restart()
        stack.provider.register()
        await eventually_async(
            lambda: len(stack.provider.registry_responses) == 2, what="the re-registration answer"
        )
        assert (await context(stack))["active_invocations"] == 0
        final = await read(stack, admitted["invocation_id"])
        assert final["result"]["error"]["code"] == "FORGE_TOOL_DEADLINE_EXCEEDED_OUTCOME_UNKNOWN"


async def test_deadline_with_cancel_on_deadline_asks_the_provider_to_stop_and_stays_unknown() -> (
    None
):
    clock = FakeClock()
    async with running_stack(clock=clock) as stack:
        admitted = await start(stack, "mock.move", HANG, timeout_ms=1000)
        clock.advance(1.5)
        stack.gateway.runtime.tick()
        spec = tool_spec(stack.gateway, "mock.move")
        await eventually_async(
            lambda: stack.gateway.runtime.active_count(spec) == 0, what="the slot released"
        )
        controls = [e for e in stack.provider.received if e.message_type == "tool.control.request"]
        assert len(controls) == 1
        assert controls[0].payload["command"] == "cancel"
        final = await read(stack, admitted["invocation_id"])
        assert final["phase"] == "unknown"
        assert final["result"]["error"]["code"] == "FORGE_TOOL_DEADLINE_EXCEEDED_OUTCOME_UNKNOWN"


# ---------------------------------------------------------------- provider instance loss


async def test_provider_replacement_in_flight_makes_the_invocation_unknown() -> None:
    async with running_stack() as stack:
        admitted = await start(stack, "mock.move", HANG)
        old_instance = stack.provider.instance_id
        halt_at_provider(stack, admitted["invocation_id"])  # the old process's task ends
        stack.provider.silent = True  # ...but the Gateway never hears about it
        await settle()
        stack.provider.restart()
        stack.provider.register()
        await eventually_async(
            lambda: len(stack.provider.registry_responses) == 2, what="the re-registration answer"
        )
        status = await read(stack, admitted["invocation_id"])
        assert status["phase"] == "unknown"
        assert status["endpoint_instance_id"] == old_instance
        assert status["result"]["error"]["code"] == "FORGE_TOOL_ENDPOINT_INSTANCE_LOST"
        assert (await context(stack))["active_invocations"] == 0
        fresh = await start(stack, "mock.move", QUICK)
        assert (await wait_terminal(stack, fresh["invocation_id"]))["phase"] == "completed"
        assert (await read(stack, fresh["invocation_id"]))["endpoint_instance_id"] != old_instance


async def test_lease_expiry_in_flight_makes_the_invocation_unknown() -> None:
    clock = FakeClock()
    async with running_stack(clock=clock) as stack:
        admitted = await start(stack, "mock.move", HANG)
        clock.advance(stack.gateway.config.lease_ttl_ms / 1000 + 0.01)
        stack.gateway.runtime.tick()
        status = await read(stack, admitted["invocation_id"])
        assert status["phase"] == "unknown"
        assert status["result"]["error"]["code"] == "FORGE_TOOL_ENDPOINT_INSTANCE_LOST"
        assert status["result"]["error"]["details"]["reason"] == "lease_expired"
        assert (await context(stack))["ready"] is False
        unavailable = await stack.client.post("/tools/mock.move:invoke", json={"arguments": QUICK})
        assert_error(unavailable, 503, "FORGE_TOOL_ENDPOINT_UNAVAILABLE")
        halt_at_provider(stack, admitted["invocation_id"])
        await settle()


# ---------------------------------------------------------------- one dispatch, no retries


async def test_exactly_one_provider_dispatch_per_admitted_invocation() -> None:
    clock = FakeClock()
    async with running_stack(clock=clock) as stack:
        ids = []
        for arguments in (QUICK, {"duration_s": 0, "behaviour": "fail"}):
            admitted = await start(stack, "mock.move", arguments)
            ids.append(admitted["invocation_id"])
            await wait_terminal(stack, admitted["invocation_id"])
        hung = await start(stack, "mock.move", HANG, timeout_ms=1000)
        ids.append(hung["invocation_id"])
        session = await start(stack, "mock.stream", {})
        ids.append(session["invocation_id"])
        for _ in range(5):  # deadlines, status polls and reconciliation must not re-dispatch
            clock.advance(1.2)
            await renew_lease(stack)
            stack.gateway.runtime.tick()
            await settle()
        stopped = await stack.client.post(f"/invocations/{session['invocation_id']}/stop")
        assert stopped.status_code in (200, 202)
        await wait_terminal(stack, session["invocation_id"])
        phases = [(await read(stack, i))["phase"] for i in ids]
        assert phases == ["completed", "failed", "unknown", "stopped"]
        assert invoke_requests(stack.provider.received) == 4
        assert invoke_requests(stack.provider.received, "move") == 3
        assert stack.gateway.runtime.dispatch_counts == {"mock.move": 3, "mock.stream": 1}
        attempts = {e.attempt_id for e in stack.provider.received if e.operation == "move"}
        assert len(attempts) == 3


# ---------------------------------------------------------------- caller_id dedupe


async def test_same_caller_id_and_content_returns_the_same_invocation_without_dispatch() -> None:
    async with running_stack() as stack:
        first = await start(stack, "mock.move", HANG, caller_id="task-1/step-1")
        second = await start(stack, "mock.move", HANG, caller_id="task-1/step-1")
        assert first["duplicate"] is False
        assert second["duplicate"] is True
        assert second["invocation_id"] == first["invocation_id"]
        assert second["attempt_id"] == first["attempt_id"]
        assert invoke_requests(stack.provider.received, "move") == 1
        await cancel_and_wait(stack, first["invocation_id"])
        third = await start(stack, "mock.move", HANG, caller_id="task-1/step-1")
        assert third["invocation_id"] == first["invocation_id"]
        assert third["phase"] == "cancelled"
        assert invoke_requests(stack.provider.received, "move") == 1
        assert len(stack.gateway.runtime.store) == 1


async def test_same_caller_id_with_different_content_is_a_conflict() -> None:
    async with running_stack() as stack:
        first = await start(stack, "mock.move", QUICK, caller_id="c-1")
        await wait_terminal(stack, first["invocation_id"])
        other_args = await stack.client.post(
            "/tools/mock.move:invoke",
            json={"arguments": {"duration_s": 0, "behaviour": "fail"}, "caller_id": "c-1"},
        )
        error = assert_error(other_args, 409, "FORGE_TOOL_CALLER_ID_CONFLICT")
        assert error["details"]["invocation_id"] == first["invocation_id"]
        other_tool = await stack.client.post(
            "/tools/mock.stream:invoke", json={"arguments": {}, "caller_id": "c-1"}
        )
        assert_error(other_tool, 409, "FORGE_TOOL_CALLER_ID_CONFLICT")
        assert invoke_requests(stack.provider.received) == 1
        assert len(stack.gateway.runtime.store) == 1


async def test_caller_id_dedupe_window_is_bounded() -> None:
    clock = FakeClock()
    async with running_stack(clock=clock) as stack:
        first = await start(stack, "mock.move", QUICK, caller_id="c-2")
        await wait_terminal(stack, first["invocation_id"])
        clock.advance(stack.gateway.config.retention.dedupe_window_s + 1)
        later = await start(stack, "mock.move", QUICK, caller_id="c-2")
        assert later["duplicate"] is False
        assert later["invocation_id"] != first["invocation_id"]
        await wait_terminal(stack, later["invocation_id"])
        assert invoke_requests(stack.provider.received, "move") == 2


# ---------------------------------------------------------------- journal and restart


async def test_gateway_restart_reads_in_flight_as_unknown_and_keeps_completed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    first_journal = FileJournal(path)
    try:
        async with running_stack(journal=first_journal) as before:
            done = await start(before, "mock.move", QUICK, caller_id="done-1")
            done_status = await wait_terminal(before, done["invocation_id"])
            flying = await start(before, "mock.move", HANG, caller_id="fly-1")
            assert (await read(before, flying["invocation_id"]))["terminal"] is False

            second_journal = FileJournal(path)
            try:
                async with running_stack(journal=second_journal) as after:
                    restarted = await read(after, flying["invocation_id"])
                    assert restarted["phase"] == "unknown"
                    assert restarted["terminal"] is True
                    assert restarted["caller_id"] == "fly-1"
                    assert (
                        restarted["result"]["error"]["code"]
                        == "FORGE_TOOL_GATEWAY_RESTARTED_OUTCOME_UNKNOWN"
                    )
                    kept = await read(after, done["invocation_id"])
                    assert kept["phase"] == "completed"
                    assert kept["result"] == done_status["result"]
                    assert kept["attempt_id"] == done["attempt_id"]
                    result = data(
                        await after.client.get(f"/invocations/{flying['invocation_id']}/result")
                    )
                    assert result["status"] == "available"
                    lookup = data(await after.client.get("/invocations?caller_id=fly-1"))
                    assert [i["invocation_id"] for i in lookup["invocations"]] == [
                        flying["invocation_id"]
                    ]
                    # A replay after restart is answered from the journal, not re-dispatched.
                    replay = await start(after, "mock.move", HANG, caller_id="fly-1")
                    assert replay["duplicate"] is True
                    assert replay["invocation_id"] == flying["invocation_id"]
                    assert invoke_requests(after.provider.received) == 0
            finally:
                second_journal.close()
            await cancel_and_wait(before, flying["invocation_id"])
    finally:
        first_journal.close()


async def test_a_torn_last_journal_line_reads_unknown_after_restart_not_404(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = FileJournal(path)
    try:
        async with running_stack(journal=journal) as stack:
            done = await start(stack, "mock.move", QUICK)
            await wait_terminal(stack, done["invocation_id"])
    finally:
        journal.close()
    with path.open("ab") as handle:
        handle.write(b'{"k":"admit","id":"inv_torn"')  # a crash mid-write
    journal = FileJournal(path)
    try:
        async with running_stack(journal=journal) as stack:
            assert (await read(stack, done["invocation_id"]))["phase"] == "completed"
            torn = await read(stack, "inv_torn")
            assert (torn["phase"], torn["terminal"]) == ("unknown", True)
            assert torn["result"]["error"]["code"] == "FORGE_TOOL_JOURNAL_RECORD_UNREADABLE"
            assert stack.gateway.runtime.journal_health.skipped_records == 1
    finally:
        journal.close()


# ---------------------------------------------------------------- bounded retention


async def test_retention_bounds_the_store_and_evicted_ids_answer_410(tmp_path: Path) -> None:
    config = with_overrides(retention={"max_invocations": 16})
    journal = FileJournal(tmp_path / "journal.jsonl")
    try:
        async with running_stack(config, journal=journal) as stack:
            ids = []
            for index in range(40):
                admitted = await start(stack, "mock.move", QUICK, caller_id=f"r-{index}")
                ids.append(admitted["invocation_id"])
                await wait_terminal(stack, admitted["invocation_id"])
                assert len(stack.gateway.runtime.store) <= 17
            stack.gateway.runtime.evict()
            assert len(stack.gateway.runtime.store) <= 16
            assert (await read(stack, ids[-1]))["phase"] == "completed"
            assert_error(
                await stack.client.get(f"/invocations/{ids[0]}"),
                410,
                "FORGE_TOOL_INVOCATION_EVICTED",
            )
            assert_error(await stack.client.get(f"/invocations/{ids[0]}/result"), 410)
            lookup = data(await stack.client.get("/invocations?caller_id=r-0"))
            assert lookup["invocations"] == []
            # The journal is compacted to what is retained, so it does not grow forever.
            lines = (tmp_path / "journal.jsonl").read_text().splitlines()
            assert len(lines) <= 2 * len(stack.gateway.runtime.store)
            assert len(stack.gateway.exchanges) == 0
    finally:
        journal.close()


async def test_active_invocations_are_never_evicted() -> None:
    config = with_overrides(retention={"max_invocations": 16})
    async with running_stack(config) as stack:
        session = await start(stack, "mock.stream", {})
        for _ in range(20):
            admitted = await start(stack, "mock.move", QUICK)
            await wait_terminal(stack, admitted["invocation_id"])
        stack.gateway.runtime.evict()
        assert (await read(stack, session["invocation_id"]))["terminal"] is False
        await stack.client.post(f"/invocations/{session['invocation_id']}/stop")
        await wait_terminal(stack, session["invocation_id"])


def inject_heartbeats(stack: Stack, invocation_id: str, count: int) -> None:
    invocation = stack.gateway.runtime.store.get(invocation_id)
    assert invocation is not None
    spec = tool_spec(stack.gateway, invocation.tool_id)
    context_ = wire.execution_context(spec, invocation.invocation_id, invocation.attempt_id)
    for sequence in range(1000, 1000 + count):
        stack.gateway.on_message(
            "mock",
            make_event_envelope(
                ToolEvent(type="heartbeat", data={"injected": sequence}),
                context_,
                endpoint_instance_id=str(invocation.endpoint_instance_id),
                sequence=sequence,
            ),
        )


async def test_event_log_is_bounded_and_a_resume_before_it_answers_410() -> None:
    config = with_overrides(retention={"max_events_per_invocation": 8})
    async with running_stack(config) as stack:
        session = await start(stack, "mock.stream", {})
        invocation_id = session["invocation_id"]
        inject_heartbeats(stack, invocation_id, 30)
        invocation = stack.gateway.runtime.store.get(invocation_id)
        assert invocation is not None
        assert len(invocation.events) == 8
        oldest = invocation.events[0].seq
        assert oldest > 20
        gone = await stack.client.get(
            f"/invocations/{invocation_id}/events", headers={"Last-Event-ID": "1"}
        )
        assert_error(gone, 410, "FORGE_TOOL_EVENTS_EVICTED")
        await stack.client.post(f"/invocations/{invocation_id}/stop")
        await wait_terminal(stack, invocation_id)
        assert len(invocation.events) == 8
        resumed = await stack.client.get(
            f"/invocations/{invocation_id}/events",
            headers={"Last-Event-ID": str(invocation.events[0].seq - 1)},
        )
        assert resumed.status_code == 200


async def test_a_fresh_subscriber_gets_the_retained_events_after_older_ones_fell_off() -> None:
    config = with_overrides(retention={"max_events_per_invocation": 8})
    async with running_stack(config) as stack:
        session = await start(stack, "mock.stream", {})
        invocation_id = session["invocation_id"]
        inject_heartbeats(stack, invocation_id, 30)
        await stack.client.post(f"/invocations/{invocation_id}/stop")
        await wait_terminal(stack, invocation_id)
        invocation = stack.gateway.runtime.store.get(invocation_id)
        assert invocation is not None
        response = await stack.client.get(f"/invocations/{invocation_id}/events")
        assert response.status_code == 200, response.text
        ids = [int(line[4:]) for line in response.text.splitlines() if line.startswith("id: ")]
        assert ids == [event.seq for event in invocation.events]


async def test_lost_terminal_event_is_recovered_by_status_polling() -> None:
    clock = FakeClock()
    async with running_stack(clock=clock) as stack:
        deliver = stack.provider.deliver

        def drop_events(route: str, envelope: ToolEnvelope) -> None:
            if envelope.message_type != "tool.event":
                deliver(route, envelope)

        stack.provider.deliver = drop_events
        admitted = await start(stack, "mock.move", {"duration_s": 0.05, "behaviour": "succeed"})
        invocation = stack.gateway.runtime.store.get(admitted["invocation_id"])
        assert invocation is not None

        async def poll_until_terminal() -> None:
            while not invocation.terminal:
                clock.advance(stack.gateway.config.status_poll_interval_ms / 1000)
                await renew_lease(stack)
                stack.gateway.runtime.tick()
                await settle()

        async with asyncio.timeout(5):
            await poll_until_terminal()
        assert invocation.phase == "completed"
        assert invocation.result == {"status": "succeeded", "outputs": {"travelled_s": 0.05}}
        assert [e.type for e in invocation.events] == ["terminal"]
        polls = [e for e in stack.provider.received if e.message_type == "tool.status.request"]
        assert polls
        assert invoke_requests(stack.provider.received) == 1
