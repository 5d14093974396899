"""Tool Runtime edge cases driven by a scripted provider: silence, rejection, races."""

from __future__ import annotations

import asyncio

import pytest
from forge_tool import (
    ToolAccepted,
    ToolEnvelope,
    ToolError,
    ToolEvent,
    ToolResult,
    make_error_response_envelope,
    make_event_envelope,
    make_invoke_response_envelope,
)

from doraforge.gateway import wire
from tests.gateway.harness import Stack, running_stack
from tests.gateway.support import (
    ScriptedStack,
    assert_error,
    data,
    invoke_requests,
    read,
    scripted_stack,
    start,
    tool_spec,
    wait_terminal,
    with_overrides,
)
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

HANG = {"duration_s": 1, "behaviour": "hang"}
QUICK = {"duration_s": 0, "behaviour": "succeed"}
FAST_ADMISSION = {"admission_timeout_ms": 50}


def accept_invokes(envelope: ToolEnvelope) -> ToolEnvelope | None:
    """Accept every invoke, answer nothing else (status, result, control stay silent)."""
    if envelope.message_type == "tool.invoke.request":
        return make_invoke_response_envelope(ToolAccepted(details={}), envelope)
    return None


def active(stack: Stack | ScriptedStack, tool_id: str) -> int:
    return stack.gateway.runtime.active_count(tool_spec(stack.gateway, tool_id))


async def test_query_max_concurrency_is_503_and_counted_in_context() -> None:
    held: list[ToolEnvelope] = []

    def hold(envelope: ToolEnvelope) -> None:
        held.append(envelope)

    async with scripted_stack(hold) as stack:
        limit = 64  # the mock descriptor's echo max_concurrency
        body = {"arguments": {"message": "x"}, "timeout_ms": 5000}
        pending = [
            asyncio.create_task(stack.client.post("/tools/mock/echo:invoke", json=body))
            for _ in range(limit)
        ]
        await eventually_async(lambda: len(held) == limit, what="all queries in flight")
        context = data(await stack.client.get("/tools/mock.echo/context"))
        assert context["active_invocations"] == limit
        busy = await stack.client.post("/tools/mock/echo:invoke", json=body)
        error = assert_error(busy, 503, "FORGE_TOOL_GATEWAY_BUSY")
        assert error["details"]["max_concurrency"] == limit
        assert len(held) == limit  # the refused Query never reached the provider
        for envelope in held:
            result = ToolResult(status="succeeded", outputs={"message": "x"})
            stack.gateway.on_message("mock", make_invoke_response_envelope(result, envelope))
        responses = await asyncio.gather(*pending)
        assert [response.status_code for response in responses] == [200] * limit
        assert active(stack, "mock.echo") == 0


async def test_silent_provider_at_dispatch_is_unknown_and_keeps_the_slot_fenced() -> None:
    config = with_overrides(**FAST_ADMISSION)
    async with scripted_stack(lambda envelope: None, config) as stack:
        admitted = await start(stack, "mock.move", QUICK)
        assert admitted["phase"] == "unknown"
        status = await read(stack, admitted["invocation_id"])
        assert status["result"]["error"]["code"] == "FORGE_TOOL_DISPATCH_OUTCOME_UNKNOWN"
        assert active(stack, "mock.move") == 1
        busy = await stack.client.post("/tools/mock.move:invoke", json={"arguments": QUICK})
        assert_error(busy, 503, "FORGE_TOOL_GATEWAY_BUSY")
        assert invoke_requests(stack.provider.received) == 1


async def test_action_rejected_by_the_provider_is_422_and_reads_failed() -> None:
    def reject(envelope: ToolEnvelope) -> ToolEnvelope | None:
        error = ToolError(code="MOCK_NOT_HOMED", message="home the arm first")
        return make_invoke_response_envelope(error, envelope)

    async with scripted_stack(reject) as stack:
        response = await stack.client.post("/tools/mock.move:invoke", json={"arguments": QUICK})
        # The code PhyAgentOS reads as a pre-dispatch rejection; the provider's stays in details.
        error = assert_error(response, 422, "FORGE_TOOL_ACTION_ADMISSION_REJECTED")
        assert error["details"]["provider_code"] == "MOCK_NOT_HOMED"
        assert error["details"]["provider_error"]["code"] == "MOCK_NOT_HOMED"
        assert error["message"] == "home the arm first"
        invocation_id = error["details"]["invocation_id"]
        status = await read(stack, invocation_id)
        assert status["phase"] == "failed"
        assert status["result"]["error"]["code"] == "MOCK_NOT_HOMED"
        assert active(stack, "mock.move") == 0  # rejected before any side effect


async def test_session_rejected_by_the_provider_names_the_session_code() -> None:
    def reject(envelope: ToolEnvelope) -> ToolEnvelope | None:
        error = ToolError(code="MOCK_STREAM_OFF", message="stream is off")
        return make_invoke_response_envelope(error, envelope)

    async with scripted_stack(reject) as stack:
        response = await stack.client.post("/tools/mock.stream:invoke", json={"arguments": {}})
        error = assert_error(response, 422, "FORGE_TOOL_SESSION_ADMISSION_REJECTED")
        assert error["details"]["provider_code"] == "MOCK_STREAM_OFF"


