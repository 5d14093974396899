"""The egress gate through ``RegistryService.call``: a tool declaring ``egressHosts`` runs only
where the live policy allows its hosts for the caller's principal, and a refusal names the
host, the principal and the operator route."""

from __future__ import annotations

import pytest

from doraforge.registry.egress import ALLOW_ROUTE, EgressSettings
from doraforge.registry.model import Principal
from doraforge.registry.service import RegistryService
from tests.registry.test_core_support import CountingAdapter, call, entry

pytestmark = pytest.mark.anyio

FETCH = entry("net.fetch", policy={"egressHosts": ["api.example.com", "cdn.example.com:8443"]})
UI = Principal(id="doraforge-ui", scope="ui")
AGENT = Principal(id="doraforge-agent", scope="agent")


def _service(
    egress: EgressSettings | None = None, source: str | None = None
) -> tuple[RegistryService, CountingAdapter]:
    service = RegistryService(egress=egress)
    adapter = CountingAdapter()
    service.register(FETCH, adapter, source=source)
    return service, adapter


async def _state(service: RegistryService, principal: Principal, request_id: str) -> str:
    result = await service.call(call(request_id, "net.fetch", query="q"), principal)
    return str(result["state"])


async def test_a_declared_host_is_denied_while_egress_is_off() -> None:
    service, adapter = _service()
    result = await service.call(call("r1", "net.fetch", query="q"), UI)
    assert result["state"] == "denied"
    error = result["error"]
    assert error["code"] == "TOOL_EGRESS_DENIED"
    assert error["details"] == {
        "host": "api.example.com",
        "principal": "ui",
        "route": ALLOW_ROUTE,
        "hosts": ["api.example.com", "cdn.example.com:8443"],
    }
    assert f"POST {ALLOW_ROUTE}" in error["message"]
    assert '"principal": "ui"' in error["message"]
    assert adapter.calls == []


async def test_every_declared_host_must_pass() -> None:
    service, adapter = _service(EgressSettings(enabled=True, hosts=("api.example.com",)))
    result = await service.call(call("r1", "net.fetch", query="q"), UI)
    assert result["error"]["details"]["hosts"] == ["cdn.example.com:8443"]
    service.egress.allow("cdn.example.com", by="test")  # any port of the host
    assert await _state(service, UI, "r2") == "completed"
    assert len(adapter.calls) == 1


async def test_allow_any_passes_every_declared_host() -> None:
    service, _ = _service(EgressSettings(enabled=True, allow_any=True))
    assert await _state(service, AGENT, "r1") == "completed"


async def test_the_callers_principal_picks_its_overlay() -> None:
    overlay = {"agent": {"enabled": True, "hosts": ["api.example.com", "cdn.example.com"]}}
    service, adapter = _service(EgressSettings.model_validate({"principals": overlay}))
    assert await _state(service, AGENT, "r1") == "completed"
    assert await _state(service, UI, "r2") == "denied"
    assert len(adapter.calls) == 1


async def test_policy_changes_apply_to_the_next_call() -> None:
    service, _ = _service(source="mcp:fetcher")
    assert await _state(service, UI, "r1") == "denied"
    service.egress.declare("mcp:fetcher", ["api.example.com", "cdn.example.com:8443"])
    assert await _state(service, UI, "r2") == "completed"
    service.egress.retract("mcp:fetcher")
    assert await _state(service, UI, "r3") == "denied"


async def test_a_sources_hosts_never_serve_another_sources_tool() -> None:
    service, adapter = _service(source="mcp:other")
    service.egress.declare("mcp:fetcher", ["api.example.com", "cdn.example.com:8443"])
    assert await _state(service, AGENT, "r1") == "denied"
    assert adapter.calls == []


async def test_the_deprecated_allowlist_spellings_still_allow() -> None:
    legacy = RegistryService(egress_allowlist=frozenset({"api.example.com"}))
    legacy.register(FETCH, CountingAdapter())
    legacy.allow_egress(["cdn.example.com:8443"])
    assert await _state(legacy, UI, "r1") == "completed"
