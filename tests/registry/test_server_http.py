"""/api/tools over a real socket: catalog formats, ETag and 304, strict queries, calls with
server-derived authority, the bearer token for writes, and retained results."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import TOKEN, DemoTools, demo_app, running

BOTH = frozenset({"robot.read", "robot.write"})


@pytest.fixture
def tools() -> DemoTools:
    return DemoTools()


@pytest.fixture
def base(tools: DemoTools) -> Any:
    with running(
        demo_app(ServerSettings(grants=BOTH, token=TOKEN, builtins={"enabled": []}), tools)
    ) as url:
        yield url


AUTH = {"authorization": f"Bearer {TOKEN}"}


def _call(base: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    headers = {**AUTH, **headers}
    return _post(f"{base}/api/tools/call", json=body, headers=headers, timeout=10)


def _get(url: str, **kwargs: Any) -> httpx.Response:
    """A GET with the server's bearer token (every route needs it when one is set)."""
    kwargs["headers"] = {**AUTH, **kwargs.get("headers", {})}
    return httpx.get(url, **kwargs)


def _post(url: str, **kwargs: Any) -> httpx.Response:
    kwargs["headers"] = {**AUTH, **kwargs.get("headers", {})}
    return httpx.post(url, **kwargs)


def _envelope(request_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "portos_tool_call",
        "requestId": request_id,
        "name": name,
        "arguments": arguments,
    }


def test_the_catalog_has_an_etag_private_no_cache_and_answers_304(base: str) -> None:
    first = _get(f"{base}/api/tools", timeout=10)
    assert first.status_code == 200
    assert first.headers["cache-control"] == "private, no-cache"
    etag = first.headers["etag"]
    assert etag.startswith('"')
    assert etag.endswith('"')
    again = _get(f"{base}/api/tools", headers={"if-none-match": etag}, timeout=10)
    assert again.status_code == 304
    assert again.headers["etag"] == etag
    other = _get(f"{base}/api/tools?format=openai", headers={"if-none-match": etag})
    assert other.status_code == 200
    assert other.headers["etag"] != etag


def test_the_catalog_projects_every_format_and_never_leaks_an_adapter(base: str) -> None:
    portos = _get(f"{base}/api/tools", params={"format": "portos"}).json()
    assert {t["name"] for t in portos["tools"]} == {
        "demo.echo",
        "demo.big",
        "demo.write",
        "demo.fail",
    }
    assert all("adapter" not in t for t in portos["tools"])
    openai = _get(f"{base}/api/tools", params={"format": "openai"}).json()
    assert openai["tools"][0]["type"] == "function"
    assert "parameters" in openai["tools"][0]["function"]
    anthropic = _get(f"{base}/api/tools", params={"format": "anthropic"}).json()
    assert "input_schema" in anthropic["tools"][0]
    mcp = _get(f"{base}/api/tools", params={"format": "mcp"}).json()
    write = next(t for t in mcp["tools"] if t["name"] == "demo_write")
    assert write["annotations"]["readOnlyHint"] is False


def test_scope_and_intent_only_narrow_the_catalog(base: str) -> None:
    agent = _get(f"{base}/api/tools", params={"scope": "agent"}).json()["tools"]
    voice = _get(f"{base}/api/tools", params={"scope": "voice"}).json()["tools"]
    assert len(agent) == 4
    assert voice == []
    narrowed = _get(f"{base}/api/tools", params={"intent": "  echo  "}).json()["tools"]
    assert 0 < len(narrowed) <= 4


@pytest.mark.parametrize(
    "query",
    [
        {"format": "yaml"},
        {"scope": "root"},
        {"intent": "x" * 501},
        {"cursor": "1"},
        [("format", "mcp"), ("format", "openai")],
    ],
)
def test_catalog_queries_are_strict(base: str, query: Any) -> None:
    answer = _get(f"{base}/api/tools", params=query, timeout=10)
    assert answer.status_code == 400
    body = answer.json()
    assert body["ok"] is False
    assert set(body["error"]) == {"code", "message", "retryable", "details"}


def test_a_read_call_completes_and_is_retained(base: str) -> None:
    answer = _call(base, _envelope("http-read-1", "demo.echo", {"text": "hello"}))
    assert answer.status_code == 200
    result = answer.json()
    assert result["state"] == "completed"
    assert result["result"] == {"text": "hello"}
    retained = _get(f"{base}/api/tools/calls/http-read-1", timeout=10)
    assert retained.json()["requestId"] == "http-read-1"
    missing = _get(f"{base}/api/tools/calls/never-made", timeout=10)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "TOOL_CALL_NOT_FOUND"


