"""Property-based fuzzing of POST /mcp and POST /api/tools/call through an in-process ASGI
client: whatever the body, the server answers without a 5xx."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doraforge.registry.settings import ServerSettings
from tests.registry.context.fake_sources import context_app

# The demo tools and the five context tools over small fake sources.
APP = context_app(ServerSettings(grants=frozenset({"robot.read", "robot.write"}), mcp_enabled=True))
# The ASGI transport reports this client address; the MCP edge requires a loopback peer.
TRANSPORT = httpx.ASGITransport(app=APP, client=("127.0.0.1", 50000))
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
names = (
    st.sampled_from(["demo_echo", "demo.write", "demo_big", "demo_fail", "x", ""])
    | st.sampled_from(["search_context", "get_context", "list_context", "resolve_navigation"])
    | st.text()
)
methods = st.sampled_from(["initialize", "ping", "tools/list", "tools/call", "nope"]) | st.text()
rpc = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0"]) | values},
    optional={
        "id": st.integers() | st.text() | values,
        "method": methods,
        "params": st.fixed_dictionaries(
            {}, optional={"name": names, "arguments": values, "protocolVersion": values}
        )
        | values,
    },
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["portos_tool_call"]) | values,
        "requestId": st.text(max_size=210) | values,
        "name": names | values,
        "version": st.integers() | values,
        "arguments": st.dictionaries(st.text(max_size=8), values, max_size=4) | values,
        "scope": values,
    },
)


async def _post(path: str, body: Any, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(transport=TRANSPORT, base_url="http://127.0.0.1") as client:
        return await client.post(path, content=json.dumps(body), headers=headers)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=rpc | values, key=st.none() | st.text(max_size=20))
def test_mcp_never_answers_5xx(body: Any, key: str | None) -> None:
    headers = dict(HEADERS)
    if key is not None and key.isascii() and key.isprintable():
        headers["idempotency-key"] = key
    answer = asyncio.run(_post("/mcp", body, headers))
    assert answer.status_code < 500
    if answer.status_code == 200:
        # A batch (a list body, protocol 2025-03-26) is answered by a list of answers.
        answers = answer.json()
        for message in answers if isinstance(answers, list) else [answers]:
            assert ("result" in message) != ("error" in message)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=envelopes | values)
def test_tool_calls_never_answer_5xx(body: Any) -> None:
    answer = asyncio.run(_post("/api/tools/call", body, {"content-type": "application/json"}))
    assert answer.status_code < 500
    assert isinstance(answer.json(), dict)
