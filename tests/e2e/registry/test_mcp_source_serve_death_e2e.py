"""Nothing a tier-1 MCP server starts outlives ``doraforge serve`` itself: a tool that
double-forks a ``setsid`` grandchild leaves nothing running once the real ``serve``
process is killed (SIGKILL: no shutdown code runs) or stopped (SIGTERM). Real processes
throughout (``tests/registry/sources/hostile_source_server.py``)."""

from __future__ import annotations

import json
import secrets
import signal
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import serve_process
from tests.support.processes import carrying, kill_carrying
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

SERVER_SCRIPT = Path(__file__).parents[2] / "registry" / "sources" / "hostile_source_server.py"
GONE_WITHIN_S = 15.0


def _listed(url: str) -> set[str]:
    return {tool["name"] for tool in httpx.get(f"{url}/api/tools", timeout=10).json()["tools"]}


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["sigkill", "sigterm"])
def test_a_setsid_grandchild_does_not_outlive_serve(tmp_path: Path, stop: signal.Signals) -> None:
    token = f"doraforge-serve-death-{secrets.token_hex(6)}"
    server = {"command": sys.executable, "args": [str(SERVER_SCRIPT)], "tier": 1, "risk": "low"}
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"grants": ["mcp.hostile"], "mcp_servers": {"hostile": server}}))
    body = {
        "type": "portos_tool_call",
        "requestId": "r-spawn",
        "name": "mcp__hostile__spawn",
        "arguments": {"token": token},
    }
    try:
        with serve_process(tmp_path, "--config", str(config)) as serve:
            eventually(
                lambda: "mcp__hostile__spawn" in _listed(serve.base_url),
                within=60,
                what="the hostile source's tools",
            )
            spawned = httpx.post(f"{serve.base_url}/api/tools/call", json=body, timeout=30)
            assert spawned.json()["state"] == "completed", spawned.text
            eventually(lambda: carrying(token), within=GONE_WITHIN_S, what="the grandchild")

            serve.process.send_signal(stop)
            serve.process.wait(timeout=30)

            eventually(
                lambda: not carrying(token),
                within=GONE_WITHIN_S,
                what="every process below the source to end with serve",
                detail=lambda: carrying(token),
            )
    finally:
        kill_carrying(token)
