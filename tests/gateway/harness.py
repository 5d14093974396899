"""An in-process Gateway with the real mock provider behind a LocalCarrier."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from forge_tool import ToolEndpointHandler

from doraforge.gateway.clock import Clock
from doraforge.gateway.config import GatewayConfig, load_config
from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app
from doraforge.gateway.journal import Journal
from doraforge.gateway.local import LocalCarrier, LocalProvider
from doraforge.gateway.main import server_config
from doraforge.nodes.mock.endpoint import definition
from tests.support.live_server import LiveServer
from tests.support.waiting import eventually

MOCK_CONFIG = Path(__file__).resolve().parents[2] / "dataflows" / "mock.gateway.yml"


def mock_config(**overrides: object) -> GatewayConfig:
    """The shipped mock Gateway config with top-level fields overridden."""
    config = load_config(MOCK_CONFIG)
    return config.model_copy(update=overrides)


def mock_handler(instance_id: str) -> ToolEndpointHandler:
    """A fresh mock provider process with ``instance_id``."""
    spec = definition(endpoint_instance_id=instance_id)
    return ToolEndpointHandler(
        spec.descriptor, endpoint_instance_id=instance_id, operations=spec.operations
    )


@dataclass
class Stack:
    """A running in-process Gateway, its mock provider and an HTTP client."""

    gateway: Gateway
    provider: LocalProvider
    client: httpx.AsyncClient


@asynccontextmanager
async def running_stack(
    config: GatewayConfig | None = None,
    *,
    journal: Journal | None = None,
    clock: Clock | None = None,
    register: bool = True,
) -> AsyncIterator[Stack]:
    """Start a Gateway (without its background tick) with the mock provider attached."""
    carrier = LocalCarrier()
    gateway = Gateway(config or mock_config(), send=carrier.send, journal=journal, clock=clock)
    gateway.runtime.restore()
    provider = carrier.add(LocalProvider("mock", mock_handler), gateway.on_message)
    transport = httpx.ASGITransport(app=create_app(gateway))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        stack = Stack(gateway, provider, client)
        if register:
            await registered(stack)
        yield stack


async def registered(stack: Stack) -> None:
    """Register the provider and wait (bounded) until the Gateway accepted it."""
    import asyncio

    stack.provider.register()
    for _ in range(100):
        if stack.provider.registry_responses:
            return
        await asyncio.sleep(0)
    raise AssertionError("registration was never answered")


@contextmanager
def live_mock_gateway() -> Iterator[tuple[Gateway, LiveServer]]:
    """A Gateway on a real loopback socket with the mock provider registered and ready
    (for peers such as PhyAgentOS that call it over HTTP from another process)."""
    carrier = LocalCarrier()
    gateway = Gateway(mock_config(), send=carrier.send)
    gateway.runtime.restore()
    provider = carrier.add(LocalProvider("mock", mock_handler), gateway.on_message)

    def on_loop(loop: asyncio.AbstractEventLoop) -> None:
        gateway.observations.bind_loop(loop)
        loop.call_soon(provider.register)

    config = server_config(create_app(gateway), "127.0.0.1", 0)
    with LiveServer(config, on_loop=on_loop) as server, server.client() as client:
        eventually(
            lambda: client.get("/tools/mock.move/context").json()["data"]["ready"],
            within=10.0,
            what="the mock endpoint to register",
        )
        yield gateway, server
