"""The API-tool lifecycle through the REST edge and the management tools, in process: a
credential missing or of another scope refuses the save, delete tombstones and unregisters,
saving again restores, and the meta tools are never covered by a standing approval."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from doraforge.registry.api_tools.bundle import parse_bundle
from doraforge.registry.api_tools.library import ApiTools, check_credentials
from doraforge.registry.api_tools.manage import register_management_tools
from doraforge.registry.api_tools.routes import ROUTES
from doraforge.registry.credentials import CredentialStore, SecretView
from doraforge.registry.errors import Conflict
from doraforge.registry.http import EXCEPTION_HANDLERS
from doraforge.registry.model import Principal
from doraforge.registry.service import RegistryService
from doraforge.wire.guard import TransportGuard, default_render, policy_for_bind

from .test_routes import DENY, TestClient, _bundle

WRITER = Principal(
    id="doraforge-agent",
    scope="agent",
    grants=frozenset({"api.read", "api.write"}),
    approvals=frozenset({"api_tools_save", "api_tools_delete"}),  # standing rules: not enough
)


def _app(home: Path) -> tuple[TestClient, RegistryService, ApiTools, CredentialStore]:
    service = RegistryService()
    store = CredentialStore(home / "credentials.json")
    api_tools = ApiTools(home / "api-tools", service, DENY, SecretView(store, {}))
    register_management_tools(service, api_tools)
    app = FastAPI(routes=ROUTES, exception_handlers=EXCEPTION_HANDLERS)
    app.state.api_tools = api_tools
    guard = policy_for_bind("127.0.0.1", token=None, server_names=["test"], max_body_bytes=65536)
    app.add_middleware(TransportGuard, policy=guard, render=default_render)
    return TestClient(app), service, api_tools, store


def _delete(client: TestClient, url: str) -> Any:
    return client._send("DELETE", url)


def test_a_save_naming_an_unset_credential_is_409_and_nothing_is_written(tmp_path: Path) -> None:
    client, service, _, store = _app(tmp_path)
    refused = client.put("/api/api-tools/shop", json=_bundle())
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "API_TOOL_CREDENTIAL_MISSING"
    assert refused.json()["error"]["details"] == {"credentials": ["TOKEN"]}
    assert not (tmp_path / "api-tools" / "shop.json").exists()
    store.set("TOKEN", "value")
    assert client.put("/api/api-tools/shop", json=_bundle()).status_code == 201
    assert service.resolve("api__shop__get_item") is not None


def test_a_credential_of_another_scope_is_refused_for_a_global_service() -> None:
    class Personal(SecretView):
        def scope_of(self, name: str) -> Any:
            return "personal"

    bundle = parse_bundle(_bundle())
    with pytest.raises(Conflict) as info:
        check_credentials(bundle, Personal(None, {"TOKEN": "v"}))
    assert info.value.code == "API_TOOL_CREDENTIAL_SCOPE"


def test_delete_tombstones_unregisters_and_saving_again_restores(tmp_path: Path) -> None:
    client, service, api_tools, store = _app(tmp_path)
    store.set("TOKEN", "value")
    assert client.put("/api/api-tools/shop", json=_bundle()).status_code == 201
    deleted = _delete(client, "/api/api-tools/shop")
    assert deleted.status_code == 200
    assert deleted.json() == {"ok": True, "deleted": "shop", "tools": ["api__shop__get_item"]}
    assert service.resolve("api__shop__get_item") is None
    assert client.get("/api/api-tools").json()["services"] == []
    assert client.get("/api/api-tools/shop").status_code == 404
    assert len(api_tools.store.history("shop")) == 1
    assert service.egress.declared().get("api:shop") is None
    again = _delete(client, "/api/api-tools/shop")
    assert (again.status_code, again.json()["error"]["code"]) == (404, "API_BUNDLE_NOT_FOUND")
    assert client.put("/api/api-tools/shop", json=_bundle()).status_code == 201
    assert service.resolve("api__shop__get_item") is not None
    # A restart registers the live file only, never a tombstone.
    _, restarted, _, _ = _app(tmp_path)
    assert restarted.resolve("api__shop__get_item") is not None


def _call(service: RegistryService, name: str, arguments: dict[str, Any], rid: str) -> Any:
    body = {"type": "portos_tool_call", "requestId": rid, "name": name, "arguments": arguments}
    return asyncio.run(service.call(body, WRITER))


def test_the_meta_tools_are_never_covered_by_a_standing_approval(tmp_path: Path) -> None:
    _, service, _, _ = _app(tmp_path)
    for name, arguments in (
        ("api_tools_save", {"bundle": _bundle()}),
        ("api_tools_delete", {"service": "shop"}),
    ):
        result = _call(service, name, arguments, f"r-{name}")
        assert result["state"] == "denied"
        assert result["error"]["code"] == "TOOL_APPROVAL_REQUIRED"
    entry = service.resolve("api_tools_save")
    assert entry is not None
    assert (entry.policy.risk, entry.policy.confirmation) == ("critical", "required")
    assert entry.policy.requiredCapabilities == ["api.write"]


def test_the_read_tools_list_and_get_bundles_by_name_without_values(tmp_path: Path) -> None:
    _, service, api_tools, store = _app(tmp_path)
    store.set("TOKEN", "never-shown-value")
    api_tools.save(parse_bundle(_bundle()))
    listed = _call(service, "api_tools_list", {}, "r-list")
    assert listed["result"]["services"][0]["credentials"] == ["TOKEN"]
    got = _call(service, "api_tools_get", {"service": "shop"}, "r-get")
    assert got["result"]["bundle"]["name"] == "shop"
    missing = _call(service, "api_tools_get", {"service": "nope"}, "r-missing")
    assert missing["error"]["code"] == "API_BUNDLE_NOT_FOUND"
    assert "never-shown-value" not in repr((listed, got, missing))
