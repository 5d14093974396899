"""ForgeToolClient: the envelope contract, typed errors, no retries, against a real Gateway."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from doraforge.gateway.http import create_app, gateway_policy
from doraforge.paos.client import ForgeToolClient, spec_sha256
from doraforge.paos.errors import (
    ForgeHttpError,
    ForgeProtocolError,
    ForgeTimeout,
    ForgeTransportError,
    PaosError,
)
from doraforge.wire.guard import TransportPolicy
from tests.gateway.harness import Stack, mock_config, running_stack
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1"
HANG = {"duration_s": 1, "behaviour": "hang"}
TOKEN = "t" * 20 + "-client-test"

type Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that records every request and answers with ``reply``."""

    def __init__(self, reply: Handler) -> None:
        self.reply = reply
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.reply(request)

    def client(self, **options: Any) -> ForgeToolClient:
        return ForgeToolClient(BASE, transport=httpx.MockTransport(self), **options)


def answer(status: int, body: object) -> Handler:
    return lambda _request: httpx.Response(status, json=body)


def gateway_error(status: int, code: str, *, retryable: bool = False) -> dict[str, Any]:
    error = {"code": code, "message": "no", "retryable": retryable, "details": {"x": 1}}
    return {"ok": False, "msg": "no", "error": error}


@asynccontextmanager
async def gateway_client(
    *, policy: TransportPolicy | None = None, token: str | None = None
) -> AsyncIterator[tuple[Stack, ForgeToolClient]]:
    """A real in-process Gateway with the mock provider (behind ``policy``), and a client
    over ASGI presenting ``token``."""
    async with running_stack() as stack:
        transport = httpx.ASGITransport(app=create_app(stack.gateway, policy))
        async with ForgeToolClient(BASE, transport=transport, token=token) as client:
            yield stack, client


async def poll_result(client: ForgeToolClient, invocation_id: str) -> dict[str, Any]:
    """Read the result (bounded) until it is available."""
    return await eventually_async(
        lambda: client.result(invocation_id), within=10, what="the result", interval=0.01
    )


# ---------------------------------------------------------------- envelope contract


async def test_success_returns_the_data_object() -> None:
    recorder = Recorder(answer(200, {"ok": True, "data": {"tools": []}}))
    async with recorder.client() as client:
        assert await client.list_tools() == {"tools": []}


async def test_ok_true_with_an_unexpected_status_is_a_protocol_error() -> None:
    recorder = Recorder(
        answer(200, {"ok": True, "data": {"invocation_id": "i", "attempt_id": "a"}})
    )
    async with recorder.client() as client:
        with pytest.raises(ForgeProtocolError) as caught:
            await client.invoke("mock.move", {}, caller_id="paos:t1")
    assert caught.value.code == "FORGE_CLIENT_UNEXPECTED_STATUS"
    assert caught.value.status_code == 200
    assert caught.value.remote_state == "unknown"


async def test_gateway_error_envelope_becomes_forge_http_error_with_code_and_payload() -> None:
    body = gateway_error(503, "FORGE_TOOL_ENDPOINT_BUSY", retryable=True)
    recorder = Recorder(answer(503, body))
    async with recorder.client() as client:
        with pytest.raises(ForgeHttpError) as caught:
            await client.invoke("mock.move", {}, caller_id="paos:t1")
    error = caught.value
    assert (error.status_code, error.code, error.retryable) == (
        503,
        "FORGE_TOOL_ENDPOINT_BUSY",
        True,
    )
    assert error.payload == body
    assert error.details == {"x": 1}
    assert isinstance(error, PaosError)


async def test_ok_false_with_a_success_status_is_still_an_error() -> None:
    recorder = Recorder(answer(200, gateway_error(200, "FORGE_TOOL_STRANGE")))
    async with recorder.client() as client:
        with pytest.raises(ForgeHttpError) as caught:
            await client.context("mock.move")
    assert caught.value.code == "FORGE_TOOL_STRANGE"
    assert caught.value.retryable is False


@pytest.mark.parametrize("data", [[1, 2], "text", None, 3])
async def test_data_that_is_not_an_object_is_a_protocol_error(data: object) -> None:
    recorder = Recorder(answer(200, {"ok": True, "data": data}))
    async with recorder.client() as client:
        with pytest.raises(ForgeProtocolError) as caught:
            await client.invocation("inv-1")
    assert caught.value.code == "FORGE_CLIENT_BAD_DATA"


