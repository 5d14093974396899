"""The caller Tool API over HTTP: every route, status and envelope shape."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
from forge_tool import (
    EndpointStatus,
    ToolAccepted,
    ToolEnvelope,
    ToolError,
    ToolResult,
    make_endpoint_status_envelope,
    make_invoke_response_envelope,
)
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message

from doraforge.gateway.http import create_app, gateway_policy
from doraforge.wire.canonical import canonical_bytes
from tests.gateway.harness import Stack, running_stack
from tests.gateway.support import (
    assert_error,
    config_with_tools,
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
TOOL_FIELDS = {
    "tool_id",
    "implementation_id",
    "endpoint_id",
    "operation",
    "semantics",
    "description",
    "input_schema",
    "output_schema",
    "readiness",
    "robot_frame_profile",
}


def nothing_admitted(stack: Stack) -> None:
    assert invoke_requests(stack.provider.received) == 0
    assert len(stack.gateway.runtime.store) == 0


async def cancel_and_wait(stack: Stack, invocation_id: str) -> None:
    response = await stack.client.post(f"/invocations/{invocation_id}/cancel")
    assert response.status_code in (200, 202), response.text
    await wait_terminal(stack, invocation_id)


def sse_events(text: str) -> list[dict[str, Any]]:
    """Parse an SSE body into ``[{id, event, data}]``."""
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "id" in fields:
            events.append(
                {
                    "id": int(fields["id"]),
                    "event": fields["event"],
                    "data": json.loads(fields["data"]),
                }
            )
    return events


# ---------------------------------------------------------------- discovery


async def test_list_tools_has_identity_revision_and_every_toolspec() -> None:
    async with running_stack() as stack:
        listing = data(await stack.client.get("/tools"))
        assert {"gateway_identity", "gateway_id", "instance_id", "revision", "tools"} <= set(
            listing
        )
        document = listing["gateway"]
        assert document["gateway_id"] == listing["gateway_id"] == "doraforge-mock"
        assert listing["gateway_identity"] == listing["instance_id"] == document["instance_id"]
        assert isinstance(listing["gateway_identity"], str)  # as PhyAgentOS reads it
        assert listing["revision"] == stack.gateway.registry.revision == 1
        assert [tool["tool_id"] for tool in listing["tools"]] == [
            "mock.echo",
            "mock.move",
            "mock.stats",
            "mock.stream",
        ]
        for tool in listing["tools"]:
            assert set(tool) == TOOL_FIELDS
        semantics = {tool["tool_id"]: tool["semantics"] for tool in listing["tools"]}
        assert semantics["mock.move"] == "action"
        assert semantics["mock.stream"] == "session"


async def test_toolspec_is_byte_stable_canonical_json_whose_hash_is_the_context_hash() -> None:
    async with running_stack() as stack:
        first = await stack.client.get("/tools/mock.move")
        second = await stack.client.get("/tools/mock.move")
        assert first.status_code == 200
        assert first.content == second.content
        prefix, suffix = b'{"ok":true,"data":', b"}"
        assert first.content.startswith(prefix)
        assert first.content.endswith(suffix)
        spec_bytes = first.content[len(prefix) : -len(suffix)]
        document = json.loads(spec_bytes)
        assert canonical_bytes(document) == spec_bytes
        assert set(document) == TOOL_FIELDS
        digest = hashlib.sha256(spec_bytes).hexdigest()
        context = data(await stack.client.get("/tools/mock.move/context"))
        assert context["spec_sha256"] == digest
        assert first.headers["x-spec-sha256"] == digest


async def test_context_of_a_bound_tool() -> None:
    async with running_stack() as stack:
        context = data(await stack.client.get("/tools/mock.move/context"))
        assert context["ready"] is True
        assert context["binding_error"] is None
        assert context["max_concurrency"] == 1
        assert context["active_invocations"] == 0
        assert context["robot_frame_profile"]["robot_id"] == "mock-arm"
        assert context["robot_frame_profile"]["directions"]["up"] == {
            "frame": "base_link",
            "axis": "z",
            "sign": 1,
        }
        status = context["endpoint_status"]
        assert status["endpoint_instance_id"] == stack.provider.instance_id
        assert status["lease_remaining_ms"] > 0
        assert len(context["spec_sha256"]) == 64

        admitted = await start(stack, "mock.move", HANG)
        busy = data(await stack.client.get("/tools/mock.move/context"))
        assert busy["active_invocations"] == 1
        assert busy["ready"] is False  # readiness includes operation_capacity
        await cancel_and_wait(stack, admitted["invocation_id"])


async def test_context_reports_the_latest_endpoint_status_snapshot() -> None:
    async with running_stack() as stack:
        snapshot = make_endpoint_status_envelope(
            EndpointStatus(endpoint_id="mock", state="degraded", active_invocations=2),
            endpoint_instance_id=stack.provider.instance_id,
        )
        stack.gateway.on_message("mock", snapshot)
        status = data(await stack.client.get("/tools/mock.echo/context"))["endpoint_status"]
        assert status["state"] == "degraded"
        assert status["active_invocations"] == 2


async def test_context_explains_why_an_unregistered_tool_is_not_ready() -> None:
    async with running_stack(register=False) as stack:
        context = data(await stack.client.get("/tools/mock.move/context"))
        assert context["ready"] is False
        assert "no current registered instance" in context["binding_error"]
        assert context["endpoint_status"] is None
        assert context["max_concurrency"] is None
        assert context["active_invocations"] == 0


async def test_context_explains_a_semantics_mismatch() -> None:
    config = config_with_tools(**{"mock.echo": {"semantics": "action"}})
    async with running_stack(config) as stack:
        context = data(await stack.client.get("/tools/mock.echo/context"))
        assert context["ready"] is False
        assert "semantics" in context["binding_error"]
        unavailable = await stack.client.post(
            "/tools/mock.echo:invoke", json={"arguments": {"message": "x"}}
        )
        assert_error(unavailable, 503, "FORGE_TOOL_ENDPOINT_UNAVAILABLE")
        nothing_admitted(stack)


async def test_openapi_document_is_served() -> None:
    async with running_stack() as stack:
        response = await stack.client.get("/openapi.json")
        assert response.status_code == 200
        paths = response.json()["paths"]
        assert "/tools" in paths
        assert "/invocations/{invocation_id}/events" in paths


# ---------------------------------------------------------------- Query


async def test_query_answers_200_with_the_completed_result() -> None:
    async with running_stack() as stack:
        response = await stack.client.post(
            "/tools/mock/echo:invoke", json={"arguments": {"message": "hi"}, "caller_id": "q-1"}
        )
        assert data(response) == {
            "endpoint_id": "mock",
            "operation": "echo",
            "response": {
                "outcome": "completed",
                "result": {"status": "succeeded", "outputs": {"message": "hi"}},
            },
        }
        assert len(stack.gateway.runtime.store) == 0  # a Query is not an invocation


async def test_query_outputs_violating_output_schema_become_a_failed_result() -> None:
    schema = {
        "type": "object",
        "required": ["message"],
        "properties": {"message": {"type": "string", "maxLength": 1}},
    }
    config = config_with_tools(**{"mock.echo": {"output_schema": schema}})
    async with running_stack(config) as stack:
        response = await stack.client.post(
            "/tools/mock/echo:invoke", json={"arguments": {"message": "too long"}}
        )
        result = data(response)["response"]["result"]
        assert result["status"] == "failed"
        assert result["outputs"] == {}  # never passed through
        assert result["error"]["code"] == "FORGE_TOOL_OUTPUT_SCHEMA_VIOLATION"
        assert result["error"]["details"]["path"] == "$.message"


async def test_query_timeout_is_504() -> None:
    async with running_stack() as stack:
        stack.provider.silent = True
        response = await stack.client.post(
            "/tools/mock/echo:invoke", json={"arguments": {"message": "x"}, "timeout_ms": 50}
        )
        error = assert_error(response, 504, "FORGE_TOOL_INVOKE_TIMEOUT")
        assert error["details"]["timeout_ms"] == 50
        assert stack.gateway.runtime.active_count(tool_spec(stack.gateway, "mock.echo")) == 0


async def test_query_answered_non_terminally_is_502() -> None:
    def accept(envelope: ToolEnvelope) -> ToolEnvelope | None:
        if envelope.message_type == "tool.invoke.request":
            return make_invoke_response_envelope(ToolAccepted(details={}), envelope)
        return None

    async with scripted_stack(accept) as stack:
        response = await stack.client.post(
            "/tools/mock/echo:invoke", json={"arguments": {"message": "x"}}
        )
        assert_error(response, 502, "FORGE_TOOL_QUERY_NON_TERMINAL_RESPONSE")


async def test_query_rejected_by_the_provider_is_422_with_its_error() -> None:
    def reject(envelope: ToolEnvelope) -> ToolEnvelope:
        error = ToolError(code="MOCK_BUSY_ARM", message="arm is homing", retryable=True)
        return make_invoke_response_envelope(error, envelope)

    async with scripted_stack(reject) as stack:
        response = await stack.client.post(
            "/tools/mock/echo:invoke", json={"arguments": {"message": "x"}}
        )
        error = assert_error(response, 422, "MOCK_BUSY_ARM")
        assert error["retryable"] is True
        assert error["details"]["provider_error"]["message"] == "arm is homing"


async def test_query_failed_result_is_passed_through_as_completed() -> None:
    def fail(envelope: ToolEnvelope) -> ToolEnvelope:
        error = ToolError(code="MOCK_SENSOR", message="sensor offline")
        return make_invoke_response_envelope(ToolResult(status="failed", error=error), envelope)

    async with scripted_stack(fail) as stack:
        response = await stack.client.post(
            "/tools/mock/echo:invoke", json={"arguments": {"message": "x"}}
        )
        answer = data(response)["response"]
        assert answer["outcome"] == "completed"
        assert answer["result"]["status"] == "failed"
        assert answer["result"]["error"]["code"] == "MOCK_SENSOR"


# ---------------------------------------------------------------- Action and Session


async def test_action_admission_is_202_and_status_result_follow() -> None:
    async with running_stack() as stack:
        response = await stack.client.post(
            "/tools/mock.move:invoke",
            json={
                "arguments": {"duration_s": 0.1, "behaviour": "succeed"},
                "caller_id": "a-1",
                "timeout_ms": 5000,
            },
        )
        admitted = data(response, 202)
        assert {"invocation_id", "attempt_id", "phase"} <= set(admitted)
        assert admitted["invocation_id"] != admitted["attempt_id"]
        assert admitted["phase"] in ("accepted", "running")
        assert admitted["duplicate"] is False
        invocation_id = admitted["invocation_id"]

        pending = await stack.client.get(f"/invocations/{invocation_id}/result")
        assert data(pending, 202)["status"] == "pending"

        status = await read(stack, invocation_id)
        for field in (
            "invocation_id",
            "attempt_id",
            "tool_id",
            "caller_id",
            "phase",
            "cancel_status",
            "created_at_ms",
            "updated_at_ms",
            "deadline_ms",
            "progress",
        ):
            assert field in status, field
        assert status["tool_id"] == "mock.move"
        assert status["caller_id"] == "a-1"
        assert status["cancel_status"] == "none"
        assert status["deadline_ms"] == status["created_at_ms"] + 5000
        assert "result" not in status

        done = await wait_terminal(stack, invocation_id)
        assert done["phase"] == "completed"
        assert done["progress"] == {"fraction": 1.0}
        assert done["terminal_at_ms"] >= done["created_at_ms"]
        result = data(await stack.client.get(f"/invocations/{invocation_id}/result"))
        assert result["status"] == "available"
        assert result["result"] == {"status": "succeeded", "outputs": {"travelled_s": 0.1}}
        assert done["result"] == result["result"]


async def test_failed_action_reads_failed_with_the_provider_error() -> None:
    async with running_stack() as stack:
        admitted = await start(stack, "mock.move", {"duration_s": 0, "behaviour": "fail"})
        done = await wait_terminal(stack, admitted["invocation_id"])
        assert done["phase"] == "failed"
        assert done["result"]["error"]["code"] == "MOCK_MOVE_FAILED"


async def test_action_outputs_violating_output_schema_become_a_failed_result() -> None:
    schema = {"type": "object", "properties": {"travelled_s": {"type": "string"}}}
    config = config_with_tools(**{"mock.move": {"output_schema": schema}})
    async with running_stack(config) as stack:
        admitted = await start(stack, "mock.move", QUICK)
        done = await wait_terminal(stack, admitted["invocation_id"])
        assert done["phase"] == "failed"
        assert done["result"]["outputs"] == {}
        assert done["result"]["error"]["code"] == "FORGE_TOOL_OUTPUT_SCHEMA_VIOLATION"
        assert done["result"]["error"]["details"]["path"] == "$.travelled_s"


async def test_cancel_accepted_is_not_reported_as_cancelled() -> None:
    async with running_stack() as stack:
        admitted = await start(stack, "mock.move", HANG)
        invocation_id = admitted["invocation_id"]
        response = await stack.client.post(f"/invocations/{invocation_id}/cancel")
        accepted = data(response, 202)
        assert accepted["cancel_status"] == "accepted"
        assert accepted["command"] == "cancel"
        assert accepted["phase"] in ("accepted", "running", "stopping")
        done = await wait_terminal(stack, invocation_id)
        assert done["phase"] == "cancelled"
        assert done["cancel_status"] == "accepted"
        assert done["result"]["status"] == "cancelled"
        again = await stack.client.post(f"/invocations/{invocation_id}/cancel", json={})
        assert data(again, 200)["cancel_status"] == "terminal"


async def test_session_runs_until_stopped_and_stop_acceptance_is_not_stopped() -> None:
    async with running_stack() as stack:
        admitted = await start(stack, "mock.stream", {})
        invocation_id = admitted["invocation_id"]
        invocation = stack.gateway.runtime.store.get(invocation_id)
        assert invocation is not None
        await eventually_async(
            lambda: any(e.type == "heartbeat" for e in invocation.events), what="a heartbeat"
        )
        assert (await read(stack, invocation_id))["phase"] == "running"
        response = await stack.client.post(f"/invocations/{invocation_id}/stop", json={})
        accepted = data(response, 202)
        assert accepted["stop_status"] == accepted["status"] == "accepted"
        assert "cancel_status" not in accepted  # a stop answer names its own field
        assert accepted["phase"] not in ("stopped", "cancelled", "completed")
        done = await wait_terminal(stack, invocation_id)
        assert done["phase"] == "stopped"
        assert done["result"]["status"] == "stopped"
        assert done["result"]["outputs"]["beats"] >= 1


async def test_control_must_fit_the_semantics() -> None:
    async with running_stack() as stack:
        session = await start(stack, "mock.stream", {})
        action = await start(stack, "mock.move", HANG)
        wrong = await stack.client.post(f"/invocations/{session['invocation_id']}/cancel")
        assert_error(wrong, 409, "FORGE_TOOL_CONTROL_UNSUPPORTED")
        wrong = await stack.client.post(f"/invocations/{action['invocation_id']}/stop")
        assert_error(wrong, 409, "FORGE_TOOL_CONTROL_UNSUPPORTED")
        assert (await read(stack, session["invocation_id"]))["cancel_status"] == "none"
        await stack.client.post(f"/invocations/{session['invocation_id']}/stop")
        await cancel_and_wait(stack, action["invocation_id"])
        await wait_terminal(stack, session["invocation_id"])


@pytest.mark.parametrize("body", [b'{"reason":"now"}', b"[]", b"{", b'"x"', b"null"])
@pytest.mark.parametrize("command", ["cancel", "stop"])
async def test_control_with_a_non_empty_body_is_400(body: bytes, command: str) -> None:
    async with running_stack() as stack:
        tool = "mock.move" if command == "cancel" else "mock.stream"
        admitted = await start(stack, tool, HANG if command == "cancel" else {})
        invocation_id = admitted["invocation_id"]
        response = await stack.client.post(
            f"/invocations/{invocation_id}/{command}",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert_error(response, 400)
        assert (await read(stack, invocation_id))["cancel_status"] == "none"
        controls = [e for e in stack.provider.received if e.message_type == "tool.control.request"]
        assert controls == []
        await stack.client.post(f"/invocations/{invocation_id}/{command}")
        await wait_terminal(stack, invocation_id)


async def test_queries_are_not_invoked_on_the_action_route_and_vice_versa() -> None:
    async with running_stack() as stack:
        wrong = await stack.client.post(
            "/tools/mock.echo:invoke", json={"arguments": {"message": "x"}}
        )
        assert_error(wrong, 409, "FORGE_TOOL_SEMANTICS_MISMATCH")
        wrong = await stack.client.post("/tools/mock/move:invoke", json={"arguments": QUICK})
        assert_error(wrong, 409, "FORGE_TOOL_SEMANTICS_MISMATCH")
        nothing_admitted(stack)


# ---------------------------------------------------------------- events


async def test_events_stream_with_ids_and_resume_after_last_event_id() -> None:
    async with running_stack() as stack:
        admitted = await start(stack, "mock.move", {"duration_s": 0.15, "behaviour": "succeed"})
        invocation_id = admitted["invocation_id"]
        response = await stack.client.get(f"/invocations/{invocation_id}/events")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.text)
        ids = [event["id"] for event in events]
        assert ids == sorted(ids)
        assert len(set(ids)) == len(ids)
        kinds = [event["event"] for event in events]
        assert "progress" in kinds
        assert kinds[-1] == "terminal"
        assert events[-1]["data"]["data"]["phase"] == "completed"
        assert events[-1]["data"]["data"]["result"]["status"] == "succeeded"

        middle = ids[len(ids) // 2]
        resumed = await stack.client.get(
            f"/invocations/{invocation_id}/events", headers={"Last-Event-ID": str(middle)}
        )
        assert [event["id"] for event in sse_events(resumed.text)] == [i for i in ids if i > middle]
        invalid = await stack.client.get(
            f"/invocations/{invocation_id}/events", headers={"Last-Event-ID": "abc"}
        )
        assert_error(invalid, 400, "FORGE_TOOL_INVALID_EVENT_ID")


async def test_lookup_by_caller_id_is_read_only() -> None:
    async with running_stack() as stack:
        admitted = await start(stack, "mock.move", QUICK, caller_id="recover-me")
        await wait_terminal(stack, admitted["invocation_id"])
        found = data(await stack.client.get("/invocations", params={"caller_id": "recover-me"}))
        assert found["caller_id"] == "recover-me"
        assert [i["invocation_id"] for i in found["invocations"]] == [admitted["invocation_id"]]
        assert found["invocations"][0]["phase"] == "completed"
        none = data(await stack.client.get("/invocations", params={"caller_id": "never"}))
        assert none["invocations"] == []
        assert_error(await stack.client.get("/invocations"), 400)
        assert invoke_requests(stack.provider.received) == 1


# ---------------------------------------------------------------- path ids


async def test_percent_encoded_path_ids_are_decoded() -> None:
    config = config_with_tools(**{"mock.move": {"tool_id": "arm/move:v1"}})
    async with running_stack(config) as stack:
        spec = await stack.client.get("/tools/arm%2Fmove%3Av1")
        assert spec.status_code == 200, spec.text
        assert spec.json()["data"]["tool_id"] == "arm/move:v1"
        context = data(await stack.client.get("/tools/arm%2fmove%3av1/context"))
        assert context["tool_id"] == "arm/move:v1"
        admitted = data(
            await stack.client.post("/tools/arm%2Fmove%3Av1:invoke", json={"arguments": QUICK}),
            202,
        )
        assert admitted["tool_id"] == "arm/move:v1"
        await wait_terminal(stack, admitted["invocation_id"])
        assert_error(await stack.client.get("/tools/arm%2Fmove%3Av2"), 404, "FORGE_TOOL_NOT_FOUND")
        assert_error(await stack.client.get("/tools/nope%2Fx/context"), 404)
        missing = await stack.client.post("/tools/nope%2Fx%3Ay:invoke", json={"arguments": {}})
        assert_error(missing, 404, "FORGE_TOOL_NOT_FOUND")
        quoted_id = admitted["invocation_id"].replace("_", "%5F")
        assert (await read(stack, quoted_id))["invocation_id"] == admitted["invocation_id"]


# ---------------------------------------------------------------- strict bodies

BAD_BODIES = [
    pytest.param(b"", id="empty"),
    pytest.param(b"{", id="malformed"),
    pytest.param(b"[]", id="array"),
    pytest.param(b'"text"', id="string"),
    pytest.param(b"\xff\xfe{}", id="not-utf8"),
    pytest.param(b'{"arguments": {ARGS}, "extra": 1}', id="unknown-field"),
    pytest.param(b'{"arguments": [], "caller_id": "c"}', id="arguments-array"),
    pytest.param(b'{"arguments": "x"}', id="arguments-string"),
    pytest.param(b'{"arguments": null}', id="arguments-null"),
    pytest.param(b'{"arguments": {ARGS}, "caller_id": ""}', id="caller-id-empty"),
    pytest.param(b'{"arguments": {ARGS}, "caller_id": "   "}', id="caller-id-blank"),
    pytest.param(b'{"arguments": {ARGS}, "caller_id": 7}', id="caller-id-int"),
    pytest.param(b'{"arguments": {ARGS}, "timeout_ms": true}', id="timeout-bool"),
    pytest.param(b'{"arguments": {ARGS}, "timeout_ms": -1}', id="timeout-negative"),
    pytest.param(b'{"arguments": {ARGS}, "timeout_ms": 0}', id="timeout-zero"),
    pytest.param(b'{"arguments": {ARGS}, "timeout_ms": 1.5}', id="timeout-float"),
    pytest.param(b'{"arguments": {ARGS}, "timeout_ms": "100"}', id="timeout-string"),
    pytest.param(b'{"arguments": {ARGS}, "arguments": {ARGS}}', id="duplicate-key"),
    pytest.param(b'{"arguments": {ARGS, "x": 1, "x": 2}}', id="duplicate-nested-key"),
    pytest.param(b'{"arguments": {ARGS}, "timeout_ms": NaN}', id="nan"),
    pytest.param(b'{"arguments": {ARGS}, "timeout_ms": Infinity}', id="infinity"),
    pytest.param(b'{"arguments": {ARGS}, "timeout_ms": -Infinity}', id="minus-infinity"),
    pytest.param(b'{"arguments": {ARGS}, "timeout_ms": 1e999}', id="overflowing-float"),
    pytest.param(b'{"arguments": {ARGS, "n": 9007199254740992}}', id="unsafe-integer"),
    pytest.param(b'{"arguments": {ARGS, "s": "\\ud800"}}', id="lone-surrogate"),
    pytest.param(
        b'{"arguments": {ARGS, "deep": ' + b"[" * 70 + b"]" * 70 + b"}}", id="nesting-over-64"
    ),
]
MOVE_ARGS = b'"duration_s": 0, "behaviour": "succeed"'
ECHO_ARGS = b'"message": "x"'


@pytest.mark.parametrize("body", BAD_BODIES)
async def test_bad_action_body_is_400_and_nothing_is_admitted(body: bytes) -> None:
    async with running_stack() as stack:
        response = await stack.client.post(
            "/tools/mock.move:invoke",
            content=body.replace(b"ARGS", MOVE_ARGS),
            headers={"content-type": "application/json"},
        )
        assert_error(response, 400)
        nothing_admitted(stack)


@pytest.mark.parametrize("body", BAD_BODIES)
async def test_bad_query_body_is_400_and_nothing_is_sent(body: bytes) -> None:
    async with running_stack() as stack:
        response = await stack.client.post(
            "/tools/mock/echo:invoke",
            content=body.replace(b"ARGS", ECHO_ARGS),
            headers={"content-type": "application/json"},
        )
        assert_error(response, 400)
        nothing_admitted(stack)


async def test_oversized_body_is_413_and_nothing_is_admitted() -> None:
    config = with_overrides(max_body_bytes=1024)
    async with running_stack(config) as stack:
        big = {"arguments": {"message": "x" * 2000}}
        response = await stack.client.post("/tools/mock/echo:invoke", json=big)
        assert_error(response, 413, "FORGE_TOOL_BODY_TOO_LARGE")
        nothing_admitted(stack)


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ({"duration_s": "fast", "behaviour": "succeed"}, "$.duration_s"),
        ({"duration_s": -1, "behaviour": "succeed"}, "$.duration_s"),
        ({"duration_s": 1, "behaviour": "dance"}, "$.behaviour"),
        ({"duration_s": 1, "behaviour": "succeed", "speed": 2}, "$"),
        ({"behaviour": "succeed"}, "$.duration_s"),
    ],
)
async def test_arguments_violating_input_schema_are_400_naming_the_path(
    arguments: dict[str, Any], path: str
) -> None:
    async with running_stack() as stack:
        response = await stack.client.post("/tools/mock.move:invoke", json={"arguments": arguments})
        error = assert_error(response, 400, "FORGE_TOOL_INVALID_ARGUMENTS")
        assert error["details"]["path"] == path
        assert path in error["message"]
        nothing_admitted(stack)


async def test_a_missing_argument_names_its_path_its_expected_type_and_the_schema() -> None:
    async with running_stack() as stack:
        response = await stack.client.post(
            "/tools/mock.move:invoke", json={"arguments": {"behaviour": "succeed"}}
        )
        error = assert_error(response, 400, "FORGE_TOOL_INVALID_ARGUMENTS")
        assert error["message"] == (
            "arguments $.duration_s: 'duration_s' is a required property; expected number 0..3600"
        )
        assert error["details"]["expected"] == {"type": "number", "minimum": 0, "maximum": 3600}
        assert error["details"]["input_schema"]["required"] == ["duration_s", "behaviour"]
        nothing_admitted(stack)


async def test_query_arguments_violating_input_schema_are_400_naming_the_path() -> None:
    async with running_stack() as stack:
        response = await stack.client.post(
            "/tools/mock/echo:invoke", json={"arguments": {"message": 5}}
        )
        error = assert_error(response, 400, "FORGE_TOOL_INVALID_ARGUMENTS")
        assert error["details"]["path"] == "$.message"
        nothing_admitted(stack)


# ---------------------------------------------------------------- not found, unavailable


async def test_a_misspelled_tool_is_404_offering_the_closest_tool_id() -> None:
    async with running_stack() as stack:
        for answer in (
            await stack.client.get("/tools/mock.mov"),
            await stack.client.get("/tools/mock.mov/context"),
            await stack.client.post("/tools/mock.mov:invoke", json={"arguments": {}}),
        ):
            error = assert_error(answer, 404, "FORGE_TOOL_NOT_FOUND")
            assert error["message"].startswith("no tool 'mock.mov'; did you mean 'mock.move'")
            assert error["details"]["suggestions"][0] == "mock.move"


async def test_unknown_tool_endpoint_operation_and_invocation_are_404() -> None:
    async with running_stack() as stack:
        client = stack.client
        assert_error(await client.get("/tools/nope"), 404, "FORGE_TOOL_NOT_FOUND")
        assert_error(await client.get("/tools/nope/context"), 404, "FORGE_TOOL_NOT_FOUND")
        assert_error(
            await client.post("/tools/nope:invoke", json={"arguments": {}}),
            404,
            "FORGE_TOOL_NOT_FOUND",
        )
        assert_error(
            await client.post("/tools/ghost/echo:invoke", json={"arguments": {}}),
            404,
            "FORGE_TOOL_ENDPOINT_UNKNOWN",
        )
        assert_error(
            await client.post("/tools/mock/nope:invoke", json={"arguments": {}}),
            404,
            "FORGE_TOOL_OPERATION_NOT_FOUND",
        )
        for path in ("", "/result", "/events"):
            assert_error(
                await client.get(f"/invocations/inv_nope{path}"),
                404,
                "FORGE_TOOL_INVOCATION_NOT_FOUND",
            )
        for command in ("cancel", "stop"):
            assert_error(
                await client.post(f"/invocations/inv_nope/{command}"),
                404,
                "FORGE_TOOL_INVOCATION_NOT_FOUND",
            )
        assert_error(await client.get("/nowhere"), 404, "FORGE_TOOL_ROUTE_NOT_FOUND")
        assert_error(await client.delete("/tools"), 405, "FORGE_TOOL_METHOD_NOT_ALLOWED")
        nothing_admitted(stack)


async def test_absent_provider_is_503_retryable_with_retry_after() -> None:
    async with running_stack(register=False) as stack:
        for path, arguments in (
            ("/tools/mock/echo:invoke", {"message": "x"}),
            ("/tools/mock.move:invoke", QUICK),
            ("/tools/mock.stream:invoke", {}),
        ):
            response = await stack.client.post(path, json={"arguments": arguments})
            error = assert_error(response, 503, "FORGE_TOOL_ENDPOINT_UNAVAILABLE")
            assert error["retryable"] is True
            assert response.headers["retry-after"].isdigit()
        nothing_admitted(stack)


async def test_unregistered_provider_becomes_503_again() -> None:
    async with running_stack() as stack:
        stack.provider.unregister()
        await eventually_async(
            lambda: stack.gateway.registry.current("mock") is None, what="the unregistration"
        )
        response = await stack.client.post(
            "/tools/mock/echo:invoke", json={"arguments": {"message": "x"}}
        )
        assert_error(response, 503, "FORGE_TOOL_ENDPOINT_UNAVAILABLE")


async def test_max_concurrency_is_503_retryable() -> None:
    async with running_stack() as stack:
        first = await start(stack, "mock.move", HANG)
        response = await stack.client.post("/tools/mock.move:invoke", json={"arguments": QUICK})
        error = assert_error(response, 503, "FORGE_TOOL_GATEWAY_BUSY")
        assert error["retryable"] is True
        assert error["details"]["max_concurrency"] == 1
        assert "retry-after" in response.headers
        assert invoke_requests(stack.provider.received) == 1
        assert len(stack.gateway.runtime.store) == 1
        await cancel_and_wait(stack, first["invocation_id"])
        after = await start(stack, "mock.move", QUICK)
        await wait_terminal(stack, after["invocation_id"])


async def test_untrusted_host_header_is_refused_on_loopback() -> None:
    async with running_stack() as stack:
        response = await stack.client.get("/tools", headers={"host": "evil.example"})
        assert_error(response, 403, "FORGE_TOOL_HOST_NOT_ALLOWED")


async def test_a_cancel_that_cannot_be_sent_is_a_retryable_503_not_a_500() -> None:
    def accept_then_unroutable(envelope: ToolEnvelope) -> ToolEnvelope | None:
        if envelope.message_type == "tool.control.request":
            raise ConnectionError("dora send_output failed")
        if envelope.message_type == "tool.invoke.request":
            return make_invoke_response_envelope(ToolAccepted(details={}), envelope)
        return None

    async with scripted_stack(accept_then_unroutable) as stack:
        admitted = await stack.client.post("/tools/mock.move:invoke", json={"arguments": HANG})
        invocation_id = data(admitted, 202)["invocation_id"]
        response = await stack.client.post(f"/invocations/{invocation_id}/cancel")
        error = assert_error(response, 503, "FORGE_TOOL_CONTROL_UNDELIVERED")
        assert error["retryable"] is True
        assert response.headers["retry-after"] == "1"
        assert (await read(stack, invocation_id))["cancel_status"] == "none"


async def answered_without_token(app: ASGIApp, kind: str, path: str) -> list[Message]:
    """What ``app`` sends to a bare ``kind`` request for ``path`` from a loopback Host."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    websocket = kind == "websocket"
    scope = {
        "type": "websocket" if websocket else "http",
        "method": kind,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
        "server": ("127.0.0.1", 8080),
        "scheme": "ws" if websocket else "http",
        "asgi": {"version": "3.0"},
    }
    await app(scope, receive, send)
    return sent


async def test_every_route_and_websocket_refuses_a_request_without_the_token() -> None:
    async with running_stack() as stack:
        app = create_app(stack.gateway, gateway_policy(stack.gateway.config, "t" * 32))
        paths = {
            re.sub(r"\{[^}]+\}", "x", route_path): getattr(route, "methods", None)
            for route in app.routes
            if isinstance(route, BaseRoute) and (route_path := getattr(route, "path", None))
        }
        assert {"/ws/images", "/ws/state", "/openapi.json", "/tools"} <= set(paths)
        for path, methods in paths.items():
            for kind in sorted(methods) if methods else ["websocket"]:
                sent = await answered_without_token(app, kind, path)
                if kind == "websocket":
                    assert sent == [{"type": "websocket.close", "code": 1008}], path
                else:
                    assert sent[0]["status"] == 401, (kind, path)
