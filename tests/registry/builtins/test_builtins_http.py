"""Every built-in through ``POST /api/tools/call`` of the real server app on a real socket,
governed by the server's settings: grants, permissions per principal, approvals, egress."""

from __future__ import annotations

from typing import Any

import httpx

from doraforge.registry.egress import ALLOW_ROUTE
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.registry.builtins.upstream import Upstream
from tests.registry.server_support import call_body, running


def _settings(port: int, **overrides: Any) -> ServerSettings:
    fields: dict[str, Any] = {
        "grants": frozenset({"builtin.read"}),
        "permissions": {"ui": ["network:*"]},
        "approvals": frozenset({"builtin.http_fetch"}),
        "egress": {"enabled": True, "hosts": ["127.0.0.1"]},
        "outbound": {"default": "deny", "internal": [f"127.0.0.1:{port}"]},
        "builtins": {"web_search": {"provider": "searxng", "base_url": f"http://127.0.0.1:{port}"}},
        **overrides,
    }
    return ServerSettings(**fields)


def _call(base: str, name: str, arguments: dict[str, Any], request_id: str) -> dict[str, Any]:
    answer = httpx.post(
        f"{base}/api/tools/call", json=call_body(name, arguments, request_id), timeout=10
    )
    assert answer.status_code < 500
    body: dict[str, Any] = answer.json()
    return body


def test_each_builtin_answers_over_http(served: Upstream) -> None:
    settings = _settings(served.port)
    with running(build_app(new_service(settings), settings)) as base:
        listed = httpx.get(f"{base}/api/tools", timeout=10).json()["tools"]
        assert {"builtin.calculator", "builtin.http_fetch", "builtin.web_search"} <= {
            tool["name"] for tool in listed
        }
        sum_ = _call(base, "calculator", {"expression": "2 + 3 * 4"}, "h-1")
        assert sum_["state"] == "completed"
        assert sum_["result"]["value"] == 14
        fetched = _call(
            base,
            "http_fetch",
            {"host": f"127.0.0.1:{served.port}", "path": "/text", "scheme": "http"},
            "h-2",
        )
        assert fetched["state"] == "completed", fetched
        assert fetched["result"]["content"] == "héllo from upstream"
        found = _call(base, "web_search", {"query": "arm", "max_results": 2, "lang": "en"}, "h-3")
        assert found["state"] == "completed", found
        assert [hit["url"] for hit in found["result"]["results"]] == [
            "https://searx1.example/doc",
            "https://searx2.example/doc",
        ]


def test_over_http_the_servers_governance_applies(served: Upstream) -> None:
    settings = _settings(
        served.port,
        permissions={},
        approvals=frozenset(),
        approval_timeout_s=0,
        egress={"enabled": False},
    )
    with running(build_app(new_service(settings), settings)) as base:
        search = _call(base, "web_search", {"query": "arm"}, "g-1")
        assert search["error"]["code"] == "TOOL_PERMISSION_DENIED"
        fetch = _call(base, "http_fetch", {"host": "127.0.0.1", "path": "/text"}, "g-2")
        assert fetch["error"]["code"] == "TOOL_APPROVAL_REQUIRED"
    assert served.seen == []
    only_calculator = _settings(served.port, builtins={"enabled": ["calculator"]})
    with running(build_app(new_service(only_calculator), only_calculator)) as base:
        names = {
            tool["name"] for tool in httpx.get(f"{base}/api/tools", timeout=10).json()["tools"]
        }
        assert "builtin.calculator" in names
        assert "builtin.web_search" not in names
        missing = _call(base, "web_search", {"query": "arm"}, "g-3")
        assert missing["error"]["code"] == "TOOL_NOT_FOUND"


def test_egress_off_over_http_denies_http_fetch_with_the_allow_route(served: Upstream) -> None:
    settings = _settings(served.port, egress={"enabled": False})
    with running(build_app(new_service(settings), settings)) as base:
        fetch = _call(
            base,
            "http_fetch",
            {"host": f"127.0.0.1:{served.port}", "path": "/text", "scheme": "http"},
            "e-1",
        )
        assert fetch["error"]["code"] == "TOOL_EGRESS_DENIED"
        assert fetch["error"]["details"]["route"] == ALLOW_ROUTE
        # The loopback SearXNG needs no egress.
        found = _call(base, "web_search", {"query": "arm"}, "e-2")
        assert found["state"] == "completed", found
    assert [seen["path"] for seen in served.seen] == ["/search"]
