"""GET /api/agent-context/manifest over a real socket: profile, scopes, grants, limits,
exclusions and the context tools' schemas; with MCP disabled, no semantic tool is
advertised and the context tools read as inactive (the spec's finding 5)."""

from __future__ import annotations

from typing import Any

import httpx

from doraforge.registry.context.service import ContextService
from doraforge.registry.settings import ServerSettings
from tests.registry.context.fake_sources import cell, context_app
from tests.registry.server_support import running
from tests.support.context_tools import CONTEXT_TOOLS

READ = frozenset({"robot.read"})


def _manifest(settings: ServerSettings, **options: Any) -> dict[str, Any]:
    with running(context_app(settings, **options)) as url:
        answer = httpx.get(f"{url}/api/agent-context/manifest", timeout=10)
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    return body


def test_an_enabled_manifest_reports_profile_scopes_limits_exclusions_and_schemas() -> None:
    settings = ServerSettings(
        grants=READ, mcp_enabled=True, context_scopes=frozenset({"skills", "tasks"})
    )
    manifest = _manifest(settings)
    assert manifest["enabled"] is True
    assert manifest["profile"] == "metadata"
    enabled = {s["name"] for s in manifest["scopes"] if s["enabled"]}
    assert enabled == {"skills", "tasks"}
    assert manifest["grants"] == ["robot.read"]
    context = manifest["limits"]["context"]
    assert (context["maxItems"], context["maxScanItems"], context["maxSummaryChars"]) == (
        25,
        1_000,
        320,
    )
    assert (context["maxQueryChars"], context["maxResultTokens"]) == (200, 5_000)
    assert manifest["limits"]["maxBatchMessages"] == 32
    assert manifest["batchProtocolVersions"] == ["2025-03-26"]
    assert {"credentials", "tokens", "paths"} <= {e["id"] for e in manifest["exclusions"]}
    assert manifest["semanticToolsActive"] is True
    assert {t["name"] for t in manifest["tools"]} == {"demo_echo", "demo_big", "demo_fail"}
    advertised = {t["name"]: t for t in manifest["contextTools"]}
    assert set(advertised) == CONTEXT_TOOLS
    assert all(t["active"] is True for t in advertised.values())
    # The same schemas tools/list advertises: one source, the validating models.
    definitions = {d["name"]: d for d in ContextService(cell()).tool_definitions()}
    for name, tool in advertised.items():
        assert tool["inputSchema"] == definitions[name]["inputSchema"]
        assert tool["outputSchema"] == definitions[name]["outputSchema"]
    assert "note" not in manifest


def test_a_disabled_manifest_suppresses_semantic_tools_and_marks_context_tools_inactive() -> None:
    manifest = _manifest(ServerSettings(grants=READ, mcp_enabled=False))
    assert manifest["enabled"] is False
    assert manifest["tools"] == []
    assert manifest["semanticToolsActive"] is False
    assert "disabled" in manifest["note"]
    assert manifest["grants"] == ["robot.read"]  # the configured grant, inspectable as such
    assert {t["name"] for t in manifest["contextTools"]} == CONTEXT_TOOLS
    assert all(t["active"] is False for t in manifest["contextTools"])
    assert manifest["exclusions"]
    assert manifest["profile"] == "metadata"


def test_without_sources_the_context_tools_are_inspectable_but_inactive() -> None:
    manifest = _manifest(ServerSettings(grants=READ, mcp_enabled=True), sources={})
    assert all(t["active"] is False for t in manifest["contextTools"])
    assert all(s["available"] is False for s in manifest["scopes"])
    assert manifest["semanticToolsActive"] is True


def test_the_manifest_matches_what_tools_list_offers() -> None:
    settings = ServerSettings(grants=READ, mcp_enabled=True)
    headers = {"accept": "application/json, text/event-stream"}
    with running(context_app(settings)) as url:
        manifest = httpx.get(f"{url}/api/agent-context/manifest", timeout=10).json()
        listed = httpx.post(
            f"{url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers=headers,
            timeout=10,
        ).json()["result"]["tools"]
    offered = [{k: v for k, v in t.items() if k != "active"} for t in manifest["contextTools"]]
    assert listed == offered + manifest["tools"]
