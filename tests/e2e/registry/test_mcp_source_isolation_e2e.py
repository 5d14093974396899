"""Two tier-1 MCP servers of one registry (as root, both on the default ``run_as``) do
not read each other's environment, where a server's credentials are: real server
processes (``tests/registry/sources/mcp_source_server.py``), the registry on a real socket.

Before (red team of issue 26) every server defaulted to ``65534:65534``, so server ``a``
read ``/proc/<b>/environ`` and ``b``'s credential with it (and could trace or signal
``b``); now each runs as a ``uid:gid`` of its own by default."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.registry.server import build_app, new_service, uvicorn_config
from doraforge.registry.settings import ServerSettings
from tests.support.live_server import LiveServer

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(os.geteuid() != 0, reason="run_as applies when serve runs as root"),
]

SERVER_SCRIPT = Path(__file__).parents[2] / "registry" / "sources" / "mcp_source_server.py"


@contextmanager
def registry(tmp_path: Path, secret: str) -> Iterator[LiveServer]:
    def server(**env: str) -> dict[str, Any]:
        return {
            "command": sys.executable,
            "args": [str(SERVER_SCRIPT)],
            "env": env,
            "tier": 1,
            "risk": "low",
        }

    settings = ServerSettings(
        port=0,
        grants=frozenset({"mcp.a", "mcp.b"}),
        mcp_servers={"a": server(), "b": server(B_SECRET=secret)},
    )
    service = new_service(settings)
    app = build_app(service, settings, sources_dir=tmp_path / "sources")
    with LiveServer(uvicorn_config(app, "127.0.0.1", 0), within=90) as live:
        yield live


def _call(client: httpx.Client, name: str, **arguments: Any) -> dict[str, Any]:
    body = {"type": "portos_tool_call", "requestId": secrets.token_hex(4), "name": name}
    answer = client.post("/api/tools/call", json={**body, "arguments": arguments})
    assert answer.status_code < 500, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_one_tier_1_server_cannot_read_anothers_environment(tmp_path: Path) -> None:
    secret = f"b-secret-{secrets.token_hex(8)}"
    with (
        registry(tmp_path, secret) as live,
        httpx.Client(base_url=live.url, timeout=30) as client,
    ):
        b_pid = _call(client, "mcp__b__pid")["result"]["pid"]
        peeked = _call(client, "mcp__a__peek", path=f"/proc/{b_pid}/environ")

    assert peeked["state"] != "completed", peeked  # completed: a read b's environment
