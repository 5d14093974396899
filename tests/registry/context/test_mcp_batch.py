"""JSON-RPC batches on POST /mcp over a real socket, with raw httpx: answered where the
protocol version has them (2025-03-26, or no version header, which means 2025-03-26),
refused with a structured 400 where it does not (2025-06-18, 2025-11-25)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from doraforge.registry.context.budgets import MAX_BATCH_MESSAGES
from doraforge.registry.settings import ServerSettings
from tests.registry.context.fake_sources import context_app
from tests.registry.server_support import DemoTools, running

ACCEPT = "application/json, text/event-stream"
BOTH = frozenset({"robot.read", "robot.write"})
BATCH = [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": "p", "method": "ping"},
    {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tools/call",
        "params": {"name": "search_context", "arguments": {"query": "pick"}},
    },
    {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": "demo_echo", "arguments": {"text": "hi"}},
    },
]


@pytest.fixture
def tools() -> DemoTools:
    return DemoTools()


@pytest.fixture
def base(tools: DemoTools) -> Iterator[str]:
    with running(context_app(ServerSettings(grants=BOTH, mcp_enabled=True), tools=tools)) as url:
        yield url


def _post(base: str, body: Any, version: str | None = None, **headers: str) -> httpx.Response:
    sent = {"accept": ACCEPT, "content-type": "application/json", **headers}
    if version is not None:
        sent["mcp-protocol-version"] = version
    return httpx.post(f"{base}/mcp", json=body, headers=sent, timeout=10)


@pytest.mark.parametrize("version", ["2025-03-26", None])
def test_a_batch_is_answered_in_order_by_id_on_2025_03_26(base: str, version: str | None) -> None:
    answered = _post(base, BATCH, version)
    assert answered.status_code == 200
    replies = answered.json()
    assert [reply["id"] for reply in replies] == [2, "p", 4, 5]  # the notification: no reply
    names = {tool["name"] for tool in replies[0]["result"]["tools"]}
    assert {"search_context", "demo_echo"} <= names
    assert replies[1]["result"] == {}
    assert replies[2]["result"]["structuredContent"]["items"][0]["label"] == "pick-place"
    assert replies[3]["result"]["structuredContent"] == {"text": "hi"}


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_a_batch_is_refused_with_a_structured_400_naming_the_version(
    base: str, version: str, tools: DemoTools
) -> None:
    write = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "demo_write", "arguments": {"value": 1}},
    }
    refused = _post(base, [*BATCH, write], version)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == -32600
    assert version in error["message"]
    assert error["data"]["code"] == "MCP_BATCH_UNSUPPORTED"
    assert error["data"]["details"] == {"version": version, "batchVersions": ["2025-03-26"]}
    assert tools.writes == []  # nothing in a refused batch ran


def test_a_batch_of_notifications_only_is_202_without_a_body(base: str) -> None:
    notes = [{"jsonrpc": "2.0", "method": "notifications/initialized"}] * 3
    answered = _post(base, notes, "2025-03-26")
    assert (answered.status_code, answered.content) == (202, b"")


def test_an_empty_batch_is_an_invalid_request(base: str) -> None:
    answered = _post(base, [], "2025-03-26")
    assert answered.status_code == 400
    assert answered.json()["error"]["code"] == -32600


def test_a_batch_over_the_message_cap_is_refused_before_any_runs(
    base: str, tools: DemoTools
) -> None:
    write = {"jsonrpc": "2.0", "method": "tools/call"}
    params = {"name": "demo_write", "arguments": {"value": 1}}
    batch = [{**write, "id": n, "params": params} for n in range(MAX_BATCH_MESSAGES + 1)]
    refused = _post(base, batch)
    assert refused.status_code == 400
    assert refused.json()["error"]["data"]["code"] == "MCP_BATCH_TOO_LARGE"
    assert tools.writes == []
    accepted = _post(base, batch[:MAX_BATCH_MESSAGES])
    assert accepted.status_code == 200
    assert len(tools.writes) == MAX_BATCH_MESSAGES


def test_initialize_inside_a_batch_is_refused_and_the_rest_answered(base: str) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    replies = _post(base, [initialize, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]).json()
    assert replies[0]["id"] == 1
    assert replies[0]["error"]["code"] == -32600
    assert "initialize" in replies[0]["error"]["message"]
    assert replies[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_invalid_members_get_their_own_errors_and_client_responses_none(base: str) -> None:
    batch = [7, {"jsonrpc": "2.0", "id": 3, "result": {}}, {"jsonrpc": "2.0", "id": 4}]
    replies = _post(base, batch).json()
    assert [(reply["id"], reply["error"]["code"]) for reply in replies] == [
        (None, -32600),
        (None, -32600),
    ]


def test_one_idempotency_key_for_several_calls_of_a_batch_is_refused(
    base: str, tools: DemoTools
) -> None:
    refused = _post(base, BATCH, **{"idempotency-key": "batch-1"})
    assert refused.status_code == 400
    assert refused.json()["error"]["data"]["code"] == "MCP_BATCH_IDEMPOTENCY"
    assert tools.writes == []