@pytest.mark.parametrize(
    "content",
    [
        b"<html>bad gateway</html>",
        b"",
        b'{"ok": true, "ok": true, "data": {}}',
        b"[NaN]",
        b'{"ok": true, "data": {"n": 1e999}}',
        b'{"ok": true, "data": {"n": 9007199254740993}}',
        b'{"ok": true, "data": {"s": "\\ud800"}}',
        b"[" * 100 + b"]" * 100,
    ],
)
async def test_a_body_that_is_not_strict_json_is_a_protocol_error(content: bytes) -> None:
    recorder = Recorder(lambda _request: httpx.Response(502, content=content))
    async with recorder.client() as client:
        with pytest.raises(ForgeProtocolError) as caught:
            await client.list_tools()
    assert caught.value.code == "FORGE_CLIENT_INVALID_JSON"
    assert caught.value.status_code == 502


async def test_an_error_envelope_without_a_code_is_a_protocol_error() -> None:
    recorder = Recorder(answer(500, {"ok": False, "error": "boom"}))
    async with recorder.client() as client:
        with pytest.raises(ForgeProtocolError) as caught:
            await client.list_tools()
    assert caught.value.code == "FORGE_CLIENT_BAD_ENVELOPE"


async def test_admission_without_an_attempt_id_is_a_protocol_error() -> None:
    recorder = Recorder(answer(202, {"ok": True, "data": {"invocation_id": "inv-1"}}))
    async with recorder.client() as client:
        with pytest.raises(ForgeProtocolError, match="attempt_id"):
            await client.invoke("mock.move", {}, caller_id="paos:t1")


async def test_result_status_must_match_the_http_status() -> None:
    recorder = Recorder(answer(200, {"ok": True, "data": {"status": "pending"}}))
    async with recorder.client() as client:
        with pytest.raises(ForgeProtocolError):
            await client.result("inv-1")


async def test_an_oversized_response_is_refused() -> None:
    recorder = Recorder(answer(200, {"ok": True, "data": {"blob": "x" * 5000}}))
    async with recorder.client(max_response_bytes=1000) as client:
        with pytest.raises(ForgeProtocolError) as caught:
            await client.list_tools()
    assert caught.value.code == "FORGE_CLIENT_RESPONSE_TOO_LARGE"


async def test_a_spec_whose_announced_hash_disagrees_is_refused() -> None:
    document = {"tool_id": "t", "semantics": "query"}

    def reply(_request: httpx.Request) -> httpx.Response:
        body = {"ok": True, "data": document}
        return httpx.Response(200, json=body, headers={"X-Spec-SHA256": "0" * 64})

    async with Recorder(reply).client() as client:
        with pytest.raises(ForgeProtocolError) as caught:
            await client.tool_spec("t")
    assert caught.value.code == "FORGE_CLIENT_SPEC_HASH_MISMATCH"


# ---------------------------------------------------------------- timeouts and transport


async def test_timeout_is_forge_timeout_after_one_request_and_no_cancel() -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    recorder = Recorder(reply)
    async with recorder.client() as client:
        with pytest.raises(ForgeTimeout) as caught:
            await client.invoke("mock.move", HANG, caller_id="paos:t1")
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.remote_state == "unknown"
    assert "remote state is unknown" in caught.value.message
    assert caught.value.retryable is False
    assert caught.value.details["timeout"] == "ReadTimeout"
    assert [(r.method, r.url.path) for r in recorder.requests] == [
        ("POST", "/tools/mock.move:invoke")
    ]


async def test_connection_failure_is_a_transport_error_after_one_request() -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    recorder = Recorder(reply)
    async with recorder.client() as client:
        with pytest.raises(ForgeTransportError) as caught:
            await client.query("mock", "echo", {"message": "hi"}, caller_id="paos:diag")
    assert isinstance(caught.value, ConnectionError)
    assert caught.value.remote_state == "unknown"
    assert len(recorder.requests) == 1


async def test_nothing_listens_is_a_transport_error() -> None:
    async with ForgeToolClient("http://127.0.0.1:1", timeout_s=2) as client:
        with pytest.raises(ForgeTransportError):
            await client.list_tools()


