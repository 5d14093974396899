"""Shared helpers for the Gateway unit, HTTP contract and live-socket tests.

Waits here are bounded polls of real state, never sleeps used as synchronisation.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from forge_tool import ToolEnvelope, make_registration_envelope

from doraforge.gateway.catalog import ToolSpec
from doraforge.gateway.clock import Clock
from doraforge.gateway.config import GatewayConfig
from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app
from doraforge.gateway.main import server_config
from doraforge.nodes.mock.endpoint import DESCRIPTOR
from doraforge.wire import toolcodec
from doraforge.wire.guard import TransportPolicy
from tests.gateway.harness import Stack, mock_config
from tests.support.live_server import LiveServer
from tests.support.waiting import eventually_async

type Answer = Callable[[ToolEnvelope], ToolEnvelope | None]

MAX_BYTES = 1_048_576


def invoke_requests(received: Iterable[ToolEnvelope], operation: str | None = None) -> int:
    """How many ``tool.invoke.request`` a provider received (for one operation)."""
    return sum(
        1
        for envelope in received
        if envelope.message_type == "tool.invoke.request"
        and (operation is None or envelope.operation == operation)
    )


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """Check the error envelope ``{"ok": false, "msg", "error": {...}}``; return error."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"ok", "msg", "error"}, body
    assert body["ok"] is False
    assert isinstance(body["msg"], str)
    assert body["msg"]
    error: dict[str, Any] = body["error"]
    assert set(error) == {"code", "message", "retryable", "details"}, error
    assert isinstance(error["retryable"], bool)
    assert isinstance(error["details"], dict)
    assert error["message"] == body["msg"]
    if code is not None:
        assert error["code"] == code, error
    return error


def data(response: httpx.Response, status: int = 200) -> Any:
    """The ``data`` of a success envelope, checking the status first."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["ok"] is True, body
    return body["data"]


async def start(
    stack: Stack | ScriptedStack, tool_id: str, arguments: dict[str, Any], **body: Any
) -> dict[str, Any]:
    """Admit an Action/Session over HTTP and return the admission document."""
    response = await stack.client.post(
        f"/tools/{tool_id}:invoke", json={"arguments": arguments, **body}
    )
    admission: dict[str, Any] = data(response, 202)
    return admission


async def read(stack: Stack | ScriptedStack, invocation_id: str) -> dict[str, Any]:
    """GET the invocation status document."""
    status: dict[str, Any] = data(await stack.client.get(f"/invocations/{invocation_id}"))
    return status


async def wait_terminal(stack: Stack, invocation_id: str, within: float = 5.0) -> dict[str, Any]:
    """Wait (bounded) until the invocation is terminal; return its status document."""
    invocation = stack.gateway.runtime.store.get(invocation_id)
    assert invocation is not None
    await eventually_async(lambda: invocation.terminal, within=within, what="a terminal phase")
    return await read(stack, invocation_id)


def tool_spec(gateway: Gateway, tool_id: str) -> ToolSpec:
    """The Gateway's ToolSpec of ``tool_id``, which the test expects to be served."""
    spec = gateway.catalog.get(tool_id)
    assert spec is not None, tool_id
    return spec


def config_with_tools(
    base: GatewayConfig | None = None, /, **changes: dict[str, Any]
) -> GatewayConfig:
    """A validated copy of the mock config; ``changes[tool_id]`` updates that ToolSpec.

    A ``tool_id`` key inside a change renames the tool.
    """
    raw = copy.deepcopy((base or mock_config()).model_dump(mode="python"))
    for tool in raw["tools"]:
        tool.update(changes.get(tool["tool_id"], {}))
    return GatewayConfig.model_validate(raw)


def with_overrides(base: GatewayConfig | None = None, /, **top: Any) -> GatewayConfig:
    """A validated copy of the mock config with top-level (and nested dict) overrides."""
    raw = copy.deepcopy((base or mock_config()).model_dump(mode="python"))
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key].update(value)
        else:
            raw[key] = value
    return GatewayConfig.model_validate(raw)


@dataclass
class ScriptedProvider:
    """A fake provider on route ``mock``: ``answer`` decides each reply (or silence)."""

    gateway: Gateway
    answer: Answer
    instance_id: str = "epinst-scripted-1"
    received: list[ToolEnvelope] = field(default_factory=list)
    registry_responses: list[ToolEnvelope] = field(default_factory=list)

    def send(self, endpoint_id: str, message: toolcodec.WireMessage) -> None:
        """The Gateway's ``send``: the message crosses the real carrier encoding first."""
        envelope = toolcodec.decode(
            toolcodec.encode(message, max_message_bytes=MAX_BYTES), max_message_bytes=MAX_BYTES
        )
        if envelope.message_type == "endpoint.registry.response":
            self.registry_responses.append(envelope)
            return
        self.received.append(envelope)
        reply = self.answer(envelope)
        if reply is not None:
            asyncio.get_running_loop().call_soon(self.gateway.on_message, endpoint_id, reply)

    def register(self) -> None:
        """Register the mock descriptor under this instance id."""
        self.gateway.on_message(
            "mock",
            make_registration_envelope(
                DESCRIPTOR, endpoint_instance_id=self.instance_id, request_id="reg-scripted"
            ),
        )


@dataclass
class ScriptedStack:
    """A Gateway whose only provider is a :class:`ScriptedProvider`."""

    gateway: Gateway
    provider: ScriptedProvider
    client: httpx.AsyncClient


@asynccontextmanager
async def scripted_stack(
    answer: Answer, config: GatewayConfig | None = None, *, clock: Clock | None = None
) -> AsyncIterator[ScriptedStack]:
    """Run a Gateway against a scripted provider, registered and ready."""
    holder: list[ScriptedProvider] = []
    gateway = Gateway(
        config or mock_config(),
        send=lambda endpoint, envelope: holder[0].send(endpoint, envelope),
        clock=clock,
    )
    provider = ScriptedProvider(gateway, answer)
    holder.append(provider)
    provider.register()
    assert provider.registry_responses, "registration was not answered"
    transport = httpx.ASGITransport(app=create_app(gateway))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield ScriptedStack(gateway, provider, client)


@contextmanager
def live_gateway(
    gateway: Gateway, *, policy: TransportPolicy | None = None
) -> Iterator[LiveServer]:
    """``gateway`` under real uvicorn on a loopback port, with the Gateway's own server
    settings and its observation streams bound to the server's loop.

    ``policy`` is the transport policy (default: the config's, no token); the server's
    ``client()`` sends no token, so tests see exactly what an unauthenticated caller gets.
    """
    config = server_config(create_app(gateway, policy), "127.0.0.1", 0)
    with LiveServer(config, on_loop=gateway.observations.bind_loop) as server:
        yield server
