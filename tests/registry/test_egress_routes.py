"""The operator's ``/api/egress`` routes on a real socket: the operator token is required,
allowlist changes take effect live for the next call, removed hosts are refused, bad input
is a structured 4xx naming the field, and changes are saved and loaded at the next start."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.registry.server import build_app, new_service
from doraforge.registry.service import RegistryService
from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import TOKEN, call_body, running
from tests.registry.test_core_support import CountingAdapter, entry

OPERATOR_TOKEN = "egress-operator-token-0123456789"
AGENT_AUTH = {"Authorization": f"Bearer {TOKEN}"}
OPERATOR_AUTH = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
FETCH = entry("net.fetch", policy={"egressHosts": ["api.example.com"]})


@dataclass
class Server:
    url: str
    service: RegistryService
    adapter: CountingAdapter
    client: httpx.Client

    def call(self, request_id: str) -> dict[str, Any]:
        body = call_body("net.fetch", {"query": "q"}, request_id)
        answer = self.client.post(f"{self.url}/api/tools/call", json=body, headers=AGENT_AUTH)
        result: dict[str, Any] = answer.json()
        return result

    def operator(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.request(method, f"{self.url}{path}", headers=OPERATOR_AUTH, **kwargs)


def _settings(**extra: Any) -> ServerSettings:
    return ServerSettings.model_validate(
        {"token": TOKEN, "operator_token": OPERATOR_TOKEN, **extra}
    )


@contextmanager
def _serve(path: Path, settings: ServerSettings | None = None) -> Iterator[Server]:
    settings = settings or _settings()
    service = new_service(settings)
    adapter = CountingAdapter()
    service.register(FETCH, adapter, source="mcp:fetcher")
    app = build_app(service, settings, egress_file=path)
    with running(app) as url, httpx.Client(timeout=10) as client:
        yield Server(url, service, adapter, client)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with _serve(tmp_path / "egress.json") as running_server:
        yield running_server


def test_allowlist_changes_take_effect_live_and_removed_hosts_are_refused(server: Server) -> None:
    denied = server.call("r1")
    assert denied["state"] == "denied"
    assert denied["error"]["code"] == "TOOL_EGRESS_DENIED"
    details = denied["error"]["details"]
    assert details["route"] == "/api/egress/allow"
    assert details["principal"] == "agent"  # the agent token's, over HTTP as over MCP
    allowed = server.operator(
        "POST", details["route"], json={"host": details["host"], "principal": details["principal"]}
    )
    assert allowed.status_code == 200
    body = allowed.json()
    assert body["allowed"] == {"host": "api.example.com", "principal": "agent"}
    assert body["egress"]["effective"]["agent"]["enabled"] is True
    assert body["egress"]["effective"]["ui"]["enabled"] is False
    assert server.call("r2")["state"] == "completed"
    removed = server.operator("DELETE", "/api/egress/hosts/api.example.com")
    assert removed.status_code == 200
    assert removed.json()["removed"] == "api.example.com"
    assert removed.json()["stillDeclaredBy"] == []
    again = server.call("r3")
    assert again["state"] == "denied"
    assert again["error"]["code"] == "TOOL_EGRESS_DENIED"
    assert len(server.adapter.calls) == 1


def test_the_routes_need_the_operator_token(server: Server) -> None:
    for method, path, body in (
        ("GET", "/api/egress", None),
        ("PUT", "/api/egress", {"enabled": True, "allow_any": True}),
        ("POST", "/api/egress/allow", {"host": "api.example.com"}),
        ("DELETE", "/api/egress/hosts/api.example.com", None),
    ):
        agent = server.client.request(method, f"{server.url}{path}", json=body, headers=AGENT_AUTH)
        assert agent.status_code == 403, (method, path)
        assert agent.json()["error"]["code"] == "OPERATOR_REQUIRED"
        anonymous = server.client.request(method, f"{server.url}{path}", json=body)
        assert anonymous.status_code == 401, (method, path)
    assert server.call("r1")["state"] == "denied"  # nothing was opened
    refusals = [r for r in server.service.audit.records() if r["errorCode"] == "OPERATOR_REQUIRED"]
    assert len(refusals) == 4


def test_the_policy_shows_each_principal_and_each_sources_hosts(server: Server) -> None:
    server.service.egress.declare("mcp:fetcher", ["api.example.com", "cdn.example.com"])
    shown = server.operator("GET", "/api/egress")
    assert shown.status_code == 200
    egress = shown.json()["egress"]
    assert egress["enabled"] is False
    assert egress["declared"] == {"mcp:fetcher": ["api.example.com", "cdn.example.com"]}
    assert set(egress["effective"]) == {"base", "agent", "mind", "ui", "voice"}
    assert egress["effective"]["agent"] == {"enabled": False, "allow_any": False, "hosts": []}
    assert server.call("r1")["state"] == "completed"  # its own source's host needs no switch
    # Not the operator's to remove: the source's declaration goes with the source.
    gone = server.operator("DELETE", "/api/egress/hosts/cdn.example.com")
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "EGRESS_HOST_NOT_FOUND"
    assert gone.json()["error"]["details"]["declaredBy"] == ["mcp:fetcher"]
    server.service.egress.retract("mcp:fetcher")
    assert server.call("r2")["state"] == "denied"


def test_put_replaces_the_operator_part(server: Server) -> None:
    document = {
        "enabled": False,
        "allow_any": False,
        "hosts": [],
        "principals": {"agent": {"enabled": True, "hosts": ["API.example.com"]}},
    }
    replaced = server.operator("PUT", "/api/egress", json=document)
    assert replaced.status_code == 200
    assert replaced.json()["egress"]["principals"]["agent"]["hosts"] == ["api.example.com"]
    assert server.call("r1")["state"] == "completed"
    off = server.operator("PUT", "/api/egress", json={"enabled": False})
    assert off.json()["egress"]["principals"] == {}
    assert server.call("r2")["state"] == "denied"


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("PUT", "/api/egress", {"enabled": "yes"}, "body.enabled"),
        ("PUT", "/api/egress", {"hosts": ["https://api.example.com/"]}, "body.hosts"),
        ("PUT", "/api/egress", {"principals": {"robot": {}}}, "body.principals.robot"),
        ("PUT", "/api/egress", {"allowlist": []}, "body.allowlist"),
        ("PUT", "/api/egress", ["api.example.com"], "body"),
        ("POST", "/api/egress/allow", {"host": "*.example.com"}, "host"),
        (
            "POST",
            "/api/egress/allow",
            {"host": "api.example.com", "principal": "root"},
            "principal",
        ),
        ("POST", "/api/egress/allow", {"hosts": ["api.example.com"]}, None),
        ("POST", "/api/egress/allow", None, None),
        ("DELETE", "/api/egress/hosts/bad%20host", None, "host"),
    ],
)
def test_bad_input_is_a_structured_400_naming_the_field(
    server: Server, method: str, path: str, body: Any, field: str | None
) -> None:
    answer = server.operator(method, path, json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "EGRESS_INVALID"
    assert error["retryable"] is False
    assert "\n" not in error["message"]
    if field is not None:
        assert error["details"]["field"] == field or error["details"]["field"].startswith(field)
    assert server.operator("GET", "/api/egress").json()["egress"]["origin"] == "settings"
    rejected = [r for r in server.service.audit.records() if r["state"] == "rejected"]
    assert [r["errorCode"] for r in rejected] == ["EGRESS_INVALID"]


def test_unknown_hosts_and_query_parameters_are_refused(server: Server) -> None:
    missing = server.operator("DELETE", "/api/egress/hosts/never.example.com")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "EGRESS_HOST_NOT_FOUND"
    odd = server.operator("DELETE", "/api/egress/hosts/api.example.com?scope=ui")
    assert odd.status_code == 400


def test_changes_are_saved_and_loaded_at_the_next_start(tmp_path: Path) -> None:
    path = tmp_path / "egress.json"
    configured = _settings(egress={"enabled": True, "hosts": ["config.example.com"]})
    with _serve(path, configured) as first:
        assert first.operator("GET", "/api/egress").json()["egress"]["origin"] == "settings"
        answer = first.operator("POST", "/api/egress/allow", json={"host": "api.example.com"})
        assert answer.status_code == 200
        assert path.exists()
    with _serve(path, configured) as second:
        egress = second.operator("GET", "/api/egress").json()["egress"]
        assert egress["origin"] == "file"
        assert egress["hosts"] == ["config.example.com", "api.example.com"]
        assert second.call("r1")["state"] == "completed"


def test_every_change_is_audited_with_the_operator(server: Server) -> None:
    server.operator("POST", "/api/egress/allow", json={"host": "api.example.com"})
    server.operator("DELETE", "/api/egress/hosts/api.example.com")
    changes = [r for r in server.service.audit.records() if r["name"].startswith("egress.operator")]
    assert [r["name"] for r in changes] == [
        "egress.operator allow api.example.com for (base)",
        "egress.operator remove api.example.com from (all)",
    ]
    assert {r["principal"] for r in changes} == {"doraforge-operator"}


def test_an_empty_put_is_refused_and_changes_nothing(server: Server) -> None:
    allowed = server.operator("POST", "/api/egress/allow", json={"host": "api.example.com"})
    assert allowed.status_code == 200
    before = server.operator("GET", "/api/egress").json()["egress"]
    emptied = server.operator("PUT", "/api/egress", json={})
    assert emptied.status_code == 400
    error = emptied.json()["error"]
    assert error["code"] == "EGRESS_INVALID"
    assert '{"enabled": false}' in error["message"]  # how to reset deliberately
    assert error["details"]["field"] == "body"
    assert server.operator("GET", "/api/egress").json()["egress"] == before
    assert server.call("r1")["state"] == "completed"  # the allowlist still stands
