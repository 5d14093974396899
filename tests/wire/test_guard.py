"""The transport guard in front of a small ASGI app: each check, in order, and what
reaches the app when a request passes."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from doraforge.wire.guard import (
    NO_BODY,
    WS_SUBPROTOCOL,
    WS_TOKEN_PREFIX,
    BindRefused,
    TransportGuard,
    TransportPolicy,
    default_render,
    is_loopback,
    json_body,
    policy_for_bind,
)

pytestmark = pytest.mark.anyio

TOKEN = "guard-test-token-0123456789"
BEARER = {"authorization": f"Bearer {TOKEN}"}


class Recorder:
    """The app behind the guard: it records what reached it."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []

    async def echo(self, request: Request) -> JSONResponse:
        body = json_body(request) if request.method != "GET" else None
        body = "<empty>" if body is NO_BODY else body
        self.bodies.append(body)
        return JSONResponse({"reached": True, "body": body})

    async def socket(self, websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_json({"hello": True})
        await websocket.close()


def guarded(policy: TransportPolicy) -> tuple[Any, Recorder]:
    recorder = Recorder()
    app = Starlette(
        routes=[
            Route("/echo", recorder.echo, methods=["GET", "POST", "PUT"]),
            WebSocketRoute("/ws", recorder.socket),
        ]
    )
    return TransportGuard(app, policy=policy, render=default_render), recorder


def client(policy: TransportPolicy) -> tuple[httpx.AsyncClient, Recorder]:
    app, recorder = guarded(policy)
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000"), recorder


LOOPBACK = policy_for_bind("127.0.0.1", token=None, max_body_bytes=1024)
WITH_TOKEN = policy_for_bind("127.0.0.1", token=TOKEN, max_body_bytes=1024)


def code_of(response: httpx.Response) -> str:
    code: str = response.json()["error"]["code"]
    return code


# ----------------------------------------------------------------------- Host and Origin


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "127.0.0.1.nip.io",
        "localhost.evil.example",
        "user@127.0.0.1",
        "127.0.0.1:99999",
        "127.0.0.1:abc",
        "",
        "[::1",
        "127.0.0.1/x",
    ],
)
async def test_a_host_that_does_not_name_the_server_is_403(host: str) -> None:
    http, recorder = client(LOOPBACK)
    async with http:
        answer = await http.get("/echo", headers={"host": host})
    assert answer.status_code == 403
    assert code_of(answer) == "HOST_NOT_ALLOWED"
    assert recorder.bodies == []


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "LOCALHOST."])
async def test_loopback_names_pass_on_a_loopback_bind(host: str) -> None:
    http, _ = client(LOOPBACK)
    async with http:
        assert (await http.get("/echo", headers={"host": host})).status_code == 200


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "null",
        "http://localhost:1",
        "https://127.0.0.1:8000",
        "http://127.0.0.1:8000/path",
        "file://",
        "not a url",
    ],
)
async def test_a_foreign_origin_is_403_before_the_app_runs(origin: str) -> None:
    http, recorder = client(LOOPBACK)
    async with http:
        answer = await http.post("/echo", json={"a": 1}, headers={"origin": origin})
    assert answer.status_code == 403
    assert code_of(answer) == "ORIGIN_NOT_ALLOWED"
    assert recorder.bodies == []


async def test_the_servers_own_origin_and_configured_origins_pass() -> None:
    policy = policy_for_bind("127.0.0.1", token=None, allowed_origins=["https://console.lab:8443"])
    http, recorder = client(policy)
    async with http:
        own = await http.post("/echo", json={}, headers={"origin": "http://localhost:8000"})
        listed = await http.post("/echo", json={}, headers={"origin": "https://console.lab:8443"})
    assert (own.status_code, listed.status_code) == (200, 200)
    assert len(recorder.bodies) == 2


async def test_a_configured_origin_gets_cors_answers_and_a_preflight_needs_no_token() -> None:
    policy = policy_for_bind("127.0.0.1", token=TOKEN, allowed_origins=["https://console.lab"])
    http, recorder = client(policy)
    preflight_headers = {
        "origin": "https://console.lab",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
    }
    async with http:
        preflight = await http.options("/echo", headers=preflight_headers)
        call = await http.post(
            "/echo", json={}, headers={**BEARER, "origin": "https://console.lab"}
        )
        foreign = await http.options(
            "/echo", headers={**preflight_headers, "origin": "https://x.y"}
        )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://console.lab"
    assert call.status_code == 200
    assert call.headers["access-control-allow-origin"] == "https://console.lab"
    assert foreign.status_code == 403
    assert recorder.bodies == [{}]


