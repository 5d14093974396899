"""POST /mcp over a real socket: the official MCP SDK client, transport rules, grants,
idempotency and result budgets."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import TOKEN, DemoTools, demo_app, running
from tests.support.mcp_errors import error_of

ACCEPT = "application/json, text/event-stream"
BOTH = frozenset({"robot.read", "robot.write"})


def _rpc(method: str, params: dict[str, Any] | None = None, ident: int = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _post(base: str, body: Any, **headers: str) -> httpx.Response:
    sent = {"accept": ACCEPT, "content-type": "application/json", **headers}
    return httpx.post(f"{base}/mcp", json=body, headers=sent, timeout=10)


@pytest.fixture
def tools() -> DemoTools:
    return DemoTools()


@pytest.fixture
def base(tools: DemoTools) -> Any:
    with running(demo_app(ServerSettings(grants=BOTH, mcp_enabled=True), tools)) as url:
        yield url


@pytest.mark.anyio
async def test_the_official_sdk_client_initializes_lists_and_calls(base: str) -> None:
    async with (
        streamable_http_client(f"{base}/mcp") as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        assert init.serverInfo.name == "doraforge"
        assert init.protocolVersion in ("2025-11-25", "2025-06-18", "2025-03-26")
        await session.send_ping()
        listed = await session.list_tools()
        names = {tool.name for tool in listed.tools}
        assert names == {"demo_echo", "demo_big", "demo_write", "demo_fail"}
        echo = next(tool for tool in listed.tools if tool.name == "demo_echo")
        assert echo.annotations is not None
        assert echo.annotations.readOnlyHint is True
        result = await session.call_tool("demo_echo", {"text": "hi"})
        assert result.isError is False
        assert result.structuredContent == {"text": "hi"}


@pytest.mark.anyio
async def test_tool_failures_and_bad_arguments_are_is_error_results(base: str) -> None:
    async with (
        streamable_http_client(f"{base}/mcp") as (read, write, _session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        failed = await session.call_tool("demo_fail", {})
        assert error_of(failed)["code"] == "DEMO_BROKEN"
        bad = await session.call_tool("demo_echo", {"text": 12, "other": 1})
        assert bad.isError is True
        unknown = await session.call_tool("nope_tool", {})
        assert unknown.isError is True


def test_get_and_delete_are_405_with_allow_post(base: str) -> None:
    for method in ("GET", "DELETE"):
        answer = httpx.request(method, f"{base}/mcp", headers={"accept": ACCEPT}, timeout=10)
        assert answer.status_code == 405
        assert answer.headers["allow"] == "POST"


def test_an_accept_without_event_stream_is_406(base: str) -> None:
    answer = _post(base, _rpc("ping"), accept="application/json")
    assert answer.status_code == 406


def test_only_the_servers_own_origin_passes(base: str) -> None:
    port = base.rsplit(":", 1)[1]
    assert _post(base, _rpc("ping"), origin="https://evil.example").status_code == 403
    # Another loopback port is another origin: any local web page could be hostile.
    assert _post(base, _rpc("ping"), origin="http://localhost:3000").status_code == 403
    assert _post(base, _rpc("ping"), origin="http://[::1]:3000").status_code == 403
    assert _post(base, _rpc("ping"), origin=f"http://localhost:{port}").status_code == 200
    assert _post(base, _rpc("ping"), origin=f"http://127.0.0.1:{port}").status_code == 200


def test_forwarding_headers_do_not_make_a_caller_loopback(base: str) -> None:
    from doraforge.registry.mcp import is_loopback_host

    answer = _post(base, _rpc("ping"), **{"x-forwarded-for": "203.0.113.9"})
    assert answer.status_code == 200  # judged by the socket, which is loopback
    assert not is_loopback_host("203.0.113.9")
    assert is_loopback_host("::ffff:127.0.0.1")
    assert not is_loopback_host(None)


def test_an_unsupported_protocol_version_header_is_400(base: str) -> None:
    answer = _post(base, _rpc("ping"), **{"mcp-protocol-version": "2024-11-05"})
    assert answer.status_code == 400
    for version in ("2025-11-25", "2025-06-18", "2025-03-26"):
        assert _post(base, _rpc("ping"), **{"mcp-protocol-version": version}).status_code == 200


def test_notifications_are_accepted_with_202_and_no_body(base: str) -> None:
    answer = _post(base, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert answer.status_code == 202
    assert answer.content == b""


def test_initialize_echoes_a_supported_version_and_offers_the_latest_otherwise(base: str) -> None:
    params = {"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    old = _post(base, _rpc("initialize", {**params, "protocolVersion": "2025-03-26"})).json()
    assert old["result"]["protocolVersion"] == "2025-03-26"
    odd = _post(base, _rpc("initialize", {**params, "protocolVersion": "1999-01-01"})).json()
    assert odd["result"]["protocolVersion"] == "2025-11-25"
    assert "mcp-session-id" not in _post(base, _rpc("ping")).headers


def test_protocol_faults_are_json_rpc_errors(base: str) -> None:
    assert _post(base, _rpc("resources/list")).json()["error"]["code"] == -32601
    bad_params = _post(base, _rpc("tools/call", {"arguments": {}})).json()
    assert bad_params["error"]["code"] == -32602
    garbage = httpx.post(
        f"{base}/mcp",
        content=b"{not json",
        headers={"accept": ACCEPT, "content-type": "application/json"},
        timeout=10,
    )
    assert garbage.status_code == 400
    assert garbage.json()["error"]["code"] == -32700


def _call(base: str, name: str, arguments: dict[str, Any], **headers: str) -> dict[str, Any]:
    answer = _post(base, _rpc("tools/call", {"name": name, "arguments": arguments}), **headers)
    assert answer.status_code == 200
    document: dict[str, Any] = answer.json()
    return document


def test_an_idempotency_key_replays_the_retained_result_without_running_again(
    base: str, tools: DemoTools
) -> None:
    first = _call(base, "demo_write", {"value": 7}, **{"idempotency-key": "agent-write-1"})
    again = _call(base, "demo_write", {"value": 7}, **{"idempotency-key": "agent-write-1"})
    assert first["result"]["structuredContent"] == {"written": 7, "runs": 1}
    assert again["result"]["structuredContent"] == {"written": 7, "runs": 1}
    assert again["result"]["_meta"]["doraforge/duplicate"] is True
    assert len(tools.writes) == 1


def test_an_idempotency_key_reused_for_another_call_is_refused(base: str, tools: DemoTools) -> None:
    _call(base, "demo_write", {"value": 1}, **{"idempotency-key": "agent-write-2"})
    other = _call(base, "demo_write", {"value": 2}, **{"idempotency-key": "agent-write-2"})
    assert other["error"]["code"] == -32000  # a JSON-RPC fault, not an isError result
    assert other["error"]["data"]["code"] == "TOOL_IDEMPOTENCY_CONFLICT"
    assert len(tools.writes) == 1


def test_without_a_key_every_call_runs(base: str, tools: DemoTools) -> None:
    _call(base, "demo_write", {"value": 1})
    _call(base, "demo_write", {"value": 1})
    assert len(tools.writes) == 2


def test_results_over_budget_are_cut_with_explicit_truncation_flags(base: str) -> None:
    result = _call(base, "demo_big", {"count": 100})["result"]
    structured = result["structuredContent"]
    assert structured["truncated"] is True
    assert len(structured["items"]) == 25
    assert len(result["content"][0]["text"]) <= 20_000
    assert result["_meta"]["doraforge/truncated"] is True
    small = _call(base, "demo_echo", {"text": "ok"})["result"]
    assert small["_meta"]["doraforge/truncated"] is False
    assert "truncated" not in small["structuredContent"]


@pytest.mark.anyio
async def test_tools_list_shows_only_granted_tools_and_ungranted_calls_are_denied() -> None:
    tools = DemoTools()
    settings = ServerSettings(grants=frozenset({"robot.read"}), mcp_enabled=True)
    with running(demo_app(settings, tools)) as url:
        async with (
            streamable_http_client(f"{url}/mcp") as (read, write, _session_id),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert names == {"demo_echo", "demo_big", "demo_fail"}
            denied = await session.call_tool("demo_write", {"value": 1})
            assert denied.isError is True
    assert tools.writes == []


def test_without_grants_nothing_is_listed() -> None:
    with running(demo_app(ServerSettings(mcp_enabled=True))) as url:
        listed = _post(url, _rpc("tools/list")).json()
    assert listed["result"]["tools"] == []


def test_a_configured_token_is_needed_for_every_mcp_request_and_the_manifest() -> None:
    tools = DemoTools()
    settings = ServerSettings(grants=BOTH, token=TOKEN, mcp_enabled=True)
    with running(demo_app(settings, tools)) as url:
        write = _rpc("tools/call", {"name": "demo_write", "arguments": {"value": 1}})
        anonymous = _post(url, write)
        assert anonymous.status_code == 401
        assert anonymous.json()["error"]["data"]["code"] == "AUTH_REQUIRED"
        read = _post(url, _rpc("tools/call", {"name": "demo_echo", "arguments": {"text": "r"}}))
        assert read.status_code == 401
        assert httpx.get(f"{url}/api/agent-context/manifest", timeout=10).status_code == 401
        bearer = {"authorization": f"Bearer {TOKEN}"}
        assert _call(url, "demo_write", {"value": 1}, **bearer)["result"]["isError"] is False
        wrong = _post(url, _rpc("ping"), authorization="Bearer wrong-token")
        assert wrong.status_code == 401
        assert wrong.json()["error"]["data"]["code"] == "AUTH_INVALID"
    assert len(tools.writes) == 1


def test_mcp_is_off_by_default_and_the_manifest_stays_readable() -> None:
    tools = DemoTools()
    settings = ServerSettings(grants=BOTH)
    with running(demo_app(settings, tools)) as url:
        ping = _post(url, _rpc("ping"))
        write = _post(url, _rpc("tools/call", {"name": "demo_write", "arguments": {"value": 1}}))
        manifest = httpx.get(f"{url}/api/agent-context/manifest", timeout=10).json()
    assert (ping.status_code, write.status_code) == (403, 403)
    assert write.json()["error"]["data"]["code"] == "MCP_DISABLED"
    assert tools.writes == []
    assert manifest["enabled"] is False


def test_the_manifest_is_readable_while_mcp_is_disabled_and_advertises_no_tool() -> None:
    settings = ServerSettings(grants=frozenset({"robot.read"}), mcp_enabled=False)
    with running(demo_app(settings)) as url:
        assert _post(url, _rpc("ping")).status_code == 403
        manifest = httpx.get(f"{url}/api/agent-context/manifest", timeout=10).json()
    assert manifest["enabled"] is False
    assert manifest["grants"] == ["robot.read"]  # the configured grant stays inspectable
    assert manifest["limits"]["maxResultChars"] == 20_000
    assert manifest["limits"]["maxResultItems"] == 25
    # ... but no granted tool reads as callable while the endpoint is off (finding 5).
    assert manifest["tools"] == []
    assert manifest["semanticToolsActive"] is False
    assert "disabled" in manifest["note"]


@pytest.mark.anyio
async def test_a_non_loopback_socket_peer_is_403_whatever_its_headers_say() -> None:
    app = demo_app(ServerSettings(grants=BOTH, mcp_enabled=True))
    transport = httpx.ASGITransport(app=app, client=("203.0.113.9", 40000))
    headers = {"accept": ACCEPT, "content-type": "application/json", "x-forwarded-for": "127.0.0.1"}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        posted = await client.post("/mcp", json=_rpc("tools/list"), headers=headers)
        manifest = await client.get("/api/agent-context/manifest")
        other = await client.get("/mcp")
    assert posted.status_code == 403
    assert posted.json()["error"]["data"]["code"] == "MCP_NOT_LOOPBACK"
    assert manifest.status_code == 403
    assert other.status_code == 403


def test_a_call_cut_short_by_the_server_stopping_answers_a_json_rpc_error(
    tools: DemoTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    from doraforge.registry import mcp as mcp_module
    from doraforge.registry.http import ServerStopping

    async def stopping(_request: Any, work: Any) -> Any:
        work.close()  # the dispatch coroutine never runs: serve stopped first
        raise ServerStopping

    monkeypatch.setattr(mcp_module, "unless_client_leaves", stopping)
    with running(demo_app(ServerSettings(grants=BOTH, mcp_enabled=True), tools)) as url:
        answer = _post(url, _rpc("tools/call", {"name": "demo_echo", "arguments": {}}, ident=7))
    assert answer.status_code == 503
    body = answer.json()
    assert body["id"] == 7
    assert body["error"]["data"] == {"code": "REGISTRY_STOPPING", "retryable": False}
