"""Third-party MCP servers as tool sources, end to end: real server processes in tier 1 and
tier 2, the official SDK on both sides, the registry on a real socket.

The test server (``tests/registry/sources/mcp_source_server.py``, FastMCP over stdio) and
``mcp-server-time`` from the package index (its own venv, ``tests/peers/mcp_server_time``)
are reached through ``POST /api/tools/call`` and through the registry's own ``/mcp`` with
the SDK client; their faults (a crash mid-call, a hang past the deadline, a stderr flood)
are contained and recovered; servers are added and removed live through the operator
routes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import mcp.types as types
import psutil
import pytest
from fastapi import FastAPI
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.registry.server import build_app, new_service, uvicorn_config
from doraforge.registry.settings import ServerSettings
from tests.paths import PROJECT_ROOT
from tests.peers import mcp_server_time
from tests.support.live_server import (
    LiveServer,
    ServeProcess,
    serve_command,
    serve_environment,
    serve_process,
)
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

SERVER_SCRIPT = Path(__file__).parents[2] / "registry" / "sources" / "mcp_source_server.py"
TIERS = [1, 2]
#: Every tool of the test server is approved except ``plain`` (no annotations: a high-risk
#: write whose call must wait for an approval nobody gives).
APPROVED = frozenset(
    f"mcp__src__{tool}"
    for tool in (
        *("echo", "add_note", "crash", "crash_write", "hang", "flood", "pid", "grow"),
        *("hog", "peek", "dial", "env"),
    )
) | {"mcp__src__grown", "mcp__time__get_current_time", "mcp__time__convert_time"}
_ids = itertools.count()


@pytest.fixture(autouse=True)
def _needs_bubblewrap(request: pytest.FixtureRequest) -> None:
    """Tier 2 needs bwrap: its absence fails the row with the fix, never skips it."""
    tier = getattr(request.node, "callspec", None)
    if tier is not None and tier.params.get("tier") == 2 and shutil.which("bwrap") is None:
        pytest.fail("tier 2 needs bubblewrap: run `make sandbox` (apt-get install bubblewrap)")


def src_config(tmp_path: Path, tier: int, **overrides: Any) -> dict[str, Any]:
    """The test server's config: notes written in its scratch directory (tier 2's only
    writable place), a short call deadline for the hang row."""
    scratch = tmp_path / "sources" / "src" / "scratch"
    return {
        "command": sys.executable,
        "args": [str(SERVER_SCRIPT)],
        "env": {"NOTES_DIR": str(scratch)},
        "tier": tier,
        "timeoutMs": 3000,
        **overrides,
    }


def time_config(tier: int) -> dict[str, Any]:
    """``mcp-server-time`` from its own venv (tier 2 binds that venv read-only)."""
    command, args = mcp_server_time.command()
    return {"command": command, "args": args, "tier": tier}


class Registry(LiveServer):
    """The registry on a live socket, with its app (to read its egress declarations)."""

    app: FastAPI


@contextmanager
def registry(
    tmp_path: Path, servers: dict[str, dict[str, Any]], **overrides: Any
) -> Iterator[Registry]:
    settings = ServerSettings(
        **{
            "port": 0,
            "grants": frozenset({"mcp.src", "mcp.time"}),
            "approvals": APPROVED,
            "approval_timeout_s": 0,
            "mcp_enabled": True,
            "mcp_servers": servers,
            **overrides,
        }
    )
    service = new_service(settings)
    service.ask_operators(settings.approval_timeout_s)  # as serve does
    app = build_app(service, settings, sources_dir=tmp_path / "sources")
    live = Registry(uvicorn_config(app, "127.0.0.1", 0), within=90)
    live.app = app
    with live:
        yield live


def call(live: LiveServer | ServeProcess, name: str, **arguments: Any) -> dict[str, Any]:
    url = live.url if isinstance(live, LiveServer) else live.base_url
    body = {
        "type": "portos_tool_call",
        "requestId": f"r-{next(_ids)}",
        "name": name,
        "arguments": arguments,
    }
    with httpx.Client(base_url=url, timeout=60) as client:
        answer: dict[str, Any] = client.post("/api/tools/call", json=body).json()
    return answer


def catalog(live: LiveServer) -> tuple[dict[str, dict[str, Any]], str]:
    with httpx.Client(base_url=live.url, timeout=30) as client:
        response = client.get("/api/tools", params={"format": "portos"})
    tools = {tool["name"]: tool for tool in response.json()["tools"]}
    return tools, response.headers["etag"]


def sources(live: LiveServer) -> dict[str, dict[str, Any]]:
    with httpx.Client(base_url=live.url, timeout=30) as client:
        rows = client.get("/api/sources/mcp").json()["servers"]
    return {row["name"]: row for row in rows}


def back(live: LiveServer) -> dict[str, Any]:
    """Wait (bounded) until the test server answers again after a restart."""
    return eventually(
        lambda: (r := call(live, "mcp__src__echo", text="again"))["state"] == "completed" and r,
        within=45,
        what="the test server answering again after its restart",
        detail=lambda: sources(live).get("src"),
    )


@pytest.mark.parametrize("tier", TIERS)
def test_a_third_party_servers_tools_pass_every_gate_over_http(tier: int, tmp_path: Path) -> None:
    servers = {"src": src_config(tmp_path, tier), "time": time_config(tier)}
    with registry(tmp_path, servers) as live:
        tools, _ = catalog(live)
        assert tools["mcp__src__echo"]["policy"]["sideEffect"] == "read"
        assert tools["mcp__src__add_note"]["policy"]["sideEffect"] == "write"
        plain = tools["mcp__src__plain"]["policy"]
        assert (plain["sideEffect"], plain["risk"]) == ("write", "high")
        assert tools["mcp__src__echo"]["policy"]["requiredCapabilities"] == ["mcp.src"]
        assert tools["mcp__src__echo"]["input_schema"]["additionalProperties"] is False

        assert call(live, "mcp__src__echo", text="hi")["result"] == {"text": "echo: hi"}
        assert call(live, "mcp__src__add_note", text="one")["result"] == {"count": 1}
        assert (tmp_path / "sources" / "src" / "scratch" / "notes.txt").read_text() == "one\n"
        denied = call(live, "mcp__src__plain", value=2)
        assert (denied["state"], denied["error"]["code"]) == ("denied", "TOOL_APPROVAL_REQUIRED")
        extra = call(live, "mcp__src__echo", text="hi", sneaky=1)
        assert extra["error"]["code"] == "TOOL_INVALID_ARGUMENTS"

        now = call(live, "mcp__time__get_current_time", timezone="UTC")
        assert now["state"] == "completed", now
        assert now["result"]["timezone"] == "UTC"
        audited = {(r["name"], r["state"]) for r in live.app.state.service.audit.records()}
    assert {("mcp__src__echo", "completed"), ("mcp__src__plain", "denied")} <= audited


@pytest.mark.parametrize("tier", TIERS)
def test_an_mcp_client_reaches_a_third_party_tool_through_the_registrys_gates(
    tier: int, tmp_path: Path
) -> None:
    servers = {"src": src_config(tmp_path, tier), "time": time_config(tier)}
    with registry(tmp_path, servers) as live:
        listed, echoed, converted, plain = asyncio.run(_through_mcp(live.url))
    assert {"mcp__src__echo", "mcp__time__convert_time"} <= listed
    assert not echoed.isError
    assert "echo: via mcp" in _text(echoed)
    assert not converted.isError, _text(converted)
    assert plain.isError
    assert "TOOL_APPROVAL_REQUIRED" in _text(plain)


async def _through_mcp(
    url: str,
) -> tuple[set[str], types.CallToolResult, types.CallToolResult, types.CallToolResult]:
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(30, read=60)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = {tool.name for tool in (await session.list_tools()).tools}
        echoed = await session.call_tool("mcp__src__echo", {"text": "via mcp"})
        converted = await session.call_tool(
            "mcp__time__convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        plain = await session.call_tool("mcp__src__plain", {"value": 1})
    return listed, echoed, converted, plain


def _text(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


@pytest.mark.parametrize("tier", TIERS)
def test_a_crash_mid_call_answers_unavailable_and_the_server_comes_back(
    tier: int, tmp_path: Path
) -> None:
    with registry(tmp_path, {"src": src_config(tmp_path, tier)}) as live:
        crashed = call(live, "mcp__src__crash")
        assert crashed["state"] == "failed"
        assert crashed["error"]["code"] == "MCP_SOURCE_UNAVAILABLE"
        assert crashed["error"]["retryable"] is True
        assert "src" in crashed["error"]["message"]
        back(live)
        lost = call(live, "mcp__src__crash_write")
        assert lost["error"]["code"] == "MCP_SOURCE_UNAVAILABLE"
        assert lost["error"]["retryable"] is False
        assert lost["error"]["details"]["remoteState"] == "unknown"
        back(live)
        assert sources(live)["src"]["restarts"] >= 2


@pytest.mark.parametrize("tier", TIERS)
def test_a_hung_call_is_killed_at_its_deadline_and_the_server_restarts(
    tier: int, tmp_path: Path
) -> None:
    with registry(tmp_path, {"src": src_config(tmp_path, tier, timeoutMs=1500)}) as live:
        before = call(live, "mcp__src__pid")["result"]["pid"]
        hung = call(live, "mcp__src__hang")
        assert (hung["state"], hung["error"]["code"]) == ("timeout", "TOOL_TIMEOUT")
        back(live)
        assert sources(live)["src"]["restarts"] >= 1
        after = call(live, "mcp__src__pid")["result"]["pid"]
        if tier == 1:  # tier 2's pids are the sandbox's own namespace
            assert after != before
            assert not psutil.pid_exists(before) or psutil.Process(before).status() == "zombie"


@pytest.mark.parametrize("tier", TIERS)
def test_a_stderr_flood_is_bounded_and_the_server_keeps_working(tier: int, tmp_path: Path) -> None:
    with registry(tmp_path, {"src": src_config(tmp_path, tier)}) as live:
        flooded = call(live, "mcp__src__flood", kib=4096)
        assert flooded["result"] == {"text": "flooded"}
        assert call(live, "mcp__src__echo", text="still")["state"] == "completed"
        log = Path(sources(live)["src"]["log"])
    logs = [log, log.with_name(log.name + ".1")]
    sizes = [path.stat().st_size for path in logs if path.exists()]
    assert sizes
    assert all(size <= 1024 * 1024 for size in sizes), sizes


@pytest.mark.parametrize("tier", TIERS)
def test_a_server_over_its_memory_limit_is_contained_and_keeps_serving(
    tier: int, tmp_path: Path
) -> None:
    config = src_config(tmp_path, tier, limits={"memory_mb": 512})
    with registry(tmp_path, {"src": config}) as live:
        hogged = call(live, "mcp__src__hog", mib=2048)
        assert hogged["state"] == "failed"
        assert hogged["error"]["code"] in ("MCP_TOOL_ERROR", "MCP_SOURCE_UNAVAILABLE")
        back(live)


def test_tier_2_keeps_a_server_from_files_outside_and_from_the_network(tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("registry secret")
    with registry(tmp_path, {"src": src_config(tmp_path, 2)}) as live:
        peeked = call(live, "mcp__src__peek", path=str(secret))
        assert peeked["state"] == "failed"
        assert "registry secret" not in str(peeked)
        dialled = call(live, "mcp__src__dial", port=live.port)
        assert (dialled["state"], dialled["error"]["code"]) == ("failed", "MCP_TOOL_ERROR")
        assert call(live, "mcp__src__echo", text="still")["state"] == "completed"


def test_tier_1_is_a_plain_process_that_can_read_and_dial(tmp_path: Path) -> None:
    """The contrast row: the same probes pass in tier 1, so tier 2's refusals are its own.

    The file is one the server's user may read (a root registry runs it as nobody, and
    pytest's directories are root's own, 0700)."""
    shared = Path(tempfile.mkdtemp(prefix="doraforge-tier1-"))
    try:
        shared.chmod(0o755)
        secret = shared / "outside.txt"
        secret.write_text("registry secret")
        secret.chmod(0o644)
        with registry(tmp_path, {"src": src_config(tmp_path, 1)}) as live:
            assert call(live, "mcp__src__peek", path=str(secret))["result"] == {
                "text": "registry secret"
            }
            assert call(live, "mcp__src__dial", port=live.port)["result"] == {"text": "connected"}
    finally:
        shutil.rmtree(shared)


def test_an_unapproved_write_waits_for_the_operator_and_runs_only_once_approved(
    tmp_path: Path,
) -> None:
    with (
        registry(tmp_path, {"src": src_config(tmp_path, 1)}, approval_timeout_s=60) as live,
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        approved = pool.submit(call, live, "mcp__src__plain", value=21)
        first = _pending(live)
        assert first["tool"] == "mcp__src__plain"
        _decide(live, first["id"], "approve")
        assert approved.result(timeout=30)["result"] == {"text": "42"}

        denied = pool.submit(call, live, "mcp__src__plain", value=1)
        _decide(live, _pending(live)["id"], "deny")
        answer = denied.result(timeout=30)
        assert (answer["state"], answer["error"]["code"]) == ("denied", "TOOL_APPROVAL_DENIED")


def _pending(live: LiveServer) -> dict[str, Any]:
    def waiting() -> dict[str, Any] | None:
        with httpx.Client(base_url=live.url, timeout=30) as client:
            rows = client.get("/api/approvals", params={"state": "pending"}).json()["approvals"]
        return rows[0] if rows else None

    found = eventually(waiting, within=30, what="a pending approval")
    assert found is not None
    return found


def _decide(live: LiveServer, approval_id: str, decision: str) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as client:
        answer = client.post(
            f"/api/approvals/{approval_id}/{decision}", json={"reason": "test operator"}
        )
    assert answer.status_code == 200, answer.text


AGENT_TOKEN, OPERATOR_TOKEN = "agent-token-0123456789", "operator-token-0123456789"


def test_only_the_operator_adds_or_removes_servers_and_credentials_are_checked_first(
    tmp_path: Path,
) -> None:
    needs = {"command": sys.executable, "env": {"KEY": {"credential": "absent_key"}}}
    missing = {"src": src_config(tmp_path, 1, env={"KEY": {"credential": "absent_key"}})}
    tokens = {"token": AGENT_TOKEN, "operator_token": OPERATOR_TOKEN}
    with registry(tmp_path, missing, **tokens) as live:
        agent = {"Authorization": f"Bearer {AGENT_TOKEN}"}
        operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        with httpx.Client(base_url=live.url, timeout=30) as client:
            refused = client.put("/api/sources/mcp/other", json=needs, headers=agent)
            assert (refused.status_code, refused.json()["error"]["code"]) == (
                403,
                "OPERATOR_REQUIRED",
            )
            assert client.delete("/api/sources/mcp/src", headers=agent).status_code == 403
            assert client.get("/api/sources/mcp", headers=agent).status_code == 403
            unknown = client.put("/api/sources/mcp/other", json=needs, headers=operator)
            assert (unknown.status_code, unknown.json()["error"]["code"]) == (
                422,
                "MCP_SOURCE_CREDENTIAL_MISSING",
            )
            bad_name = client.put("/api/sources/mcp/Bad__Name", json=needs, headers=operator)
            assert bad_name.json()["error"]["code"] == "MCP_SOURCE_INVALID"
            not_json = client.put(
                "/api/sources/mcp/other", content=b"[1]", headers=operator | _JSON
            )
            assert not_json.status_code == 400
            row = client.get("/api/sources/mcp", headers=operator).json()["servers"][0]
        # The configured server whose credential is missing never started, and says why.
        assert (row["name"], row["state"]) == ("src", "failed")
        assert "MCP_SOURCE_CREDENTIAL_MISSING" in row["reason"]


_JSON = {"content-type": "application/json"}


def test_a_credential_named_in_the_config_reaches_only_the_server_it_was_given_to(
    tmp_path: Path,
) -> None:
    config = src_config(tmp_path, 1, env={"SRC_KEY": {"credential": "src_key"}})
    with registry(tmp_path, {"src": config}, secrets={"src_key": "s3cret-value"}) as live:
        assert call(live, "mcp__src__env", variable="SRC_KEY")["result"] == {"text": "s3cret-value"}
        assert call(live, "mcp__src__env", variable="DORAFORGE_HOME")["result"] == {"text": ""}


def test_sigterm_to_serve_ends_every_mcp_server_it_started(tmp_path: Path) -> None:
    config = tmp_path / "serve.json"
    servers = {"src": src_config(tmp_path / "home", 1)}
    config.write_text(json.dumps({"mcp_servers": servers}))
    options = ("--config", str(config), "--grant", "mcp.src", "--approve", "mcp__src__pid")
    with serve_process(tmp_path, *options) as serve:
        answer = eventually(
            lambda: _pid_of(serve.base_url),
            within=60,
            what="the MCP server's pid through serve",
            detail=serve.errors,
        )
        serve.process.send_signal(signal.SIGTERM)
        serve.process.wait(timeout=30)
        assert serve.process.returncode != -signal.SIGKILL  # it stopped by itself
    assert answer is not None
    assert not psutil.pid_exists(answer) or psutil.Process(answer).status() == "zombie"


def _pid_of(base_url: str) -> int | None:
    """The server's pid through serve, or ``None`` while it is not answering yet (each
    attempt a new requestId: a retained failure would otherwise answer every retry)."""
    body = {
        "type": "portos_tool_call",
        "requestId": f"r-{next(_ids)}",
        "name": "mcp__src__pid",
        "arguments": {},
    }
    with httpx.Client(base_url=base_url, timeout=30) as client:
        answer = client.post("/api/tools/call", json=body).json()
    if answer.get("state") != "completed":
        return None
    pid: int = answer["result"]["pid"]
    return pid


def test_a_list_changed_notification_refreshes_the_catalog_and_its_etag(tmp_path: Path) -> None:
    with registry(tmp_path, {"src": src_config(tmp_path, 1)}) as live:
        tools, etag = catalog(live)
        assert "mcp__src__grown" not in tools
        assert call(live, "mcp__src__grow")["state"] == "completed"
        eventually(
            lambda: "mcp__src__grown" in catalog(live)[0],
            within=15,
            what="the grown tool in the catalog",
        )
        assert catalog(live)[1] != etag
        assert call(live, "mcp__src__grown")["result"] == {"text": "grown"}


def test_an_operator_adds_and_removes_a_server_live(tmp_path: Path) -> None:
    with registry(tmp_path, {}) as live:
        _, empty = catalog(live)
        config = {**time_config(1), "egressHosts": ["time.example.org"]}
        with httpx.Client(base_url=live.url, timeout=60) as client:
            added = client.put("/api/sources/mcp/time", json=config)
            assert added.status_code == 201, added.text
            assert "mcp__time__get_current_time" in added.json()["server"]["tools"]
            egress = live.app.state.service.egress.declared()
        assert "mcp:time" in egress
        tools, with_time = catalog(live)
        assert "mcp__time__convert_time" in tools
        assert with_time != empty
        assert call(live, "mcp__time__get_current_time", timezone="UTC")["state"] == "completed"

        with httpx.Client(base_url=live.url, timeout=60) as client:
            replaced = client.put("/api/sources/mcp/time", json=config)
            assert replaced.status_code == 200, replaced.text
            assert replaced.json()["server"]["state"] == "ready"
        assert call(live, "mcp__time__get_current_time", timezone="UTC")["state"] == "completed"

        with httpx.Client(base_url=live.url, timeout=60) as client:
            removed = client.delete("/api/sources/mcp/time")
            assert removed.status_code == 200
            assert "mcp__time__convert_time" in removed.json()["server"]["removedTools"]
            assert client.delete("/api/sources/mcp/time").json()["error"]["code"] == (
                "MCP_SOURCE_NOT_FOUND"
            )
            bad = client.put("/api/sources/mcp/time", json={"command": "x", "tier": 7})
            assert (bad.status_code, bad.json()["error"]["code"]) == (422, "MCP_SOURCE_INVALID")
        tools, after = catalog(live)
        assert not any(name.startswith("mcp__time__") for name in tools)
        assert after == empty
        gone = call(live, "mcp__time__get_current_time", timezone="UTC")
        assert gone["error"]["code"] == "TOOL_NOT_FOUND"
        assert "mcp:time" not in live.app.state.service.egress.declared()
        records = live.app.state.service.audit.records()
    mine = [r for r in records if str(r["name"]).startswith("sources ")]
    assert [(r["name"], r["state"], r["errorCode"]) for r in mine] == [
        ("sources put time", "completed", None),
        ("sources put time", "completed", None),
        ("sources delete time", "completed", None),
        ("sources delete time", "rejected", "MCP_SOURCE_NOT_FOUND"),
        ("sources put time", "rejected", "MCP_SOURCE_INVALID"),
    ]
    assert "time.example.org" not in json.dumps(mine)  # names and outcomes, never the config


@pytest.mark.parametrize("tier", TIERS)
def test_no_server_process_outlives_the_registry(tier: int, tmp_path: Path) -> None:
    with registry(tmp_path, {"src": src_config(tmp_path, tier)}) as live:
        assert call(live, "mcp__src__echo", text="x")["state"] == "completed"
        assert _servers_of_this_process()
    eventually(
        lambda: not _servers_of_this_process(),
        within=15,
        what="every MCP server process gone after the registry stopped",
        detail=_servers_of_this_process,
    )


def _servers_of_this_process() -> list[int]:
    children = psutil.Process().children(recursive=True)
    found = []
    for child in children:
        try:
            if any(str(SERVER_SCRIPT) in part for part in child.cmdline()):
                found.append(child.pid)
        except psutil.Error:
            continue
    return found


def _rows(serve: ServeProcess) -> dict[str, Any]:
    with httpx.Client(base_url=serve.base_url, timeout=60) as client:
        answer: dict[str, Any] = client.get("/api/sources/mcp").json()
    return answer


def test_operator_servers_and_removals_survive_a_serve_restart(tmp_path: Path) -> None:
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"mcp_servers": {"src": src_config(tmp_path / "home", 1)}}))
    options = (
        *("--config", str(config), "--grant", "mcp.src", "--grant", "mcp.time"),
        *("--approve", "mcp__time__get_current_time"),
    )
    with serve_process(tmp_path, *options) as serve:
        assert {r["name"]: r["origin"] for r in _rows(serve)["servers"]} == {"src": "config"}
        with httpx.Client(base_url=serve.base_url, timeout=60) as client:
            added = client.put("/api/sources/mcp/time", json=time_config(1))
            assert added.status_code == 201, added.text
            assert added.json()["server"]["origin"] == "operator"
            removed = client.delete("/api/sources/mcp/src")
            assert removed.status_code == 200, removed.text
    saved = tmp_path / "home" / "sources" / "servers.json"
    assert saved.stat().st_mode & 0o777 == 0o600

    with serve_process(tmp_path, *options) as serve:
        listed = _rows(serve)
        rows = {row["name"]: row for row in listed["servers"]}
        assert set(rows) == {"time"}  # src stays removed though the config declares it
        assert (rows["time"]["origin"], rows["time"]["state"]) == ("operator", "ready")
        assert listed["removed"] == ["src"]
        now = call(serve, "mcp__time__get_current_time", timezone="UTC")
        assert now["state"] == "completed", now
        with httpx.Client(base_url=serve.base_url, timeout=60) as client:
            again = client.put("/api/sources/mcp/src", json=src_config(tmp_path / "home", 1))
            assert again.status_code == 201, again.text
        assert _rows(serve)["removed"] == []
    assert json.loads(saved.read_text())["removed"] == []


def test_a_malformed_servers_file_refuses_serve_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    saved = home / "sources" / "servers.json"
    saved.parent.mkdir(parents=True)
    saved.write_text('{"schemaVersion": 1, "servers": {"src": {"tier": 1}}, "removed": []}')
    finished = subprocess.run(
        serve_command(home),
        cwd=PROJECT_ROOT,
        env=serve_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert finished.returncode == 1, finished.stdout
    lines = [line for line in finished.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, finished.stderr
    assert "MCP_SOURCES_FILE_INVALID" in lines[0]
    assert str(saved) in lines[0]
    assert "move it aside" in lines[0]
    assert "registry listening" not in finished.stdout