async def test_a_cross_site_fetch_without_origin_is_refused() -> None:
    http, _ = client(LOOPBACK)
    async with http:
        answer = await http.get("/echo", headers={"sec-fetch-site": "cross-site"})
        same = await http.get("/echo", headers={"sec-fetch-site": "same-origin"})
    assert answer.status_code == 403
    assert same.status_code == 200


async def test_a_concrete_bind_accepts_only_its_address_and_configured_names() -> None:
    policy = policy_for_bind(
        "192.0.2.7", token=TOKEN, server_names=["robot-cell.lab"], max_body_bytes=1024
    )
    assert policy.allowed_hosts == {"192.0.2.7", "robot-cell.lab"}
    wildcard = policy_for_bind("0.0.0.0", token=TOKEN, server_names=["cell"])
    assert wildcard.allowed_hosts == {"cell", "localhost", "127.0.0.1", "::1"}


# ----------------------------------------------------------------------------- binding


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "192.0.2.7", "127.0.0.1.example", ""])
def test_a_non_loopback_bind_without_a_token_refuses_to_start(bind: str) -> None:
    with pytest.raises(BindRefused, match="bearer token"):
        policy_for_bind(bind, token=None)


def test_insecure_lets_a_lab_bind_start_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    policy = policy_for_bind("0.0.0.0", token=None, insecure=True)
    assert policy.token is None
    assert "INSECURE" in caplog.text


def test_a_short_token_is_refused() -> None:
    with pytest.raises(BindRefused, match="16"):
        policy_for_bind("127.0.0.1", token="short")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("localhost.example", False),
    ],
)
def test_loopback_is_judged_by_address(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


# ------------------------------------------------------------------------------- tokens


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({}, "AUTH_REQUIRED"),
        ({"authorization": "Bearer"}, "AUTH_REQUIRED"),
        ({"authorization": f"Basic {TOKEN}"}, "AUTH_REQUIRED"),
        ({"authorization": "Bearer wrong-token-0123456789"}, "AUTH_INVALID"),
        ({"authorization": f"Bearer {TOKEN[:-1]}"}, "AUTH_INVALID"),
        ({"authorization": f"Bearer {TOKEN}x"}, "AUTH_INVALID"),
    ],
)
async def test_with_a_token_every_request_needs_it(headers: dict[str, str], code: str) -> None:
    http, recorder = client(WITH_TOKEN)
    async with http:
        read = await http.get("/echo", headers=headers)
        write = await http.post("/echo", json={"a": 1}, headers=headers)
    assert (read.status_code, write.status_code) == (401, 401)
    assert code_of(read) == code
    assert read.headers["www-authenticate"].startswith("Bearer")
    assert recorder.bodies == []


async def test_the_right_token_passes_in_any_scheme_case() -> None:
    http, _ = client(WITH_TOKEN)
    async with http:
        answer = await http.get("/echo", headers={"authorization": f"bearer {TOKEN}"})
    assert answer.status_code == 200


async def test_a_repeated_authorization_header_is_not_accepted() -> None:
    app, _ = guarded(WITH_TOKEN)
    headers = [(b"host", b"127.0.0.1")] + [(b"authorization", f"Bearer {TOKEN}".encode())] * 2
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/echo", "headers": headers}
    await app(scope, receive, send)
    assert sent[0]["status"] == 401


# --------------------------------------------------------------------------------- bodies


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "json"],
)
async def test_a_body_that_is_not_declared_json_is_415(content_type: str) -> None:
    http, recorder = client(LOOPBACK)
    async with http:
        answer = await http.post(
            "/echo", content=b'{"a":1}', headers={"content-type": content_type}
        )
    assert answer.status_code == 415
    assert code_of(answer) == "UNSUPPORTED_MEDIA_TYPE"
    assert recorder.bodies == []


async def test_only_an_empty_body_may_omit_the_content_type() -> None:
    http, recorder = client(LOOPBACK)
    async with http:
        empty = await http.post("/echo")
        undeclared = await http.post("/echo", content=b'{"a":1}')
    assert empty.status_code == 200
    assert empty.json()["body"] == "<empty>"
    assert undeclared.status_code == 415
    assert recorder.bodies == ["<empty>"]


async def test_a_whitespace_body_declared_json_is_invalid_json_not_an_empty_body() -> None:
    http, recorder = client(LOOPBACK)
    async with http:
        answer = await http.post(
            "/echo", content=b"\n", headers={"content-type": "application/json"}
        )
    assert answer.status_code == 400
    assert recorder.bodies == []


async def test_a_json_null_body_is_not_an_empty_body() -> None:
    http, recorder = client(LOOPBACK)
    async with http:
        answer = await http.post(
            "/echo", content=b"null", headers={"content-type": "application/json"}
        )
    assert answer.json()["body"] is None
    assert recorder.bodies == [None]


