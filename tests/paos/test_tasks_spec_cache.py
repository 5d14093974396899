"""A diagnostic Query takes its ToolSpec from a listing a caller vouched for, only while
that vouch holds; without one (or after a failure that says the Gateway or its route may
have changed) it fetches the spec before the Query, as it always did."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app
from doraforge.gateway.local import LocalCarrier, LocalProvider
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.errors import ForgeHttpError, ForgeTransportError
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.tasks import TaskService
from tests.gateway.harness import mock_config, mock_handler
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1"
ECHO = {"message": "hi"}


class Counting(httpx.AsyncBaseTransport):
    """Forwards to the app and keeps every request's method and path; can break."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.seen: list[tuple[str, str]] = []
        self.broken = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.method, request.url.path))
        if self.broken:
            raise httpx.ConnectError("refused", request=request)
        return await self.inner.handle_async_request(request)

    def spec_reads(self) -> int:
        return sum(1 for method, path in self.seen if method == "GET" and path != "/tools")


@dataclass
class Cell:
    transport: Counting
    service: TaskService
    now: list[float]

    async def listing(self) -> dict[str, Any]:
        return await self.service.client(URL).list_tools()


@pytest.fixture
async def cell(tmp_path: Path) -> AsyncIterator[Cell]:
    carrier = LocalCarrier()
    gateway = Gateway(mock_config(), send=carrier.send)
    provider = carrier.add(LocalProvider("mock", mock_handler), gateway.on_message)
    provider.register()
    await eventually_async(
        lambda: gateway.registry.current("mock") is not None, what="the mock registered"
    )
    transport = Counting(httpx.ASGITransport(app=create_app(gateway)))
    now = [100.0]
    service = TaskService(
        AgentTaskStore(tmp_path / "paos.db"),
        lambda url: ForgeToolClient(url, transport=transport),
        workspace=tmp_path / "workspace",
        clock=lambda: now[0],
    )
    yield Cell(transport, service, now)
    await service.aclose()
    service.store.close()


async def query(cell: Cell, tool_id: str = "mock.echo") -> dict[str, Any]:
    return await cell.service.query(tool_id, ECHO, gateway_url=URL)


async def test_without_a_vouched_listing_every_query_fetches_its_spec(cell: Cell) -> None:
    for _ in range(3):
        assert (await query(cell))["response"]["result"]["outputs"] == ECHO
    assert cell.transport.spec_reads() == 3


async def test_a_vouched_listing_serves_the_spec_until_it_expires(cell: Cell) -> None:
    cell.service.vouch_gateway(URL, await cell.listing(), trusted_for_s=1.5)
    for _ in range(3):
        assert (await query(cell))["response"]["result"]["outputs"] == ECHO
    assert cell.transport.spec_reads() == 0
    cell.now[0] += 1.5
    await query(cell)
    assert cell.transport.spec_reads() == 1


async def test_a_listing_vouched_for_another_url_is_not_used(cell: Cell) -> None:
    cell.service.vouch_gateway("http://127.0.0.1:9", await cell.listing(), trusted_for_s=60)
    await query(cell)
    assert cell.transport.spec_reads() == 1


async def test_a_tool_missing_from_the_listing_is_fetched_and_refused_as_before(
    cell: Cell,
) -> None:
    cell.service.vouch_gateway(URL, await cell.listing(), trusted_for_s=60)
    with pytest.raises(ForgeHttpError) as refused:
        await query(cell, "mock.nothing")
    assert refused.value.code == "FORGE_TOOL_NOT_FOUND"
    assert cell.transport.spec_reads() == 1


async def test_a_route_the_gateway_no_longer_has_drops_the_vouched_listing(cell: Cell) -> None:
    listing = await cell.listing()
    moved = [
        {**spec, "operation": "gone"} if spec["tool_id"] == "mock.echo" else spec
        for spec in listing["tools"]
    ]
    cell.service.vouch_gateway(URL, {**listing, "tools": moved}, trusted_for_s=60)
    with pytest.raises(ForgeHttpError) as refused:
        await query(cell)
    assert refused.value.code == "FORGE_TOOL_OPERATION_NOT_FOUND"
    assert (await query(cell))["response"]["result"]["outputs"] == ECHO
    assert cell.transport.spec_reads() == 1


async def test_a_transport_failure_drops_the_vouched_listing(cell: Cell) -> None:
    cell.service.vouch_gateway(URL, await cell.listing(), trusted_for_s=60)
    cell.transport.broken = True
    with pytest.raises(ForgeTransportError):
        await query(cell)
    cell.transport.broken = False
    await query(cell)
    assert cell.transport.spec_reads() == 1


async def test_a_bound_query_never_reads_a_vouched_listing(cell: Cell) -> None:
    """A task's Query uses its frozen binding; a vouched listing changes nothing there."""
    from doraforge.paos.binding import BindingCandidate

    created = await cell.service.create_task(
        "echo", {"mode": "off", "goal": "echo"}, BindingCandidate.adhoc(URL, ["mock.echo"])
    )
    listing = await cell.listing()
    wrong = [{**spec, "operation": "gone"} for spec in listing["tools"]]
    cell.service.vouch_gateway(URL, {**listing, "tools": wrong}, trusted_for_s=60)
    task_id = created["task"]["task_id"]
    bound = await cell.service.query("mock.echo", ECHO, task_id=task_id)
    assert bound["response"]["result"]["outputs"] == ECHO
