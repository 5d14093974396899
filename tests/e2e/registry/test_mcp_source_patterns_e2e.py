"""A third-party MCP server cannot hold the registry with a backtracking ``pattern`` in its
tool's output schema: the registry checks the result under its time bound, and the
official SDK's client (which validates with Python's ``re``, unbounded) never sees the
schema's pattern at work. Real server process (``pattern_source_server.py``, tier 1), the
registry on a real socket."""

from __future__ import annotations

import concurrent.futures
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from doraforge.registry.server import build_app, new_service, uvicorn_config
from doraforge.registry.settings import ServerSettings
from tests.support.live_server import LiveServer

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

SERVER_SCRIPT = Path(__file__).parents[2] / "registry" / "sources" / "pattern_source_server.py"
#: 38 a's and a b: Python's re takes seconds on ``^(a|aa)+$``, the bound 50 ms.
NEAR_MISS_CHARS = 38
ANSWER_WITHIN_S = 1.5


@contextmanager
def registry(tmp_path: Path) -> Iterator[LiveServer]:
    server = {
        "command": sys.executable,
        "args": [str(SERVER_SCRIPT)],
        "env": {"NEAR_MISS_CHARS": str(NEAR_MISS_CHARS)},
        "tier": 1,
        "risk": "low",
    }
    settings = ServerSettings(port=0, grants=frozenset({"mcp.slow"}), mcp_servers={"slow": server})
    service = new_service(settings)
    app = build_app(service, settings, sources_dir=tmp_path / "sources")
    with LiveServer(uvicorn_config(app, "127.0.0.1", 0), within=90) as live:
        yield live


def test_a_slow_output_pattern_neither_holds_the_call_nor_the_registry(tmp_path: Path) -> None:
    body = {
        "type": "portos_tool_call",
        "requestId": "r-near-miss",
        "name": "mcp__slow__near_miss",
        "arguments": {},
    }
    with (
        registry(tmp_path) as live,
        httpx.Client(base_url=live.url, timeout=30) as client,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        assert client.get("/api/sources/mcp").json()["servers"][0]["state"] == "ready"
        started = time.monotonic()
        pending = pool.submit(client.post, "/api/tools/call", json=body)
        listed = client.get("/api/tools")
        listed_after = time.monotonic() - started
        answer = pending.result(timeout=60)
        answered_after = time.monotonic() - started

    assert listed.status_code == 200
    assert answer.status_code < 500, answer.text
    assert answer.json()["state"] != "completed"  # the near-miss does not match its schema
    assert answered_after < ANSWER_WITHIN_S, answer.text
    assert listed_after < ANSWER_WITHIN_S
