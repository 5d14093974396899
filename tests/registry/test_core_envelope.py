"""The strict portos_tool_call envelope, through the public service surface."""

from __future__ import annotations

from typing import Any

import pytest

from doraforge.registry.envelope import parse_call
from doraforge.registry.errors import RegistryError
from doraforge.registry.http import status_for
from tests.registry.test_core_support import AGENT, service_with_search

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("body", "request_id", "version"),
    [
        ({"requestId": "r-1", "name": "brain.search"}, "r-1", None),
        ({"requestId": "  r.1:a_b-c  ", "name": "brain.search"}, "r.1:a_b-c", None),
        ({"type": "portos_tool_call", "requestId": "r", "name": "x", "version": 2}, "r", 2),
        ({"requestId": "r" * 200, "name": "x", "arguments": {"a": [1]}}, "r" * 200, None),
    ],
)
def test_good_envelopes_parse(body: dict[str, Any], request_id: str, version: int | None) -> None:
    call = parse_call(body)
    assert call.requestId == request_id
    assert call.version == version


@pytest.mark.parametrize(
    "body",
    [
        [],
        "call",
        {"name": "brain.search"},
        {"requestId": "r"},
        {"requestId": "", "name": "x"},
        {"requestId": "   ", "name": "x"},
        {"requestId": "r" * 201, "name": "x"},
        {"requestId": "has space", "name": "x"},
        {"requestId": "r/1", "name": "x"},
        {"requestId": 7, "name": "x"},
        {"requestId": "r", "name": "a/b"},
        {"requestId": "r", "name": "x", "type": "portos_tool_result"},
        {"requestId": "r", "name": "x", "version": "1"},
        {"requestId": "r", "name": "x", "version": True},
        {"requestId": "r", "name": "x", "version": 0},
        {"requestId": "r", "name": "x", "arguments": []},
        {"requestId": "r", "name": "x", "arguments": "q"},
        {"requestId": "r", "name": "x", "scope": "mind"},
        {"requestId": "r", "name": "x", "principal": "root"},
    ],
)
async def test_bad_envelopes_are_400_and_audited(body: Any) -> None:
    service, adapter = service_with_search()
    with pytest.raises(RegistryError) as caught:
        await service.call(body, AGENT)
    assert caught.value.code == "TOOL_INVALID_CALL"
    assert status_for(caught.value) == 400
    assert adapter.calls == []
    assert service.audit.records()[-1]["state"] == "rejected"


async def test_idempotency_key_must_equal_request_id() -> None:
    service, adapter = service_with_search()
    body = {"requestId": "r1", "name": "brain.search", "arguments": {"query": "q"}}
    with pytest.raises(RegistryError) as caught:
        await service.call(body, AGENT, idempotency_key="r2")
    assert caught.value.code == "TOOL_IDEMPOTENCY_KEY_MISMATCH"
    assert adapter.calls == []
    result = await service.call(body, AGENT, idempotency_key="r1")
    assert result["state"] == "completed"


async def test_future_version_is_denied_and_default_is_current() -> None:
    service, adapter = service_with_search()
    future = await service.call(
        {"requestId": "a", "name": "brain.search", "version": 2, "arguments": {"query": "q"}},
        AGENT,
    )
    current = await service.call(
        {"requestId": "b", "name": "brain_search", "arguments": {"query": "q"}}, AGENT
    )
    assert future["state"] == "denied"
    assert future["error"]["code"] == "TOOL_VERSION_MISMATCH"
    assert current["state"] == "completed"
    assert current["version"] == 1
    assert current["name"] == "brain.search"
    assert len(adapter.calls) == 1
