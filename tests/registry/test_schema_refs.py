"""A tool schema from outside never makes the registry dial: a remote ``$ref`` is refused at
registration with its code, the HTTP and MCP call paths refuse such a tool without opening a
connection while the registry keeps answering, and a caller without a tool's grants is
denied before any work on the tool's schema."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.registry import gates
from doraforge.registry.errors import InvalidRequest
from doraforge.registry.model import Principal
from doraforge.registry.server import build_app, new_service
from doraforge.registry.service import RegistryService
from doraforge.registry.settings import ServerSettings
from tests.registry.listeners import accepted, counting_listener
from tests.registry.server_support import call_body, running

#: How long the registry may take to answer anything while a hostile tool is being called.
ANSWER_WITHIN_S = 5.0


async def _adapter(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"seen": arguments}


def _entry(name: str, input_schema: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return {
        "name": name,
        "providerName": name.replace(".", "_"),
        "description": f"The {name} test tool.",
        "input_schema": {"type": "object", "additionalProperties": False, **input_schema},
        "output_schema": overrides.pop("output_schema", {"type": "object"}),
        "policy": {
            "scopes": ["agent", "ui"],
            "requiredCapabilities": ["ext.read"],
            "sideEffect": "read",
            "idempotent": True,
            "risk": "low",
        },
    }


def _remote(port: int) -> dict[str, Any]:
    ref = f"http://127.0.0.1:{port}/redir"
    return {"type": "object", "properties": {"x": {"$ref": ref}}}


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback listener that never answers (its backlog completes the handshake)."""
    with counting_listener() as sock:
        yield sock


@pytest.mark.parametrize(
    "schema_of",
    [
        lambda port: ("input_schema", _remote(port)),
        lambda port: ("output_schema", _remote(port)),
        lambda port: (
            "input_schema",
            {"$id": f"http://127.0.0.1:{port}/a", "properties": {"x": {"$ref": "b"}}},
        ),
        lambda port: (
            "input_schema",
            {"properties": {"x": {"$dynamicRef": f"http://127.0.0.1:{port}/d"}}},
        ),
    ],
    ids=["input", "output", "relative-to-a-remote-id", "dynamic-ref"],
)
def test_a_tool_whose_schema_points_outside_is_refused_at_registration_without_a_dial(
    listener: socket.socket, schema_of: Any
) -> None:
    field, schema = schema_of(listener.getsockname()[1])
    entry = _entry("ext.tool", {"type": "object"})
    entry[field] = {**entry[field], **schema}
    service = RegistryService()

    with pytest.raises(InvalidRequest) as refused:
        service.register(entry, _adapter)

    assert refused.value.code == "SCHEMA_REF_REMOTE"
    assert refused.value.details["field"] == field
    assert service.resolve("ext.tool") is None
    assert accepted(listener) == 0


def test_local_references_and_the_bundled_meta_schema_still_register() -> None:
    schema = {
        "type": "object",
        "$defs": {"name": {"type": "string", "maxLength": 5}},
        "properties": {
            "a": {"$ref": "#/$defs/name"},
            "b": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        },
    }
    service = RegistryService()

    service.register(_entry("ext.local", schema), _adapter)

    tool = service.resolve("ext.local")
    assert tool is not None


def test_a_dangling_local_ref_is_refused_with_its_own_code() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}

    with pytest.raises(InvalidRequest) as refused:
        RegistryService().register(_entry("ext.dangling", schema), _adapter)

    assert refused.value.code == "SCHEMA_REF_UNRESOLVABLE"