def test_every_route_needs_the_bearer_token_and_a_wrong_token_is_401(
    base: str, tools: DemoTools
) -> None:
    anonymous = httpx.post(
        f"{base}/api/tools/call", json=_envelope("w-anon", "demo.write", {"value": 1})
    )
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "AUTH_REQUIRED"
    assert anonymous.headers["www-authenticate"] == "Bearer"
    read = httpx.get(f"{base}/api/tools", timeout=10)
    assert read.status_code == 401
    wrong = _call(base, _envelope("w-wrong", "demo.write", {"value": 1}), authorization="Bearer x")
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "AUTH_INVALID"
    assert tools.writes == []
    good = _call(
        base, _envelope("w-good", "demo.write", {"value": 1}), authorization=f"Bearer {TOKEN}"
    )
    assert good.json()["state"] == "completed"
    assert len(tools.writes) == 1


def test_the_body_cannot_claim_authority(base: str) -> None:
    body = {**_envelope("claim-1", "demo.echo", {"text": "a"}), "scope": "mind"}
    answer = _call(base, body)
    assert answer.status_code == 400
    assert answer.json()["ok"] is False


def test_an_idempotency_key_must_equal_the_request_id(base: str) -> None:
    body = _envelope("key-1", "demo.echo", {"text": "a"})
    assert _call(base, body, **{"idempotency-key": "key-2"}).status_code == 400
    assert _call(base, body, **{"idempotency-key": "key-1"}).status_code == 200
    replay = _call(base, body, **{"idempotency-key": "key-1"}).json()
    assert replay["duplicate"] is True


def test_a_failing_tool_is_a_failed_result_and_not_a_server_error(base: str) -> None:
    answer = _call(base, _envelope("fail-1", "demo_fail", {}))
    assert answer.status_code == 200
    assert answer.json()["state"] == "failed"
    assert answer.json()["error"]["code"] == "DEMO_BROKEN"


def test_malformed_bodies_are_structured_400s(base: str) -> None:
    json_type = {"content-type": "application/json"}
    raw = _post(f"{base}/api/tools/call", content=b"[1,", headers=json_type, timeout=10)
    assert raw.status_code == 400
    assert raw.json()["error"]["code"] == "INVALID_JSON"
    listed = _post(f"{base}/api/tools/call", json=[1, 2], timeout=10)
    assert listed.status_code == 400
    unknown_route = _get(f"{base}/api/nothing", timeout=10)
    assert unknown_route.status_code == 404
    assert unknown_route.json()["ok"] is False


def test_an_oversized_body_is_413() -> None:
    settings = ServerSettings(max_body_bytes=1024)
    with running(demo_app(settings)) as url:
        json_type = {"content-type": "application/json"}
        answer = httpx.post(
            f"{url}/api/tools/call", content=b"x" * 5000, headers=json_type, timeout=10
        )
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "BODY_TOO_LARGE"


def test_a_rebound_host_or_foreign_origin_is_refused_on_a_loopback_server(base: str) -> None:
    rebound = _get(f"{base}/api/tools", headers={"host": "evil.example"}, timeout=10)
    assert rebound.status_code == 403
    assert rebound.json()["error"]["code"] == "HOST_NOT_ALLOWED"
    foreign = _call(
        base, _envelope("o-1", "demo.echo", {"text": "a"}), origin="https://evil.example"
    )
    assert foreign.status_code == 403
    port = base.rsplit(":", 1)[1]
    other_port = _get(
        f"{base}/api/tools", headers={"host": f"localhost:{port}", "origin": "http://[::1]:3000"}
    )
    assert other_port.status_code == 403
    own = _get(
        f"{base}/api/tools", headers={"host": f"[::1]:{port}", "origin": f"http://[::1]:{port}"}
    )
    assert own.status_code == 200


def test_api_tool_bundles_need_the_token_when_one_is_configured(tmp_path: Any) -> None:
    from doraforge.registry.server import build_app, new_service

    settings = ServerSettings(token=TOKEN, outbound={"default": "deny", "external": ["a.example"]})
    app = build_app(new_service(settings), settings, api_tools_dir=tmp_path)
    bundle = {
        "schemaVersion": 1,
        "name": "shop",
        "baseUrl": "https://a.example",
        "tools": [{"name": "get", "description": "Get it", "path": "/x"}],
    }
    with running(app) as url, httpx.Client(base_url=url) as client:
        anonymous = client.put("/api/api-tools/shop", json=bundle)
        assert anonymous.status_code == 401
        assert anonymous.json()["error"]["code"] == "AUTH_REQUIRED"
        assert not list(tmp_path.iterdir())
        operator = {"Authorization": f"Bearer {TOKEN}"}
        saved = client.put("/api/api-tools/shop", json=bundle, headers=operator)
        assert saved.status_code == 201
        assert client.get("/api/tools", params={"scope": "ui"}).status_code == 401
        assert client.get("/api/tools", headers=operator).status_code == 200
