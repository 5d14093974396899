"""Idempotency: replay, conflict, expiry with a fake clock, concurrent duplicates."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from doraforge.registry.errors import RegistryError
from doraforge.registry.http import status_for
from doraforge.registry.idempotency import TOMBSTONE_FACTOR
from doraforge.registry.model import Principal
from doraforge.registry.service import RegistryService
from tests.registry.test_core_support import AGENT, call, entry, service_with_search
from tests.support.clock import FakeClock

pytestmark = pytest.mark.anyio


async def test_replay_returns_the_retained_result_marked_duplicate() -> None:
    service, adapter = service_with_search()
    first = await service.call(call("r1", query="q"), AGENT)
    again = await service.call(call("r1", "brain_search", query="q"), AGENT)
    assert first["duplicate"] is False
    assert again == {**first, "duplicate": True}
    assert len(adapter.calls) == 1
    assert service.get_call("r1") == first


async def test_replay_matches_on_normalised_arguments() -> None:
    service, adapter = service_with_search()
    await service.call(call("r1", query="q", limit="5"), AGENT)
    again = await service.call(call("r1", query="q", limit=5), AGENT)
    assert again["duplicate"] is True
    assert len(adapter.calls) == 1


@pytest.mark.parametrize(
    "second",
    [
        call("r1", query="other"),
        call("r1", "brain.recent", query="q"),
    ],
)
async def test_same_id_different_content_is_a_conflict(second: dict[str, Any]) -> None:
    service, adapter = service_with_search()
    service.register(entry("brain.recent"), adapter)
    await service.call(call("r1", query="q"), AGENT)
    with pytest.raises(RegistryError) as caught:
        await service.call(second, AGENT)
    assert caught.value.code == "TOOL_IDEMPOTENCY_CONFLICT"
    assert status_for(caught.value) == 409
    assert len(adapter.calls) == 1


async def test_same_id_from_another_scope_is_a_conflict() -> None:
    service, _ = service_with_search()
    await service.call(call("r1", query="q"), AGENT)
    with pytest.raises(RegistryError) as caught:
        await service.call(call("r1", query="q"), Principal(id="u", scope="ui"))
    assert caught.value.code == "TOOL_IDEMPOTENCY_CONFLICT"


async def test_expired_result_is_409_and_never_rerun() -> None:
    clock = FakeClock()
    service, adapter = service_with_search(clock=clock, result_ttl_s=60)
    await service.call(call("r1", query="q"), AGENT)
    clock.advance(61)
    with pytest.raises(RegistryError) as caught:
        await service.call(call("r1", query="q"), AGENT)
    assert caught.value.code == "TOOL_IDEMPOTENCY_EXPIRED"
    assert status_for(caught.value) == 409
    with pytest.raises(RegistryError) as lookup:
        service.get_call("r1")
    assert lookup.value.code == "TOOL_CALL_NOT_FOUND"
    assert len(adapter.calls) == 1


async def test_tombstone_outlives_the_result_window_then_is_forgotten() -> None:
    clock = FakeClock()
    service, adapter = service_with_search(clock=clock, result_ttl_s=10)
    await service.call(call("r1", query="q"), AGENT)
    clock.advance(10 * TOMBSTONE_FACTOR - 1)
    with pytest.raises(RegistryError):
        await service.call(call("r1", query="q"), AGENT)
    clock.advance(2)
    result = await service.call(call("r1", query="q"), AGENT)
    assert result["duplicate"] is False
    assert len(adapter.calls) == 2


async def test_result_count_window_evicts_oldest_to_a_tombstone() -> None:
    service, adapter = service_with_search(max_results=2)
    for request_id in ("a", "b", "c"):
        await service.call(call(request_id, query="q"), AGENT)
    assert service.get_call("c")["state"] == "completed"
    with pytest.raises(RegistryError) as caught:
        await service.call(call("a", query="q"), AGENT)
    assert caught.value.code == "TOOL_IDEMPOTENCY_EXPIRED"
    assert len(adapter.calls) == 3


async def test_concurrent_duplicates_execute_the_adapter_once() -> None:
    service = RegistryService()
    started, release = asyncio.Event(), asyncio.Event()
    executions: list[dict[str, Any]] = []

    async def slow(arguments: dict[str, Any]) -> dict[str, Any]:
        executions.append(arguments)
        started.set()
        await release.wait()
        return {"n": len(executions)}

    service.register(entry(), slow)

    async def release_when_started() -> None:
        await started.wait()
        release.set()

    results = await asyncio.gather(
        *(service.call(call("same", query="q"), AGENT) for _ in range(8)),
        release_when_started(),
    )
    outcomes = [r for r in results[:8] if r is not None]
    assert len(outcomes) == 8
    assert len(executions) == 1
    assert [r["duplicate"] for r in outcomes].count(False) == 1
    assert all(r["result"] == {"n": 1} for r in outcomes)


async def test_concurrent_duplicate_with_different_content_conflicts_while_running() -> None:
    service = RegistryService()
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(arguments: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {}

    service.register(entry(), slow)
    first = asyncio.create_task(service.call(call("r", query="a"), AGENT))
    await started.wait()
    with pytest.raises(RegistryError) as caught:
        await service.call(call("r", query="b"), AGENT)
    release.set()
    assert (await first)["state"] == "completed"
    assert caught.value.code == "TOOL_IDEMPOTENCY_CONFLICT"


async def test_result_is_retained_when_the_first_caller_is_cancelled() -> None:
    service = RegistryService()
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(arguments: dict[str, Any]) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"done": True}

    service.register(entry(), slow)
    first = asyncio.create_task(service.call(call("r", query="a"), AGENT))
    await started.wait()
    first.cancel()
    waiter = asyncio.create_task(service.call(call("r", query="a"), AGENT))
    release.set()
    replay = await waiter
    assert first.cancelled()
    assert replay["result"] == {"done": True}
    assert replay["duplicate"] is True
    assert service.get_call("r")["duplicate"] is False


async def test_unknown_call_is_404() -> None:
    service, _ = service_with_search()
    with pytest.raises(RegistryError) as caught:
        service.get_call("nope")
    assert status_for(caught.value) == 404
    assert caught.value.code == "TOOL_CALL_NOT_FOUND"