@pytest.mark.anyio
async def test_an_ungranted_call_is_denied_before_any_work_on_the_tools_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = RegistryService()
    closed = {"type": "object", "properties": {"x": {"type": "integer"}}}
    service.register(_entry("ext.tool", closed), _adapter)
    normalised: list[str] = []
    real = gates.normalise

    def spy(tool: Any, arguments: dict[str, Any]) -> Any:
        normalised.append(tool.entry.name)
        return real(tool, arguments)

    monkeypatch.setattr(gates, "normalise", spy)
    stranger = Principal(id="stranger", scope="agent", grants=frozenset())

    result = await service.call(call_body("ext.tool", {"x": "1"}), stranger)

    assert result["state"] == "denied"
    assert result["error"]["code"] == "TOOL_CAPABILITY_DENIED"
    assert normalised == []
    granted = Principal(id="granted", scope="agent", grants=frozenset({"ext.read"}))
    await service.call(call_body("ext.tool", {"x": 1}, "r-2"), granted)
    assert normalised == ["ext.tool"]


def _post_call(url: str) -> httpx.Response:
    body = call_body("ext.hostile", {"x": 1})
    return httpx.post(f"{url}/api/tools/call", json=body, timeout=ANSWER_WITHIN_S)


async def _mcp_call(url: str) -> Any:
    async with (
        streamable_http_client(f"{url}/mcp") as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await session.call_tool("ext_hostile", {"x": 1})


def test_the_http_and_mcp_call_paths_refuse_without_a_dial_and_the_registry_keeps_answering(
    listener: socket.socket,
) -> None:
    port = listener.getsockname()[1]
    settings = ServerSettings(grants=frozenset({"ext.read"}), mcp_enabled=True)
    service = new_service(settings)
    with contextlib.suppress(InvalidRequest):  # refused here; before the fix it registered
        service.register(_entry("ext.hostile", _remote(port)), _adapter)
    service.register(_entry("ext.fine", {"type": "object"}), _adapter)

    with running(build_app(service, settings)) as url:
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                pending = pool.submit(_post_call, url)
                listed = httpx.get(
                    f"{url}/api/tools", params={"format": "portos"}, timeout=ANSWER_WITHIN_S
                )
                answer = pending.result(timeout=2 * ANSWER_WITHIN_S)
            over_mcp = asyncio.run(asyncio.wait_for(_mcp_call(url), 2 * ANSWER_WITHIN_S))
        finally:
            dialled = accepted(listener)
            listener.close()  # a blocked dial (the old behaviour) ends with a reset

    assert listed.status_code == 200
    assert "ext.fine" in {tool["name"] for tool in listed.json()["tools"]}
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "TOOL_NOT_FOUND"
    assert over_mcp.isError is True
    assert dialled == 0


@pytest.mark.anyio
async def test_a_backtracking_pattern_in_a_tools_schema_cannot_hold_the_registry() -> None:
    service = RegistryService()
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a|aa)+$"}}}
    service.register(_entry("ext.pattern", schema), _adapter)
    granted = Principal(id="granted", scope="agent", grants=frozenset({"ext.read"}))

    answer = await asyncio.wait_for(
        service.call(call_body("ext.pattern", {"x": "a" * 60 + "b"}), granted), ANSWER_WITHIN_S
    )

    assert answer["error"]["code"] == "TOOL_INVALID_ARGUMENTS"
    assert "took too long to match" in answer["error"]["message"]


def test_a_call_of_many_near_misses_over_http_ends_in_time_and_the_registry_answers() -> None:
    settings = ServerSettings(grants=frozenset({"ext.read"}))
    service = new_service(settings)
    items = {"type": "array", "items": {"type": "string", "pattern": "^(a|aa)+$"}}
    service.register(_entry("ext.many", {"properties": {"x": items}}), _adapter)
    near_misses = ["a" * 40 + "b"] * 300  # 300 x 50 ms per validation before the fix

    body = call_body("ext.many", {"x": near_misses})

    with (
        running(build_app(service, settings)) as url,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        pending = pool.submit(
            httpx.post, f"{url}/api/tools/call", json=body, timeout=ANSWER_WITHIN_S
        )
        listed = httpx.get(f"{url}/api/tools", timeout=ANSWER_WITHIN_S)
        answer = pending.result(timeout=2 * ANSWER_WITHIN_S)

    assert listed.status_code == 200
    assert answer.status_code < 500
    assert answer.json()["error"]["code"] == "TOOL_INVALID_ARGUMENTS"
