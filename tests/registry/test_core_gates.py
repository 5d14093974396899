"""Gate order, each gate's denial, schema-driven repair, timeout and output validation."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from doraforge.registry.errors import ToolFailure
from doraforge.registry.model import Principal
from doraforge.registry.service import RegistryService
from tests.registry.test_core_support import (
    AGENT,
    CountingAdapter,
    call,
    entry,
    service_with_search,
)
from tests.support.clock import FakeClock
from tests.support.waiting import eventually_async, settle

pytestmark = pytest.mark.anyio

GUARDED = entry(
    "robot.move",
    policy={
        "sideEffect": "write",
        "idempotent": False,
        "risk": "high",
        "requiredCapabilities": ["robot.write"],
        "permissions": [{"type": "network", "scope": "lan"}],
        "egressHosts": ["robot.local"],
    },
)
FULL = Principal(
    id="operator",
    scope="agent",
    grants=frozenset({"robot.write"}),
    permissions=frozenset({("network", "*")}),
    approvals=frozenset({"robot.move"}),
    authenticated=True,
)


def _guarded(**kwargs: Any) -> tuple[RegistryService, CountingAdapter]:
    service = RegistryService(egress_allowlist=frozenset({"robot.local"}), **kwargs)
    adapter = CountingAdapter()
    service.register(GUARDED, adapter)
    return service, adapter


async def _code(service: RegistryService, principal: Principal, **arguments: Any) -> str:
    result = await service.call(
        call(f"r{time.perf_counter_ns()}", "robot.move", **arguments), principal
    )
    code: str = result["error"]["code"] if "error" in result else result["state"]
    return code


async def test_all_gates_pass_for_a_fully_authorised_caller() -> None:
    service, adapter = _guarded(require_auth_for_writes=True)
    assert await _code(service, FULL, query="q") == "completed"
    assert adapter.calls == [{"query": "q"}]


async def test_a_call_failing_several_gates_reports_the_first() -> None:
    service, adapter = _guarded(require_auth_for_writes=True)
    nobody = Principal(id="n", scope="agent")
    version = await service.call(
        {"requestId": "v", "name": "robot.move", "version": 9, "arguments": {}}, nobody
    )
    assert version["error"]["code"] == "TOOL_VERSION_MISMATCH"
    steps = [
        (nobody, "TOOL_APPROVAL_REQUIRED"),
        (Principal(id="a", scope="agent", approvals=FULL.approvals), "TOOL_CAPABILITY_DENIED"),
        (
            Principal(id="a", scope="agent", approvals=FULL.approvals, grants=FULL.grants),
            "TOOL_AUTH_REQUIRED",
        ),
        (
            Principal(
                id="a",
                scope="agent",
                approvals=FULL.approvals,
                grants=FULL.grants,
                authenticated=True,
            ),
            "TOOL_PERMISSION_DENIED",
        ),
        (FULL, "TOOL_INVALID_ARGUMENTS"),
    ]
    for principal, expected in steps:
        assert await _code(service, principal, wrong=1, other=2) == expected
    assert adapter.calls == []


async def test_egress_gate_follows_input_validation() -> None:
    service = RegistryService()  # empty allowlist denies every declared host
    adapter = CountingAdapter()
    service.register(GUARDED, adapter)
    assert await _code(service, FULL, wrong=1, other=2) == "TOOL_INVALID_ARGUMENTS"
    result = await service.call(call("e", "robot.move", query="q"), FULL)
    assert result["state"] == "denied"
    assert result["error"]["code"] == "TOOL_EGRESS_DENIED"
    assert result["error"]["details"]["hosts"] == ["robot.local"]
    assert adapter.calls == []


async def test_tool_outside_the_callers_scope_is_denied() -> None:
    service, adapter = _guarded()
    ui_only = Principal(**{**FULL.__dict__, "scope": "mind"})
    assert await _code(service, ui_only, query="q") == "TOOL_CAPABILITY_DENIED"
    assert adapter.calls == []


async def test_wildcard_and_exact_permission_both_satisfy() -> None:
    service, _ = _guarded()
    exact = Principal(**{**FULL.__dict__, "permissions": frozenset({("network", "lan")})})
    wrong = Principal(**{**FULL.__dict__, "permissions": frozenset({("network", "wan")})})
    assert await _code(service, exact, query="q") == "completed"
    assert await _code(service, wrong, query="q") == "TOOL_PERMISSION_DENIED"


async def test_writes_without_auth_pass_when_the_service_does_not_require_it() -> None:
    service, _ = _guarded()
    anonymous = Principal(**{**FULL.__dict__, "authenticated": False})
    assert await _code(service, anonymous, query="q") == "completed"


@pytest.mark.parametrize(
    ("arguments", "expected", "kinds"),
    [
        ({"input": "q"}, {"query": "q"}, ["rename"]),
        ({"query": "q", "limt": 3}, {"query": "q", "limit": 3}, ["rename"]),
        ({"query": "q", "tags": "t"}, {"query": "q", "tags": ["t"]}, ["coerce"]),
        ({"query": "q", "limit": "7"}, {"query": "q", "limit": 7}, ["coerce"]),
        ({"query": "q", "exact": "false"}, {"query": "q", "exact": False}, ["coerce"]),
        ({"query": 42}, {"query": "42"}, ["coerce"]),
        ({"query": "q", "limit": 99}, {"query": "q", "limit": 25}, ["clamp"]),
        ({"query": "q", "limit": -3}, {"query": "q", "limit": 1}, ["clamp"]),
        ({"query": "q", "limit": "40"}, {"query": "q", "limit": 25}, ["coerce", "clamp"]),
    ],
)
async def test_repair_fixes_near_misses_and_reports_them(
    arguments: dict[str, Any], expected: dict[str, Any], kinds: list[str]
) -> None:
    service = RegistryService()
    adapter = CountingAdapter()
    service.register(entry(), adapter)
    result = await service.call(call("r", **arguments), AGENT)
    assert result["state"] == "completed"
    assert adapter.calls == [expected]
    assert [r["kind"] for r in result["repairs"]] == kinds


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "q", "mode": "sideways"},
        {"query": "q", "limit": "many"},
        {"query": "q", "a": 1, "b": 2},
        {"query": "q", "zzzz": 1},
        {},
    ],
)
async def test_unrepairable_arguments_are_denied_with_parameters_and_enums(
    arguments: dict[str, Any],
) -> None:
    service = RegistryService()
    adapter = CountingAdapter()
    service.register(entry(), adapter)
    result = await service.call(call("r", **arguments), AGENT)
    assert result["state"] == "denied"
    error = result["error"]
    assert error["code"] == "TOOL_INVALID_ARGUMENTS"
    assert set(error["details"]["parameters"]) == {"query", "limit", "tags", "exact", "mode"}
    assert error["details"]["parameters"]["mode"]["enum"] == ["fast", "deep"]
    assert error["details"]["required"] == ["query"]
    assert error["details"]["errors"]
    assert adapter.calls == []


@pytest.mark.parametrize(("side_effect", "retryable"), [("read", True), ("write", False)])
async def test_timeout_returns_at_the_deadline(side_effect: str, retryable: bool) -> None:
    clock = FakeClock()
    service = RegistryService(deadline=clock.timeout)
    entered, cancelled = asyncio.Event(), asyncio.Event()

    async def stuck(arguments: dict[str, Any]) -> dict[str, Any]:
        entered.set()
        try:
            await asyncio.Event().wait()  # never set: only the deadline ends this call
        finally:
            cancelled.set()
        return {}

    service.register(
        entry(policy={"timeoutMs": 200, "sideEffect": side_effect, "idempotent": False}), stuck
    )
    calling = asyncio.create_task(service.call(call("t", query="q"), AGENT))
    await eventually_async(entered.is_set, what="the adapter to run")
    assert clock.requested == [0.2]
    clock.advance(0.199)
    await settle()
    assert not calling.done()  # a millisecond before the deadline the call still runs
    clock.advance(0.001)
    result = await asyncio.wait_for(calling, timeout=5)
    assert result["state"] == "timeout"
    assert result["error"]["code"] == "TOOL_TIMEOUT"
    assert result["error"]["retryable"] is retryable
    assert cancelled.is_set()


async def test_without_an_injected_clock_the_deadline_runs_on_the_event_loop() -> None:
    service = RegistryService()

    async def stuck(arguments: dict[str, Any]) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    service.register(entry(policy={"timeoutMs": 1}), stuck)
    result = await asyncio.wait_for(service.call(call("t", query="q"), AGENT), timeout=5)
    assert result["state"] == "timeout"
    assert result["error"]["details"] == {"timeoutMs": 1, "remoteState": "none"}


async def test_adapter_failures_become_failed_results() -> None:
    service = RegistryService()

    async def refuses(arguments: dict[str, Any]) -> dict[str, Any]:
        raise ToolFailure("ROBOT_BUSY", "arm is moving", retryable=True, details={"x": 1})

    async def crashes(arguments: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("secret-internal-detail")

    service.register(entry("robot.a"), refuses)
    service.register(entry("robot.b"), crashes)
    refused = await service.call(call("1", "robot.a", query="q"), AGENT)
    crashed = await service.call(call("2", "robot.b", query="q"), AGENT)
    assert refused["state"] == "failed"
    assert refused["error"] == {
        "code": "ROBOT_BUSY",
        "message": "arm is moving",
        "retryable": True,
        "details": {"x": 1},
    }
    assert crashed["state"] == "failed"
    assert crashed["error"]["code"] == "TOOL_ADAPTER_ERROR"
    assert "secret-internal-detail" not in str(crashed)


@pytest.mark.parametrize("bad", [["not", "an", "object"], {"count": "x"}, {"f": {1, 2}}])
async def test_output_that_breaks_the_output_schema_is_failed(bad: Any) -> None:
    service = RegistryService()

    async def wrong(arguments: dict[str, Any]) -> Any:
        return bad

    output_schema = {"type": "object", "properties": {"count": {"type": "integer"}}}
    service.register(entry(output_schema=output_schema), wrong)
    result = await service.call(call("o", query="q"), AGENT)
    assert result["state"] == "failed"
    assert result["error"]["code"] == "TOOL_OUTPUT_INVALID"
    assert "result" not in result


async def test_a_tool_whose_risk_is_unstated_is_high_and_needs_an_approval() -> None:
    unstated = entry("brain.unverified")
    del unstated["policy"]["risk"]
    service = RegistryService()
    adapter = CountingAdapter()
    registered = service.register(unstated, adapter)
    assert registered.policy.risk == "high"
    refused = await service.call(call("u1", "brain.unverified", query="q"), AGENT)
    assert refused["error"]["code"] == "TOOL_APPROVAL_REQUIRED"
    approved = Principal(id="a", scope="agent", approvals=frozenset({"brain.unverified"}))
    ran = await service.call(call("u2", "brain.unverified", query="q"), approved)
    assert ran["state"] == "completed"
    assert adapter.calls == [{"query": "q"}]


async def test_a_misspelled_tool_name_is_denied_offering_the_closest_name() -> None:
    service, adapter = service_with_search()
    answer = await service.call(call("typo", "brain.serch", query="q"), AGENT)
    assert answer["error"]["code"] == "TOOL_NOT_FOUND"
    assert answer["error"]["message"] == (
        "no tool named 'brain.serch'; did you mean 'brain_search'?"
    )
    # The closest of any name a tool answers to, offered by the name tools/list shows.
    assert answer["error"]["details"]["suggestions"] == ["brain_search"]
    assert adapter.calls == []


async def test_a_missing_argument_is_denied_naming_its_path_and_expected_type() -> None:
    service, adapter = service_with_search()
    answer = await service.call(call("missing-arg", limit=3), AGENT)
    assert answer["error"]["code"] == "TOOL_INVALID_ARGUMENTS"
    assert answer["error"]["message"] == (
        "arguments do not match brain_search's input schema: $.query: "
        "'query' is a required property; expected string"
    )
    assert adapter.calls == []