async def test_query_timeout_ms_is_sent_and_stretches_the_read_timeout() -> None:
    recorder = Recorder(answer(200, {"ok": True, "data": {"response": {}}}))
    async with recorder.client(timeout_s=1) as client:
        await client.query("mock", "echo", {"message": "hi"}, caller_id="paos:d", timeout_ms=30_000)
    request = recorder.requests[0]
    assert json.loads(request.content) == {
        "arguments": {"message": "hi"},
        "caller_id": "paos:d",
        "timeout_ms": 30_000,
    }
    assert request.extensions["timeout"]["read"] >= 30


# ---------------------------------------------------------------- paths


async def test_every_path_component_is_fully_percent_encoded() -> None:
    recorder = Recorder(answer(200, {"ok": True, "data": {}}))
    async with recorder.client() as client:
        await client.context("a/b:c")
        await client.query("a/b:c", "op/x", {}, caller_id="paos:d")
        await client.invocation("inv/1:2")
        with pytest.raises(ForgeProtocolError):
            await client.latest_image("cam/1")
    paths = [request.url.raw_path for request in recorder.requests]
    assert paths == [
        b"/tools/a%2Fb%3Ac/context",
        b"/tools/a%2Fb%3Ac/op%2Fx:invoke",
        b"/invocations/inv%2F1%3A2",
        b"/observations/images/cam%2F1/latest?format=png",
    ]


async def test_lookup_caller_quotes_the_caller_id_as_a_query_parameter() -> None:
    body = {"ok": True, "data": {"caller_id": "paos:a&b", "invocations": []}}
    recorder = Recorder(answer(200, body))
    async with recorder.client() as client:
        assert await client.lookup_caller("paos:a&b") == []
    assert recorder.requests[0].url.params["caller_id"] == "paos:a&b"


# ---------------------------------------------------------------- real Gateway


async def test_tool_spec_hash_equals_the_context_spec_sha256() -> None:
    async with gateway_client() as (_stack, client):
        listing = await client.list_tools()
        assert "mock.move" in {tool["tool_id"] for tool in listing["tools"]}
        document, digest = await client.tool_spec("mock.move")
        context = await client.context("mock.move")
    assert document["tool_id"] == "mock.move"
    assert digest == spec_sha256(document) == context["spec_sha256"]
    assert context["ready"] is True


async def test_query_returns_the_gateway_data() -> None:
    async with gateway_client() as (_stack, client):
        data = await client.query("mock", "echo", {"message": "hi"}, caller_id="paos:diag")
    assert data["response"]["outcome"] == "completed"
    assert data["response"]["result"]["outputs"] == {"message": "hi"}


async def test_unknown_tool_is_a_404_forge_http_error() -> None:
    async with gateway_client() as (_stack, client):
        with pytest.raises(ForgeHttpError) as caught:
            await client.context("no/such:tool")
    assert caught.value.status_code == 404
    assert caught.value.code == "FORGE_TOOL_NOT_FOUND"


async def test_action_admission_status_and_result_pending_then_available() -> None:
    async with gateway_client() as (_stack, client):
        admitted = await client.invoke(
            "mock.move", {"duration_s": 0.2, "behaviour": "succeed"}, caller_id="paos:t1:r1"
        )
        first = await client.result(admitted["invocation_id"])
        status = await client.invocation(admitted["invocation_id"])
        result = await poll_result(client, admitted["invocation_id"])
    assert admitted["attempt_id"]
    assert first is None
    assert status["caller_id"] == "paos:t1:r1"
    assert result["phase"] == "completed"
    assert result["result"] == {"status": "succeeded", "outputs": {"travelled_s": 0.2}}


async def test_cancel_is_accepted_not_stopped_and_lookup_finds_the_caller() -> None:
    async with gateway_client() as (_stack, client):
        admitted = await client.invoke("mock.move", HANG, caller_id="paos:t2:r1")
        cancel = await client.cancel(admitted["invocation_id"])
        result = await poll_result(client, admitted["invocation_id"])
        found = await client.lookup_caller("paos:t2:r1")
        nobody = await client.lookup_caller("paos:nobody")
    assert cancel["command"] == "cancel"
    assert cancel["cancel_status"] in ("accepted", "requested")
    assert result["phase"] == "cancelled"
    assert [item["invocation_id"] for item in found] == [admitted["invocation_id"]]
    assert nobody == []


