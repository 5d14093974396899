"""Behaviour of the ``mock`` endpoint through a real forge-tool ``ToolEndpointHandler``."""

from __future__ import annotations

import asyncio

import pytest
from forge_tool import ToolEnvelope

from doraforge.nodes.mock import definition
from tests.nodes.provider_harness import WAIT_S, FakeTiming, HandlerHarness

pytestmark = pytest.mark.anyio


@pytest.fixture
def timing() -> FakeTiming:
    return FakeTiming()


class CrashRecorder:
    """Stands in for ``os._exit``: records when the mock asked the process to die."""

    def __init__(self, timing: FakeTiming) -> None:
        self.timing = timing
        self.at: list[float] = []
        self.happened = asyncio.Event()

    def __call__(self) -> None:
        self.at.append(self.timing.now())
        self.happened.set()


@pytest.fixture
def crash(timing: FakeTiming) -> CrashRecorder:
    return CrashRecorder(timing)


@pytest.fixture
def mock(timing: FakeTiming, crash: CrashRecorder) -> HandlerHarness:
    return HandlerHarness(
        definition(
            endpoint_instance_id="epinst-test",
            timing=timing,
            crash=crash,
            wall_clock_ms=lambda: 1_700_000_000_000,
        )
    )


def outcome(response: ToolEnvelope) -> str:
    answer: str = response.payload["outcome"]
    return answer


async def test_echo_returns_the_message_it_was_given(mock: HandlerHarness) -> None:
    response = await mock.invoke("echo", {"message": "hello, robot"})
    assert response.payload["result"] == {
        "status": "succeeded",
        "outputs": {"message": "hello, robot"},
    }


async def test_echo_rejects_a_non_string_message_before_execution(mock: HandlerHarness) -> None:
    response = await mock.invoke("echo", {"message": 42})
    assert outcome(response) == "rejected"
    assert response.payload["error"]["code"] == "MOCK_INVALID_ARGUMENTS"


async def test_stats_counts_invokes_received_per_operation(mock: HandlerHarness) -> None:
    for _ in range(3):
        await mock.invoke("echo", {"message": "x"})
    await mock.invoke("move", {"duration_s": 0})
    response = await mock.invoke("stats")
    outputs = response.payload["result"]["outputs"]
    assert outputs == {
        "invokes": {"echo": 3, "move": 1, "stream": 0},
        "endpoint_instance_id": "epinst-test",
        "started_at_ms": 1_700_000_000_000,
    }


async def test_move_succeeds_after_reporting_progress(mock: HandlerHarness) -> None:
    invoke = await mock.invoke("move", {"duration_s": 1.0, "behaviour": "succeed"})
    assert outcome(invoke) == "accepted"
    await mock.wait_event(invoke, "executor_completed")
    types = mock.event_types(invoke)
    assert types[-1] == "executor_completed"
    assert types.count("progress") >= 10
    fractions = [
        e.payload["data"]["fraction"]
        for e in mock.published.events_for(str(invoke.invocation_id))
        if e.payload["type"] == "progress"
    ]
    assert fractions == sorted(fractions)
    assert fractions[-1] == 1.0
    result = await mock.result(invoke)
    assert result["status"] == "available"
    assert result["result"] == {"status": "succeeded", "outputs": {"travelled_s": 1.0}}
    assert (await mock.status(invoke))["phase"] == "completed"


async def test_long_move_reports_a_bounded_number_of_progress_events(
    mock: HandlerHarness,
) -> None:
    invoke = await mock.invoke("move", {"duration_s": 60.0})
    await mock.wait_event(invoke, "executor_completed")
    assert mock.event_types(invoke).count("progress") <= 202


async def test_move_fail_ends_failed_with_mock_move_failed(mock: HandlerHarness) -> None:
    invoke = await mock.invoke("move", {"duration_s": 0.2, "behaviour": "fail"})
    await mock.wait_event(invoke, "executor_failed")
    result = (await mock.result(invoke))["result"]
    assert result["status"] == "failed"
    assert result["error"]["code"] == "MOCK_MOVE_FAILED"
    status = await mock.status(invoke)
    assert status["phase"] == "failed"
    assert status["error"]["code"] == "MOCK_MOVE_FAILED"


