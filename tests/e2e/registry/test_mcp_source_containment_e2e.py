"""A third-party MCP server can neither make the registry dial nor outlive its removal:
real server processes (``tests/registry/sources/hostile_source_server.py``) in tier 1 and
tier 2, the registry on a real socket.

A listed tool whose input schema points at a URL is refused (its row says why, with the
code) and the URL is never fetched, over HTTP or MCP; a tool that double-forks a ``setsid``
process leaves nothing running once its server is deleted.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.registry.server import build_app, new_service, uvicorn_config
from doraforge.registry.settings import ServerSettings
from tests.registry.listeners import CountingHttpServer, counting_http
from tests.support.live_server import LiveServer
from tests.support.processes import carrying, kill_carrying
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

SERVER_SCRIPT = Path(__file__).parents[2] / "registry" / "sources" / "hostile_source_server.py"
TIERS = [1, 2]
GONE_WITHIN_S = 15.0


def _config(tier: int, upstream: CountingHttpServer) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(SERVER_SCRIPT)],
        "env": {"SCHEMA_REF_URL": upstream.url("/redir")},
        "tier": tier,
        "risk": "low",
    }


@contextmanager
def registry(tmp_path: Path, servers: dict[str, dict[str, Any]]) -> Iterator[LiveServer]:
    settings = ServerSettings(
        port=0,
        grants=frozenset({"mcp.hostile"}),
        mcp_enabled=True,
        mcp_servers=servers,
    )
    service = new_service(settings)
    app = build_app(service, settings, sources_dir=tmp_path / "sources")
    with LiveServer(uvicorn_config(app, "127.0.0.1", 0), within=90) as live:
        yield live


def _call(client: httpx.Client, name: str, **arguments: Any) -> httpx.Response:
    body = {
        "type": "portos_tool_call",
        "requestId": f"r-{secrets.token_hex(4)}",
        "name": name,
        "arguments": arguments,
    }
    return client.post("/api/tools/call", json=body)


async def _mcp_call(url: str, name: str) -> Any:
    async with (
        streamable_http_client(f"{url}/mcp") as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await session.call_tool(name, {"x": 1})


@pytest.mark.parametrize("tier", TIERS)
def test_a_listed_tool_whose_schema_points_at_a_url_is_refused_and_never_fetched(
    tier: int, tmp_path: Path
) -> None:
    with (
        counting_http() as upstream,
        registry(tmp_path, {"hostile": _config(tier, upstream)}) as live,
        httpx.Client(base_url=live.url, timeout=30) as client,
    ):
        row = client.get("/api/sources/mcp").json()["servers"][0]
        tools = client.get("/api/tools", params={"format": "portos"}).json()["tools"]
        over_http = _call(client, "mcp__hostile__remote_ref", x=1)
        over_mcp = asyncio.run(_mcp_call(live.url, "mcp__hostile__remote_ref"))

        assert upstream.hits == 0
    assert row["state"] == "ready"
    assert row["tools"] == ["mcp__hostile__spawn"]
    assert [(r["tool"], r["code"]) for r in row["refused"]] == [("remote_ref", "SCHEMA_REF_REMOTE")]
    assert "mcp__hostile__remote_ref" not in {tool["name"] for tool in tools}
    assert over_http.status_code == 403
    assert over_http.json()["error"]["code"] == "TOOL_NOT_FOUND"
    assert over_mcp.isError is True


@pytest.mark.parametrize("tier", TIERS)
def test_a_setsid_double_fork_does_not_outlive_the_deleted_source(
    tier: int, tmp_path: Path
) -> None:
    token = f"doraforge-orphan-test-{secrets.token_hex(6)}"
    try:
        with (
            counting_http() as upstream,
            registry(tmp_path, {"hostile": _config(tier, upstream)}) as live,
            httpx.Client(base_url=live.url, timeout=60) as client,
        ):
            spawned = _call(client, "mcp__hostile__spawn", token=token)
            assert spawned.json()["state"] == "completed", spawned.text
            orphans = eventually(
                lambda: carrying(token), within=GONE_WITHIN_S, what="the setsid grandchild"
            )
            assert all(os.getsid(pid) != os.getsid(0) for pid in orphans)

            deleted = client.delete("/api/sources/mcp/hostile")
            assert deleted.status_code == 200, deleted.text

            eventually(
                lambda: not carrying(token),
                within=GONE_WITHIN_S,
                what="every process the deleted server started to end",
                detail=lambda: carrying(token),
            )
    finally:
        kill_carrying(token)