async def test_a_session_is_stopped_through_stop() -> None:
    async with gateway_client() as (_stack, client):
        admitted = await client.invoke("mock.stream", {}, caller_id="paos:t3:r1")
        stop = await client.stop(admitted["invocation_id"])
        result = await poll_result(client, admitted["invocation_id"])
    assert stop["command"] == "stop"
    assert result["phase"] == "stopped"


async def test_cancel_on_the_wrong_verb_is_a_conflict() -> None:
    async with gateway_client() as (_stack, client):
        admitted = await client.invoke("mock.stream", {}, caller_id="paos:t4:r1")
        with pytest.raises(ForgeHttpError) as caught:
            await client.cancel(admitted["invocation_id"])
        await client.stop(admitted["invocation_id"])
        await poll_result(client, admitted["invocation_id"])
    assert caught.value.status_code == 409


# ---------------------------------------------------------------- bearer token


def _routes_answering_everything(request: httpx.Request) -> httpx.Response:
    if request.url.path.endswith("/latest"):
        headers = {f"x-frame-{n}": "1" for n in ("seq", "timestamp-ns", "received-ns")}
        return httpx.Response(200, content=b"png", headers={**headers, "content-type": "image/png"})
    data = {"invocation_id": "i", "attempt_id": "a", "sources": [], "invocations": []}
    status = 202 if request.url.path.endswith(":invoke") else 200
    return httpx.Response(status, json={"ok": True, "data": data})


async def _every_route(client: ForgeToolClient) -> None:
    await client.list_tools()
    await client.context("mock.move")
    await client.invoke("mock.move", {}, caller_id="paos:t:1")
    await client.invocation("i")
    await client.cancel("i")
    await client.lookup_caller("paos:t:1")
    await client.image_sources()
    await client.latest_image("scene")


async def test_every_request_presents_the_bearer_token_observations_included() -> None:
    recorder = Recorder(_routes_answering_everything)
    async with recorder.client(token=TOKEN) as client:
        await _every_route(client)
    assert len(recorder.requests) == 8
    assert {r.headers.get("authorization") for r in recorder.requests} == {f"Bearer {TOKEN}"}
    assert recorder.requests[-1].url.path == "/observations/images/scene/latest"


async def test_without_a_token_no_authorization_header_is_sent() -> None:
    recorder = Recorder(_routes_answering_everything)
    async with recorder.client() as client:
        await _every_route(client)
    assert [r for r in recorder.requests if "authorization" in r.headers] == []


async def test_a_token_source_is_asked_before_every_request() -> None:
    tokens = iter(["first-token-0123456789", "second-token-0123456789"])
    recorder = Recorder(answer(200, {"ok": True, "data": {"tools": []}}))
    async with recorder.client(token=lambda: next(tokens)) as client:
        await client.list_tools()
        await client.list_tools()
    sent = [r.headers["authorization"] for r in recorder.requests]
    assert sent == ["Bearer first-token-0123456789", "Bearer second-token-0123456789"]


async def test_the_token_never_appears_in_the_repr_or_in_a_transport_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with Recorder(refuse).client(token=TOKEN) as client:
        with pytest.raises(ForgeTransportError) as caught:
            await client.list_tools()
        shown = repr(client)
    assert TOKEN not in shown
    assert "token=set" in shown
    assert TOKEN not in str(caught.value.to_payload())


async def test_a_gateway_with_a_token_refuses_other_callers_and_serves_the_token() -> None:
    policy = gateway_policy(mock_config(), TOKEN)
    for presented, code in [
        (None, "FORGE_TOOL_AUTH_REQUIRED"),
        ("x" * 32, "FORGE_TOOL_AUTH_INVALID"),
    ]:
        async with gateway_client(policy=policy, token=presented) as (stack, client):
            with pytest.raises(ForgeHttpError) as caught:
                await client.invoke("mock.move", HANG, caller_id="paos:t5:r1")
            assert (caught.value.status_code, caught.value.code) == (401, code)
            assert stack.gateway.runtime.store.latest_for_caller("paos:t5:r1") is None
    async with gateway_client(policy=policy, token=TOKEN) as (_stack, client):
        data = await client.query("mock", "echo", {"message": "hi"}, caller_id="paos:diag")
        sources = await client.image_sources()
    assert data["response"]["result"]["outputs"] == {"message": "hi"}
    assert isinstance(sources, list)
