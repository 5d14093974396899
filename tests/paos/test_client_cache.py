"""One shared client per Gateway URL, at most ``max_clients`` kept, evicted ones closed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from doraforge.paos.client import ForgeToolClient
from doraforge.paos.client_cache import DEFAULT_MAX_CLIENTS, GatewayClients
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.tasks import TaskService


class FakeClient:
    """Stands in for a ForgeToolClient (a real one loads a TLS context: ~50 ms each)."""

    def __init__(self, url: str) -> None:
        self.base_url = url
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


class Factory:
    """Builds clients and remembers every one."""

    def __init__(self, kind: Callable[[str], Any] = FakeClient) -> None:
        self.kind = kind
        self.made: list[Any] = []

    def __call__(self, url: str) -> ForgeToolClient:
        client: ForgeToolClient = self.kind(url)
        self.made.append(client)
        return client


def _closed(client: ForgeToolClient | FakeClient) -> bool:
    if isinstance(client, FakeClient):
        return client.closed
    return client._http.is_closed


@pytest.mark.anyio
async def test_a_url_gets_one_shared_client() -> None:
    factory = Factory(ForgeToolClient)
    clients = GatewayClients(factory)
    first = clients.get("http://127.0.0.1:9001")
    assert clients.get("http://127.0.0.1:9001") is first
    assert len(factory.made) == 1
    await clients.aclose()
    assert _closed(first)


@pytest.mark.anyio
async def test_three_thousand_urls_keep_at_most_the_bound_and_every_client_closes() -> None:
    factory = Factory()
    clients = GatewayClients(factory, max_clients=8)
    for port in range(3000):
        clients.get(f"http://127.0.0.1:{10_000 + port}")
        assert len(clients) <= 8
    assert "http://127.0.0.1:12999" in clients
    assert "http://127.0.0.1:10000" not in clients
    await clients.aclose()
    assert len(factory.made) == 3000
    assert all(_closed(client) for client in factory.made)


@pytest.mark.anyio
async def test_the_least_recently_used_client_is_the_one_evicted() -> None:
    factory = Factory()
    clients = GatewayClients(factory, max_clients=2)
    a = clients.get("http://a.test")
    b = clients.get("http://b.test")
    assert clients.get("http://a.test") is a  # a is now the most recently used
    clients.get("http://c.test")
    assert "http://b.test" not in clients
    assert clients.get("http://a.test") is a
    assert clients.get("http://b.test") is not b  # evicted: a new client next time
    await clients.aclose()
    assert _closed(b)


@pytest.mark.anyio
async def test_an_eviction_outside_an_event_loop_is_closed_by_aclose() -> None:
    factory = Factory()
    clients = GatewayClients(factory, max_clients=1)

    def fill() -> None:  # a worker thread: no running event loop there
        clients.get("http://a.test")
        clients.get("http://b.test")

    await asyncio.to_thread(fill)
    first = factory.made[0]
    assert not _closed(first)
    await clients.aclose()
    assert _closed(first)


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_clients"):
        GatewayClients(Factory(), max_clients=0)


@pytest.mark.anyio
async def test_the_task_service_shares_one_bounded_set_of_clients(tmp_path: Path) -> None:
    factory = Factory()
    store = AgentTaskStore(tmp_path / "tasks.db")
    service = TaskService(store, factory, workspace=tmp_path)
    try:
        first = service.client("http://127.0.0.1:9001")
        assert service.client("http://127.0.0.1:9001") is first
        for port in range(DEFAULT_MAX_CLIENTS + 5):
            service.client(f"http://127.0.0.1:{20_000 + port}")
        assert service.client("http://127.0.0.1:9001") is not first
        await service.aclose()
    finally:
        store.close()
    assert all(_closed(client) for client in factory.made)