async def test_provider_capacity_refusal_is_a_retryable_503_admission_rejection() -> None:
    def full(envelope: ToolEnvelope) -> ToolEnvelope | None:
        error = ToolError(code="FORGE_ENDPOINT_CAPACITY", message="busy", retryable=True)
        return make_invoke_response_envelope(error, envelope)

    async with scripted_stack(full) as stack:
        response = await stack.client.post("/tools/mock.move:invoke", json={"arguments": QUICK})
        error = assert_error(response, 503, "FORGE_TOOL_ACTION_ADMISSION_REJECTED")
        assert error["retryable"] is True
        assert error["details"]["provider_code"] == "FORGE_ENDPOINT_CAPACITY"


async def test_provider_tool_error_on_invoke_is_unknown_not_failed() -> None:
    def transport_error(envelope: ToolEnvelope) -> ToolEnvelope | None:
        error = ToolError(code="TRANSPORT_FAILURE", message="link dropped", retryable=True)
        return make_error_response_envelope(error, envelope)

    async with scripted_stack(transport_error) as stack:
        admitted = await start(stack, "mock.move", QUICK)
        status = await read(stack, admitted["invocation_id"])
        assert status["phase"] == "unknown"
        assert status["result"]["error"]["code"] == "TRANSPORT_FAILURE"
        assert invoke_requests(stack.provider.received) == 1  # never retried


async def test_unanswered_cancel_is_requested_not_cancelled() -> None:
    config = with_overrides(**FAST_ADMISSION)
    async with scripted_stack(accept_invokes, config) as stack:
        admitted = await start(stack, "mock.move", HANG)
        assert admitted["phase"] == "accepted"
        response = await stack.client.post(f"/invocations/{admitted['invocation_id']}/cancel")
        answer = data(response, 202)
        assert answer["cancel_status"] == "requested"
        assert answer["phase"] == "accepted"
        status = await read(stack, admitted["invocation_id"])
        assert status["cancel_status"] == "requested"
        assert status["terminal"] is False


async def test_a_stopping_invocation_never_moves_back_to_running() -> None:
    async with running_stack() as stack:
        admitted = await start(stack, "mock.move", HANG)
        invocation = stack.gateway.runtime.store.get(admitted["invocation_id"])
        assert invocation is not None
        await eventually_async(lambda: invocation.phase == "running", what="the running phase")
        invocation.advance("stopping", 0)
        assert invocation.advance("running", 0) is False
        assert invocation.advance("accepted", 0) is False
        assert invocation.phase == "stopping"
        await stack.client.post(f"/invocations/{admitted['invocation_id']}/cancel")
        done = await wait_terminal(stack, admitted["invocation_id"])
        assert done["phase"] == "cancelled"


async def test_events_from_another_instance_or_attempt_are_ignored() -> None:
    async with running_stack() as stack:
        admitted = await start(stack, "mock.move", HANG)
        invocation = stack.gateway.runtime.store.get(admitted["invocation_id"])
        assert invocation is not None
        spec = tool_spec(stack.gateway, "mock.move")
        count = len(invocation.events)
        forged = [
            (invocation.attempt_id, "epinst-impostor"),
            ("att_other", str(invocation.endpoint_instance_id)),
        ]
        for attempt_id, instance_id in forged:
            context = wire.execution_context(spec, invocation.invocation_id, attempt_id)
            event = ToolEvent(type="executor_completed", data={})
            stack.gateway.on_message(
                "mock",
                make_event_envelope(event, context, endpoint_instance_id=instance_id, sequence=0),
            )
        assert len([e for e in invocation.events if e.type == "executor_completed"]) == 0
        assert invocation.terminal is False
        assert len(invocation.events) >= count
        await stack.client.post(f"/invocations/{admitted['invocation_id']}/cancel")
        await wait_terminal(stack, admitted["invocation_id"])


async def test_concurrent_duplicates_of_one_caller_id_dispatch_once() -> None:
    async with running_stack() as stack:
        body = {"arguments": HANG, "caller_id": "race-1"}
        first, second = await asyncio.gather(
            stack.client.post("/tools/mock.move:invoke", json=body),
            stack.client.post("/tools/mock.move:invoke", json=body),
        )
        answers = [data(first, 202), data(second, 202)]
        assert answers[0]["invocation_id"] == answers[1]["invocation_id"]
        assert sorted(answer["duplicate"] for answer in answers) == [False, True]
        assert invoke_requests(stack.provider.received) == 1
        await stack.client.post(f"/invocations/{answers[0]['invocation_id']}/cancel")
        await wait_terminal(stack, answers[0]["invocation_id"])


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/tools/%FF"),
        ("GET", "/tools/%FF/context"),
        ("GET", "/tools/%00x"),
        ("GET", "/invocations/%FF"),
        ("POST", "/tools/%C3%28:invoke"),
    ],
)
async def test_undecodable_path_ids_are_400(method: str, path: str) -> None:
    async with running_stack() as stack:
        response = await stack.client.request(method, path, json={"arguments": QUICK})
        assert_error(response, 400, "FORGE_TOOL_INVALID_PATH")
        assert invoke_requests(stack.provider.received) == 0