async def test_cancel_stops_the_motion_and_ends_cancelled(mock: HandlerHarness) -> None:
    invoke = await mock.invoke("move", {"duration_s": 100.0})
    await mock.wait_event(invoke, "progress", count=3)
    assert (await mock.control(invoke, "cancel"))["status"] == "accepted"
    await mock.wait_event(invoke, "cancelled")
    types = mock.event_types(invoke)
    assert types[-1] == "cancelled"
    assert "executor_completed" not in types
    result = (await mock.result(invoke))["result"]
    assert result["status"] == "cancelled"
    assert result["outputs"]["travelled_s"] < 100.0
    assert (await mock.control(invoke, "cancel"))["status"] == "terminal"


async def test_hang_stays_running_until_cancelled(mock: HandlerHarness) -> None:
    invoke = await mock.invoke("move", {"duration_s": 0.1, "behaviour": "hang"})
    await mock.wait_event(invoke, "heartbeat", count=20)  # 4 fake seconds, far past 0.1 s
    assert (await mock.status(invoke))["phase"] == "running"
    assert (await mock.result(invoke))["status"] == "pending"
    await mock.control(invoke, "cancel")
    await mock.wait_event(invoke, "cancelled")
    assert (await mock.result(invoke))["result"]["status"] == "cancelled"


async def test_crash_fires_about_halfway_and_reports_nothing_after(
    mock: HandlerHarness, timing: FakeTiming, crash: CrashRecorder
) -> None:
    started = timing.now()
    invoke = await mock.invoke("move", {"duration_s": 2.0, "behaviour": "crash"})
    await asyncio.wait_for(crash.happened.wait(), WAIT_S)
    assert crash.at[0] - started == pytest.approx(1.0, abs=0.06)
    assert (await mock.result(invoke))["status"] == "pending"
    assert "executor_completed" not in mock.event_types(invoke)


async def test_invalid_move_arguments_are_rejected_before_acceptance(
    mock: HandlerHarness,
) -> None:
    for arguments in (
        {"duration_s": "fast"},
        {"duration_s": 1.0, "behaviour": "explode"},
        {"duration_s": -1},
        {"duration_s": True},
        {"duration_s": 1.0, "speed": 3},
        {},
    ):
        response = await mock.invoke("move", arguments)
        assert outcome(response) == "rejected", arguments
        assert response.payload["error"]["code"] == "MOCK_INVALID_ARGUMENTS"
        assert mock.published.events_for(str(response.invocation_id)) == []
    # The rejected starts released the single move permit.
    assert outcome(await mock.invoke("move", {"duration_s": 0})) == "accepted"


async def test_second_move_is_refused_while_one_is_active(mock: HandlerHarness) -> None:
    first = await mock.invoke("move", {"duration_s": 100.0})
    second = await mock.invoke("move", {"duration_s": 1.0})
    assert outcome(first) == "accepted"
    assert second.payload["error"]["code"] == "FORGE_ENDPOINT_CAPACITY"
    await mock.control(first, "cancel")
    await mock.wait_event(first, "cancelled")


async def test_stream_beats_until_stopped(mock: HandlerHarness) -> None:
    invoke = await mock.invoke("stream")
    assert outcome(invoke) == "accepted"
    await mock.wait_event(invoke, "heartbeat", count=3)
    events = mock.published.events_for(str(invoke.invocation_id))
    beats = [e.payload["data"]["beat"] for e in events]
    assert beats[:3] == [0, 1, 2]
    assert (await mock.control(invoke, "stop"))["status"] == "accepted"
    await mock.wait_event(invoke, "stopped")
    assert mock.event_types(invoke)[-1] == "stopped"
    result = (await mock.result(invoke))["result"]
    assert result["status"] == "stopped"
    assert result["outputs"]["beats"] >= 3


async def test_stream_rejects_arguments(mock: HandlerHarness) -> None:
    response = await mock.invoke("stream", {"rate": 5})
    assert response.payload["error"]["code"] == "MOCK_INVALID_ARGUMENTS"


async def test_cancel_is_unsupported_for_the_stream_session(mock: HandlerHarness) -> None:
    invoke = await mock.invoke("stream")
    assert (await mock.control(invoke, "cancel"))["status"] == "unsupported"
    await mock.control(invoke, "stop")
    await mock.wait_event(invoke, "stopped")


async def test_finished_moves_are_retained_up_to_a_bound(timing: FakeTiming) -> None:
    harness = HandlerHarness(definition(timing=timing, max_retained=16))
    invokes = []
    for _ in range(40):
        invoke = await harness.invoke("move", {"duration_s": 0})
        await harness.wait_event(invoke, "executor_completed")
        invokes.append(invoke)
    move = harness.definition.operations["move"]
    assert len(move.executions) == 16  # type: ignore[union-attr]
    assert (await harness.result(invokes[-1]))["status"] == "available"
