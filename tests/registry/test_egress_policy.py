"""The egress policy on its own: off by default, fail-closed when enabled and empty, allow_any,
overlays per principal, hosts declared and retracted by sources, host spellings, persistence
and bad input."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from doraforge.registry.audit import AuditLog
from doraforge.registry.egress import (
    ALLOW_ROUTE,
    EgressPolicy,
    EgressSettings,
    PrincipalEgress,
    egress_host,
    parse_egress,
)
from doraforge.registry.errors import InvalidRequest, ToolFailure, Unprocessable
from doraforge.registry.model import Principal

UI = Principal(id="doraforge-ui", scope="ui")
AGENT = Principal(id="doraforge-agent", scope="agent")


def _policy(**settings: object) -> EgressPolicy:
    return EgressPolicy(EgressSettings.model_validate(settings))


def test_egress_is_off_by_default_for_every_principal() -> None:
    policy = EgressPolicy()
    assert not policy.enabled
    assert not policy.allows("api.example.com", UI)
    assert not policy.allows("api.example.com", AGENT)
    assert not policy.allows("api.example.com")


def test_hosts_listed_while_egress_is_off_stay_refused() -> None:
    policy = _policy(hosts=["api.example.com"])
    assert not policy.allows("api.example.com", UI)


def test_enabled_with_an_empty_allowlist_denies_every_host() -> None:
    policy = _policy(enabled=True)
    assert policy.enabled
    assert not policy.allows("api.example.com", UI)
    assert not policy.allows("127.0.0.1", AGENT)


def test_enabled_allowlist_passes_only_its_hosts() -> None:
    policy = _policy(enabled=True, hosts=["API.Example.com"])
    assert policy.allows("api.example.com", UI)
    assert policy.allows("api.example.com.", UI)  # the trailing dot names the same host
    assert not policy.allows("evil.example.com", UI)
    assert not policy.allows("example.com", UI)


def test_allow_any_opens_every_host_only_where_egress_is_enabled() -> None:
    policy = _policy(
        enabled=False, allow_any=True, principals={"agent": PrincipalEgress(enabled=True)}
    )
    assert policy.allows("anything.example.org", AGENT)
    assert not policy.allows("anything.example.org", UI)
    assert policy.effective("agent")["allow_any"] is True
    assert policy.effective("ui")["allow_any"] is False


def test_each_principal_overlays_the_base() -> None:
    policy = _policy(
        enabled=True,
        hosts=["shared.example.com"],
        principals={
            "agent": {"hosts": ["agent.example.com"]},
            "ui": {"enabled": False},
        },
    )
    assert policy.allows("shared.example.com", AGENT)
    assert policy.allows("agent.example.com", AGENT)
    assert not policy.allows("agent.example.com", Principal(id="x", scope="voice"))
    assert not policy.allows("shared.example.com", UI)  # switched off for ui alone
    assert policy.allows("shared.example.com", "voice")  # a key is a principal too


def test_an_overlay_can_switch_egress_on_for_one_principal() -> None:
    policy = _policy(principals={"ui": {"enabled": True, "hosts": ["ui.example.com"]}})
    assert policy.allows("ui.example.com", UI)
    assert not policy.allows("ui.example.com", AGENT)
    assert not policy.allows("ui.example.com")  # no principal: the base alone


def test_a_declared_host_is_reachable_until_its_source_is_retracted() -> None:
    policy = EgressPolicy()
    weather = ("api-tools:weather",)
    assert policy.declare("api-tools:weather", ["api.weather.example"]) == ["api.weather.example"]
    assert policy.allows("api.weather.example", UI, sources=weather)
    assert policy.allows("api.weather.example", AGENT, sources=weather)
    assert policy.declared() == {"api-tools:weather": ["api.weather.example"]}
    assert policy.retract("api-tools:weather") is True
    assert not policy.allows("api.weather.example", UI, sources=weather)
    assert policy.retract("api-tools:weather") is False  # nothing left to retract


def test_a_replaced_source_loses_its_old_host() -> None:
    policy = EgressPolicy()
    weather = ("api-tools:weather",)
    policy.declare("api-tools:weather", ["old.weather.example"])
    policy.declare("api-tools:weather", ["new.weather.example"])
    assert not policy.allows("old.weather.example", UI, sources=weather)
    assert policy.allows("new.weather.example", UI, sources=weather)
    policy.declare("api-tools:weather", [])  # an empty declaration retracts
    assert policy.declared() == {}


def test_a_declared_host_serves_its_own_source_only() -> None:
    policy = EgressPolicy()
    policy.declare("api-tools:a", ["shared.example.com"])
    policy.declare("mcp:fetcher", ["shared.example.com", "only-mcp.example.com"])
    assert policy.declared_by("shared.example.com") == ["api-tools:a", "mcp:fetcher"]
    assert policy.allows("only-mcp.example.com", UI, sources=("mcp:fetcher",))
    assert not policy.allows("only-mcp.example.com", UI, sources=("api-tools:a",))
    assert not policy.allows("shared.example.com", UI)  # no source: the operator's alone
    policy.retract("api-tools:a")
    assert not policy.allows("shared.example.com", UI, sources=("api-tools:a",))
    assert policy.allows("shared.example.com", UI, sources=("mcp:fetcher",))


def test_a_declared_origin_covers_its_own_port_only() -> None:
    policy = EgressPolicy()
    bundle = ("api:public",)
    assert policy.declare("api:public", ["HTTP://127.0.0.1:20900", "https://api.example.com"]) == [
        "http://127.0.0.1:20900",
        "https://api.example.com:443",
    ]
    assert policy.allows("127.0.0.1:20900", AGENT, sources=bundle)
    assert policy.allows("api.example.com:443", AGENT, sources=bundle)
    assert not policy.allows("127.0.0.1:20901", AGENT, sources=bundle)
    assert not policy.allows("127.0.0.1", AGENT, sources=bundle)  # every port: not declared
    assert policy.declared_by("127.0.0.1") == ["api:public"]  # the host, on some port
    assert policy.declared_by("127.0.0.1:20901") == []
    with pytest.raises(ValueError, match="http:// or https://"):
        policy.declare("api:public", ["ftp://127.0.0.1:21"])


def test_a_port_less_entry_covers_every_port_and_a_port_only_its_own() -> None:
    policy = _policy(enabled=True, hosts=["api.example.com", "127.0.0.1:8080", "[::1]:9000"])
    assert policy.allows("api.example.com:8443", UI)
    assert policy.allows("127.0.0.1:8080", UI)
    assert not policy.allows("127.0.0.1", UI)  # any port is wider than the one allowed
    assert not policy.allows("127.0.0.1:8081", UI)
    assert policy.allows("[::1]:9000", UI)
    assert not policy.allows("::1", UI)


def test_numeric_spellings_fold_to_one_address() -> None:
    assert egress_host("0177.0.0.1") == "127.0.0.1"
    assert egress_host("::1") == "[::1]"
    assert egress_host("[::ffff:10.0.0.1]:80") == "10.0.0.1:80"
    policy = _policy(enabled=True, hosts=["127.0.0.1"])
    assert policy.allows("127.1", UI)
    assert policy.allows("2130706433", UI)


@pytest.mark.parametrize(
    "text",
    [
        "https://api.example.com",
        "api.example.com/v1",
        "*.example.com",
        "10.0.0.0/8",
        "",
        "   ",
        "api.example.com:0",
        "api.example.com:99999",
        "bad host",
        "exa mple.com",
        "[::1",
    ],
)
def test_a_host_that_is_not_bare_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="host"):
        egress_host(text)
    with pytest.raises(InvalidRequest) as info:
        parse_egress({"hosts": [text]})
    assert info.value.code == "EGRESS_INVALID"
    assert info.value.message.startswith("egress.hosts")
    assert not EgressPolicy().allows(text, UI)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"enabled": "true"}, "egress.enabled"),
        ({"allow_any": 1}, "egress.allow_any"),
        ({"hosts": "api.example.com"}, "egress.hosts"),
        ({"principals": {"robot": {}}}, "egress.principals.robot"),
        ({"principals": {"ui": {"enabled": True, "extra": 1}}}, "egress.principals.ui.extra"),
        ({"allowlist": []}, "egress.allowlist"),
    ],
)
def test_bad_settings_name_the_field(document: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_egress(document)
    assert info.value.message.startswith(f"{field}:")
    assert info.value.details["field"].startswith(field)
    assert "\n" not in info.value.message


def test_bad_source_ids_and_hosts_change_nothing() -> None:
    policy = EgressPolicy()
    with pytest.raises(ValueError, match="source id"):
        policy.declare("", ["api.example.com"])
    with pytest.raises(ValueError, match="not a bare host"):
        policy.declare("api-tools:x", ["api.example.com", "https://evil.example/path"])
    assert policy.declared() == {}


def test_the_denial_names_the_host_principal_and_route() -> None:
    denial = _policy(enabled=True).denial("api.example.com", UI, what="net.fetch")
    assert denial["code"] == "TOOL_EGRESS_DENIED"
    assert denial["details"] == {"host": "api.example.com", "principal": "ui", "route": ALLOW_ROUTE}
    assert f"POST {ALLOW_ROUTE}" in denial["message"]
    assert "not on the egress allowlist" in denial["message"]
    off = EgressPolicy().denial("api.example.com", AGENT, what="net.fetch")
    assert "egress is off for principal 'agent'" in off["message"]


def test_an_adapter_check_raises_a_tool_failure_pointing_at_the_route() -> None:
    policy = EgressPolicy()
    with pytest.raises(ToolFailure) as info:
        policy.check("api.example.com", UI, what="http_fetch")
    assert info.value.code == "TOOL_EGRESS_DENIED"
    assert info.value.details["route"] == ALLOW_ROUTE
    policy.allow("api.example.com", "ui", by="test")
    policy.check("api.example.com", UI, what="http_fetch")  # allowed now: no raise


def test_allow_switches_egress_on_and_appends_the_host() -> None:
    policy = EgressPolicy()
    policy.allow("api.example.com", by="op")
    policy.allow("api.example.com", by="op")  # idempotent
    assert policy.operator.enabled
    assert policy.operator.hosts == ("api.example.com",)
    policy.allow("ui.example.com", "ui", by="op")
    assert policy.allows("ui.example.com", UI)
    assert not policy.allows("ui.example.com", AGENT)


def test_remove_takes_a_host_off_everywhere_or_off_one_overlay() -> None:
    policy = _policy(
        enabled=True,
        hosts=["a.example.com"],
        principals={
            "ui": {"hosts": ["a.example.com", "b.example.com"]},
            "agent": {"hosts": ["b.example.com"]},
        },
    )
    policy.remove("b.example.com", "ui", by="op")
    assert not policy.allows("b.example.com", UI)
    assert policy.allows("b.example.com", AGENT)
    policy.remove("a.example.com", by="op")
    assert not policy.allows("a.example.com", UI)
    assert not policy.allows("a.example.com", AGENT)
    with pytest.raises(LookupError):
        policy.remove("a.example.com", by="op")
    with pytest.raises(InvalidRequest):
        policy.allow("api.example.com", "robot", by="op")


def test_operator_changes_persist_and_load_at_the_next_start(tmp_path: Path) -> None:
    path = tmp_path / "home" / "egress.json"
    first = EgressPolicy(EgressSettings(), path=path)
    assert not path.exists()  # starting writes nothing
    first.allow("api.example.com", "agent", by="op")
    first.declare("api-tools:x", ["declared.example.com"])
    saved = json.loads(path.read_text())
    assert saved["version"] == 1
    assert saved["egress"]["principals"]["agent"] == {"enabled": True, "hosts": ["api.example.com"]}
    assert "declared.example.com" not in path.read_text()  # sources re-declare at start
    # The saved operator part replaces the config's at the next start.
    second = EgressPolicy(EgressSettings(enabled=True, hosts=("config.example.com",)), path=path)
    assert second.snapshot()["origin"] == "file"
    assert second.allows("api.example.com", AGENT)
    assert not second.allows("config.example.com", AGENT)
    assert not second.allows("declared.example.com", AGENT)
    assert [p.name for p in path.parent.iterdir()] == ["egress.json"]  # no temporaries left


def test_a_corrupt_saved_policy_refuses_to_start(tmp_path: Path) -> None:
    path = tmp_path / "egress.json"
    path.write_text('{"version": 1, "egress": {"enabled": "yes"}}')
    with pytest.raises(Unprocessable) as info:
        EgressPolicy(EgressSettings(), path=path)
    assert info.value.code == "EGRESS_FILE_INVALID"
    assert "egress.enabled" in info.value.message
    assert str(path) in info.value.message
    path.write_text("{not json")
    with pytest.raises(Unprocessable):
        EgressPolicy(EgressSettings(), path=path)


def test_every_change_is_audited() -> None:
    audit = AuditLog()
    policy = EgressPolicy(audit=audit)
    policy.declare("api-tools:x", ["x.example.com"])
    policy.declare("api-tools:x", ["x.example.com"])  # unchanged: not a change
    policy.allow("api.example.com", "ui", by="doraforge-operator")
    policy.remove("api.example.com", by="doraforge-operator")
    policy.retract("api-tools:x")
    names = [record["name"] for record in audit.records()]
    assert names == [
        "egress.declare api-tools:x: x.example.com",
        "egress.operator allow api.example.com for ui",
        "egress.operator remove api.example.com from (all)",
        "egress.retract api-tools:x",
    ]
    assert audit.records()[1]["principal"] == "doraforge-operator"


def test_concurrent_changes_are_not_lost() -> None:
    policy = EgressPolicy()

    def allow(worker: int) -> None:
        for index in range(50):
            policy.allow(f"h{worker}-{index}.example.com", "agent", by="op")
            policy.declare(f"src:{worker}-{index}", [f"d{worker}-{index}.example.com"])

    threads = [threading.Thread(target=allow, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(policy.operator.principals["agent"].hosts) == 200
    assert len(policy.declared()) == 200
