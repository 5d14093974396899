from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from doraforge.registry.api_tools.bundle import parse_bundle
from doraforge.registry.api_tools.outbound import OutboundPolicy
from doraforge.registry.api_tools.routes import ROUTES, ApiTools
from doraforge.registry.api_tools.tools import build_tools
from doraforge.registry.http import EXCEPTION_HANDLERS
from doraforge.registry.model import Principal
from doraforge.registry.service import RegistryService
from doraforge.wire.guard import TransportGuard, default_render, policy_for_bind

from .conftest import Upstream, local_policy, tool

SECRETS = {"TOKEN": "s3cr3t-token-value"}
DENY = OutboundPolicy(default="deny", external=["api.example.com"])
BODY = 256 * 1024


def _bundle(name: str = "shop", base: str = "https://api.example.com") -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "name": name,
        "baseUrl": base,
        "headers": {"X-Key": "{{secret:TOKEN}}"},
        "credentials": ["TOKEN"],
        "tools": [
            {
                "name": "get_item",
                "description": "Fetch one item",
                "path": "/items/{id}",
                "params": [{"name": "id", "in": "path", "required": True}],
            }
        ],
    }


class TestClient:
    """A synchronous facade over httpx's in-process ASGI transport."""

    __test__ = False

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return await client.request(method, url, **kwargs)

        return asyncio.run(send())

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self._send("GET", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> httpx.Response:
        return self._send("PUT", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self._send("POST", url, **kwargs)


def _client(store: Path, policy: OutboundPolicy = DENY) -> tuple[TestClient, RegistryService]:
    service = RegistryService()
    app = FastAPI(routes=ROUTES, exception_handlers=EXCEPTION_HANDLERS)
    app.state.api_tools = ApiTools(store, service, policy, SECRETS)
    # As in the server: bodies reach the routes only through the transport guard.
    guard = policy_for_bind("127.0.0.1", token=None, server_names=["test"], max_body_bytes=BODY)
    app.add_middleware(TransportGuard, policy=guard, render=default_render)
    return TestClient(app), service


def test_put_persists_registers_and_lists(tmp_path: Path) -> None:
    client, service = _client(tmp_path)
    answer = client.put("/api/api-tools/shop", json=_bundle())
    assert answer.status_code == 201
    assert answer.json() == {"ok": True, "service": "shop", "tools": ["api__shop__get_item"]}
    assert service.resolve("api__shop__get_item") is not None
    assert json.loads((tmp_path / "shop.json").read_text())["name"] == "shop"
    assert not list(tmp_path.glob(".bundle-*"))
    listed = client.get("/api/api-tools").json()
    assert listed["services"] == [
        {"name": "shop", "baseUrl": "https://api.example.com", "tools": ["api__shop__get_item"]}
    ]
    downloaded = client.get("/api/api-tools/shop").json()
    assert downloaded["bundle"]["tools"][0]["params"][0]["in"] == "path"
    restarted, service2 = _client(tmp_path)
    assert service2.resolve("api__shop__get_item") is not None
    assert restarted.get("/api/api-tools").json()["services"][0]["name"] == "shop"


def test_put_under_deny_default_with_an_unlisted_host_is_409(tmp_path: Path) -> None:
    client, service = _client(tmp_path)
    answer = client.put("/api/api-tools/shop", json=_bundle(base="https://evil.example"))
    assert answer.status_code == 409
    body = answer.json()
    assert body["ok"] is False
    assert body["error"]["code"] == "API_TOOL_HOST_NOT_ALLOWED"
    assert body["error"]["details"]["host"] == "evil.example"
    assert set(body["error"]) == {"code", "message", "retryable", "details"}
    assert not list(tmp_path.iterdir())
    assert service.resolve("api__shop__get_item") is None


@pytest.mark.parametrize(
    ("path", "document", "status", "code"),
    [
        ("/api/api-tools/shop", {"schemaVersion": 1}, 422, "API_BUNDLE_INVALID"),
        ("/api/api-tools/other", _bundle(), 422, "API_BUNDLE_INVALID"),
        ("/api/api-tools/Bad..Name", _bundle(), 404, "API_BUNDLE_NOT_FOUND"),
    ],
)
def test_put_errors_are_structured(
    tmp_path: Path, path: str, document: Any, status: int, code: str
) -> None:
    client, _ = _client(tmp_path)
    answer = client.put(path, json=document)
    assert answer.status_code == status
    assert answer.json()["error"]["code"] == code


def test_put_rejects_non_json_and_oversized_bodies(tmp_path: Path) -> None:
    client, _ = _client(tmp_path)
    json_type = {"content-type": "application/json"}
    broken = client.put("/api/api-tools/shop", content=b"{", headers=json_type)
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == "INVALID_JSON"
    undeclared = client.put("/api/api-tools/shop", content=b"{}")
    assert undeclared.status_code == 415
    big = client.put("/api/api-tools/shop", content=b" " * (300 * 1024), headers=json_type)
    assert big.status_code == 413
    nested = client.put(
        "/api/api-tools/shop", content=b"[" * 100_000 + b"]" * 100_000, headers=json_type
    )
    assert nested.status_code == 400
    assert nested.json()["error"]["code"] == "JSON_TOO_DEEP"
    assert not list(tmp_path.iterdir())


def test_replacing_a_live_service_swaps_its_tools(tmp_path: Path) -> None:
    client, service = _client(tmp_path)
    assert client.put("/api/api-tools/shop", json=_bundle()).status_code == 201
    assert service.resolve("api__shop__get_item") is not None
    replacement = _bundle()
    replacement["tools"][0]["name"] = "get_thing"
    again = client.put("/api/api-tools/shop", json=replacement)
    assert again.status_code == 200
    assert service.resolve("api__shop__get_item") is None
    assert service.resolve("api__shop__get_thing") is not None


def test_probe_route(tmp_path: Path) -> None:
    client, _ = _client(tmp_path)
    client.put("/api/api-tools/shop", json=_bundle())
    answer = client.post(
        "/api/api-tools/shop/probe", json={"tool": "get_item", "arguments": {"id": "7"}}
    )
    assert answer.status_code == 200
    body = answer.json()
    assert "s3cr3t" not in answer.text
    assert body["request"]["url"] == "https://api.example.com/items/7"
    assert body["request"]["headers"]["X-Key"] == "****"
    assert body["preview"]["success"]["ok"] is True
    assert body["preview"]["failure"]["ok"] is False
    missing = client.post("/api/api-tools/shop/probe", json={"tool": "get_item"})
    assert missing.status_code == 422
    assert missing.json()["error"]["code"] == "API_ARGUMENT_MISSING"
    unknown = client.post("/api/api-tools/nope/probe", json={"tool": "x"})
    assert unknown.status_code == 404
    assert client.post("/api/api-tools/shop/probe", json=[]).status_code == 400


def test_a_name_taken_by_another_registration_is_refused_before_writing(tmp_path: Path) -> None:
    client, service = _client(tmp_path)
    bundle = parse_bundle(_bundle())
    entry, adapter = build_tools(bundle, secrets=SECRETS, policy=DENY)[0]
    service.register(entry, adapter)
    answer = client.put("/api/api-tools/shop", json=_bundle())
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "TOOL_REGISTRATION_CONFLICT"
    assert not list(tmp_path.iterdir())


def test_a_saved_bundle_can_reach_its_vetted_host_and_no_other(
    tmp_path: Path, upstream: Upstream
) -> None:
    # The service starts with an empty egress allowlist: only saving the bundle (which
    # passed the outbound policy) lets its tools reach their host.
    client, service = _client(tmp_path, upstream.policy)
    document = _bundle(name="svc", base=upstream.base)
    document["tools"] = [tool("text", "/text", response={"type": "text"})]
    assert client.put("/api/api-tools/svc", json=document).status_code == 201
    principal = Principal(id="t", scope="agent", grants=frozenset({"api.read"}))
    other = RegistryService()
    bundle = parse_bundle(document)
    entry, adapter = build_tools(bundle, secrets=SECRETS, policy=upstream.policy)[0]
    other.register(entry, adapter)

    async def calls() -> tuple[dict[str, Any], dict[str, Any]]:
        saved = await service.call({"requestId": "r1", "name": "api__svc__text"}, principal)
        unsaved = await other.call({"requestId": "r1", "name": "api__svc__text"}, principal)
        return saved, unsaved

    saved, unsaved = asyncio.run(calls())
    assert saved["state"] == "completed"
    assert saved["result"]["content"] == "plain hello"
    assert unsaved["state"] == "denied"
    assert unsaved["error"]["code"] == "TOOL_EGRESS_DENIED"


ODD_BASES = [
    "http://127.0.0.1:65536",
    "http://127.0.0.1:abc",
    "http://127.0.0.1:0",
    "http://0177.0.0.1:8080",
    "http://127.000.000.001:8080",
    "http://127.1:8080",
    "http://[::ffff:127.0.0.1]:8080",
    "http://127.0.0.1\t:8080",
    "http://api.example.com\t/v1",
]


@pytest.mark.parametrize("base", ODD_BASES)
def test_a_bad_port_or_an_odd_host_spelling_is_refused_at_save(tmp_path: Path, base: str) -> None:
    # Under ``allow`` any host saves, so only the spelling can be the reason.
    client, service = _client(tmp_path, OutboundPolicy(default="allow"))
    answer = client.put("/api/api-tools/shop", json=_bundle(base=base))
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "API_BUNDLE_INVALID"
    assert [e["field"] for e in error["details"]["errors"]] == ["baseUrl"]
    assert not list(tmp_path.iterdir())
    assert service.resolve("api__shop__get_item") is None


def test_under_deny_a_listed_host_on_a_port_its_rule_does_not_name_is_409(tmp_path: Path) -> None:
    policy = OutboundPolicy(default="deny", internal=["127.0.0.1:9000", "localhost"])
    client, service = _client(tmp_path, policy)
    for base, port in [("http://127.0.0.1:9001", 9001), ("http://127.0.0.1", 80)]:
        refused = client.put("/api/api-tools/shop", json=_bundle(base=base))
        assert refused.status_code == 409
        error = refused.json()["error"]
        assert error["code"] == "API_TOOL_HOST_NOT_ALLOWED"
        assert (error["details"]["host"], error["details"]["port"]) == ("127.0.0.1", port)
    assert client.put(
        "/api/api-tools/shop", json=_bundle(base="http://localhost:8080")
    ).status_code == (409)
    assert service.resolve("api__shop__get_item") is None
    saved = client.put("/api/api-tools/shop", json=_bundle(base="http://127.0.0.1:9000"))
    assert saved.status_code == 201


def test_the_saved_base_url_carries_the_host_in_lower_case(tmp_path: Path) -> None:
    client, _ = _client(tmp_path)
    assert (
        client.put("/api/api-tools/shop", json=_bundle(base="https://API.Example.COM/")).status_code
        == 201
    )
    downloaded = client.get("/api/api-tools/shop").json()["bundle"]
    assert downloaded["baseUrl"] == "https://api.example.com"
    stored = json.loads((tmp_path / "shop.json").read_text())
    assert stored["baseUrl"] == "https://api.example.com"


def test_a_stored_bundle_no_longer_valid_is_skipped_at_start_and_probing_it_is_404(
    tmp_path: Path,
) -> None:
    # Written before host spellings were checked at save, and a torn file beside it.
    (tmp_path / "shop.json").write_text(json.dumps(_bundle(base="http://127.1:8080")))
    (tmp_path / "torn.json").write_text("{")
    client, service = _client(tmp_path, OutboundPolicy(default="allow"))
    assert service.resolve("api__shop__get_item") is None
    probe = {"tool": "get_item", "arguments": {"id": "1"}, "live": True}
    answer = client.post("/api/api-tools/shop/probe", json=probe)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "API_BUNDLE_NOT_FOUND"


def test_a_live_probe_that_is_refused_or_cannot_connect_is_a_structured_answer(
    tmp_path: Path,
) -> None:
    probe = {"tool": "get_item", "arguments": {"id": "1"}, "live": True}
    # Bound, never listening: a connection is refused and no other process can take it.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        reachable, _ = _client(tmp_path / "a", local_policy(port))
        blacklisted, _ = _client(tmp_path / "b", OutboundPolicy(internal=["127.0.0.0/8"]))
        answers = []
        for client in (reachable, blacklisted):
            assert client.put("/api/api-tools/shop", json=_bundle(base=base)).status_code == 201
            answers.append(client.post("/api/api-tools/shop/probe", json=probe))
    assert [a.status_code for a in answers] == [200, 200]
    lives = [a.json()["live"] for a in answers]
    assert [live["ok"] for live in lives] == [False, False]
    assert [live["error"]["code"] for live in lives] == ["API_IO_ERROR", "API_EGRESS_DENIED"]