async def test_the_parsed_body_reaches_the_app_once() -> None:
    http, recorder = client(LOOPBACK)
    async with http:
        answer = await http.put("/echo", json={"a": [1, 2]})
    assert answer.json()["body"] == {"a": [1, 2]}
    assert recorder.bodies == [{"a": [1, 2]}]


async def test_a_declared_length_over_the_limit_is_413_unread() -> None:
    http, recorder = client(LOOPBACK)
    async with http:
        answer = await http.post(
            "/echo",
            content=b"{}",
            headers={"content-type": "application/json", "content-length": "4096"},
        )
    assert answer.status_code == 413
    assert code_of(answer) == "BODY_TOO_LARGE"
    assert recorder.bodies == []


async def test_a_chunked_body_stops_being_read_at_the_limit() -> None:
    chunks_read = 0

    async def endless() -> Any:
        nonlocal chunks_read
        for _ in range(10_000):
            chunks_read += 1
            yield b" " * 256

    http, recorder = client(LOOPBACK)
    async with http:
        answer = await http.post(
            "/echo", content=endless(), headers={"content-type": "application/json"}
        )
    assert answer.status_code == 413
    assert chunks_read < 20  # the guard stopped at 1 KiB, not after 2.5 MB
    assert recorder.bodies == []


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"name": "a", "name": "b"}', "JSON_DUPLICATE_KEY"),
        (b'{"n": ' + b"9" * 500 + b"}", "JSON_UNSAFE_INTEGER"),
        (b"[" * 300 + b"]" * 300, "JSON_TOO_DEEP"),
        (b'{"n": NaN}', "JSON_NON_FINITE"),
        (b"{", "INVALID_JSON"),
    ],
)
async def test_strict_json_refusals_are_structured_400s(body: bytes, code: str) -> None:
    http, recorder = client(LOOPBACK)
    async with http:
        answer = await http.post(
            "/echo", content=body, headers={"content-type": "application/json"}
        )
    assert answer.status_code == 400
    assert code_of(answer) == code
    assert recorder.bodies == []


async def test_an_edge_prefix_names_its_codes() -> None:
    policy = policy_for_bind("127.0.0.1", token=None, code_prefix="FORGE_TOOL_")
    http, _ = client(policy)
    async with http:
        answer = await http.get("/echo", headers={"host": "evil.example"})
    assert code_of(answer) == "FORGE_TOOL_HOST_NOT_ALLOWED"


# ----------------------------------------------------------------------------- WebSockets


async def handshake(
    policy: TransportPolicy,
    headers: dict[str, str] | None = None,
    subprotocols: list[str] | None = None,
    *,
    denial_extension: bool = False,
) -> list[dict[str, Any]]:
    """Drive one WebSocket handshake through the guarded app; return what it sent."""
    app, _ = guarded(policy)
    raw = [(b"host", b"127.0.0.1:8000")]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    if subprotocols:
        raw.append((b"sec-websocket-protocol", ", ".join(subprotocols).encode()))
    scope = {
        "type": "websocket",
        "path": "/ws",
        "scheme": "ws",
        "server": ("127.0.0.1", 8000),
        "headers": raw,
        "subprotocols": subprotocols or [],
        "extensions": {"websocket.http.response": {}} if denial_extension else {},
    }
    incoming: list[dict[str, Any]] = [
        {"type": "websocket.connect"},
        {"type": "websocket.disconnect", "code": 1000},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


async def test_a_websocket_with_a_foreign_origin_is_refused() -> None:
    sent = await handshake(LOOPBACK, {"origin": "http://evil.example"})
    assert sent == [{"type": "websocket.close", "code": 1008}]


async def test_a_refused_websocket_gets_the_structured_body_where_supported() -> None:
    sent = await handshake(WITH_TOKEN, denial_extension=True)
    assert sent[0]["type"] == "websocket.http.response.start"
    assert sent[0]["status"] == 401
    assert b"AUTH_REQUIRED" in sent[1]["body"]


async def test_a_websocket_needs_the_token_by_header_or_subprotocol() -> None:
    assert (await handshake(WITH_TOKEN))[0]["type"] == "websocket.close"
    by_header = await handshake(WITH_TOKEN, BEARER)
    assert by_header[0]["type"] == "websocket.accept"
    offered = [WS_SUBPROTOCOL, WS_TOKEN_PREFIX + TOKEN]
    by_subprotocol = await handshake(WITH_TOKEN, subprotocols=offered)
    assert (
        by_subprotocol[0]
        == {
            "type": "websocket.accept",
            "subprotocol": WS_SUBPROTOCOL,
        }
        or by_subprotocol[0]["subprotocol"] == WS_SUBPROTOCOL
    )
    wrong = [WS_SUBPROTOCOL, WS_TOKEN_PREFIX + "wrong-token-0123456789"]
    assert (await handshake(WITH_TOKEN, subprotocols=wrong))[0]["type"] == "websocket.close"
