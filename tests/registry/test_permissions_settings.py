"""Permissions granted in the serve config per principal: ``type:scope`` strings become the
principal's held permissions, so the permission gate passes for the principal that holds
them and denies the one that does not; a malformed entry is refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.registry.http import server_principal
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings, SettingsError, load_settings
from tests.registry.server_support import call_body, running
from tests.registry.test_core_support import CountingAdapter, entry

NETWORK_TOOL = entry(
    "net.lookup",
    policy={"permissions": [{"type": "network", "scope": "lan"}]},
)


def test_permissions_are_parsed_into_pairs_per_principal() -> None:
    settings = ServerSettings.model_validate(
        {"permissions": {"agent": ["network:*", "fs.read:/data", "fs.read:/data"], "ui": []}}
    )
    assert settings.permissions_of("agent") == {("network", "*"), ("fs.read", "/data")}
    assert settings.permissions_of("ui") == frozenset()
    assert settings.permissions_of("voice") == frozenset()


def test_the_server_principal_holds_its_scopes_permissions() -> None:
    settings = ServerSettings.model_validate({"permissions": {"agent": ["network:*"]}})
    service = new_service(settings)
    agent = server_principal(service, settings, scope="agent", authenticated=False)
    ui = server_principal(service, settings, scope="ui", authenticated=False)
    assert agent.permissions == {("network", "*")}
    assert ui.permissions == frozenset()


@pytest.mark.parametrize(
    ("permissions", "needle"),
    [
        ({"agent": ["network"]}, "agent[0]"),
        ({"agent": ["network:"]}, "agent[0]"),
        ({"agent": ["Network:*"]}, "agent[0]"),
        ({"agent": ["network:*", "fs read:/x"]}, "agent[1]"),
        ({"agent": "network:*"}, "permissions.agent"),
        ({"robot": ["network:*"]}, "permissions.robot"),
    ],
)
def test_a_malformed_permission_is_refused_naming_it(
    tmp_path: Path, permissions: dict[str, object], needle: str
) -> None:
    config = tmp_path / "serve.json"
    config.write_text(json.dumps({"permissions": permissions}))
    with pytest.raises(SettingsError) as info:
        load_settings(config=config)
    message = str(info.value)
    assert message.startswith(f"{config}: permissions")
    assert needle in message
    assert "\n" not in message


def test_egress_and_permissions_load_from_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(
        "egress:\n"
        "  enabled: true\n"
        "  hosts: [API.example.com]\n"
        "  principals:\n"
        "    agent: {enabled: true, hosts: ['127.0.0.1:8080']}\n"
        "    ui: {enabled: false}\n"
        "permissions:\n"
        "  agent: ['network:*']\n"
    )
    settings = load_settings(config=config)
    assert settings.egress.enabled
    assert settings.egress.hosts == ("api.example.com",)
    assert settings.egress.principals["agent"].hosts == ("127.0.0.1:8080",)
    assert settings.egress.principals["ui"].enabled is False
    assert settings.permissions_of("agent") == {("network", "*")}


def test_a_bad_egress_section_is_refused_naming_the_field(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("egress:\n  enabled: true\n  hosts: ['https://api.example.com/x']\n")
    with pytest.raises(SettingsError) as info:
        load_settings(config=config)
    message = str(info.value)
    assert message.startswith(f"{config}: egress.hosts")
    assert "bare host" in message
    config.write_text("egress:\n  enabled: yes please\n")
    with pytest.raises(SettingsError, match=r"egress\.enabled"):
        load_settings(config=config)


@pytest.mark.anyio
async def test_the_agent_holds_network_over_mcp_and_ui_over_http_does_not() -> None:
    """agent holds network:*, ui does not: the same tool completes for the agent over MCP
    (the official SDK client) and is denied TOOL_PERMISSION_DENIED for ui over HTTP."""
    settings = ServerSettings.model_validate(
        {"mcp_enabled": True, "permissions": {"agent": ["network:*"]}}
    )
    service = new_service(settings)
    adapter = CountingAdapter()
    service.register(NETWORK_TOOL, adapter)
    with running(build_app(service, settings)) as url:
        async with (
            streamable_http_client(f"{url}/mcp") as (read, write, _session_id),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            agent = await session.call_tool("net_lookup", {"query": "q"})
        body = call_body("net.lookup", {"query": "q"}, request_id="ui-1")
        async with httpx.AsyncClient(timeout=10) as client:
            answer = await client.post(f"{url}/api/tools/call", json=body)
    assert agent.isError is False
    assert agent.structuredContent == {"echo": {"query": "q"}}
    assert answer.status_code == 403
    result = answer.json()
    assert result["state"] == "denied"
    assert result["error"]["code"] == "TOOL_PERMISSION_DENIED"
    assert result["error"]["details"]["missing"] == [{"type": "network", "scope": "lan"}]
    assert adapter.calls == [{"query": "q"}]  # the agent's call alone ran
