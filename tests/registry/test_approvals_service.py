"""A high-risk call through the service waits for an operator: approved it runs once,
denied or unanswered it is a ``denied`` result, a caller that leaves withdraws it, retries
share it, and no approval ever releases another call."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from doraforge.registry.approvals import ApprovalStore
from doraforge.registry.audit import AuditLog
from doraforge.registry.model import Principal
from doraforge.registry.service import RegistryService, ToolResult
from tests.registry.test_core_support import CountingAdapter, call, entry
from tests.support.clock import FakeClock
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

TIMEOUT_S = 120.0
TOOL = "arm.move"
AGENT = Principal(id="doraforge-agent", scope="agent", grants=frozenset({"robot.write"}))
OPERATOR = "doraforge-ui"


def _risky(**policy: Any) -> dict[str, Any]:
    return entry(
        TOOL,
        policy={
            "sideEffect": "write",
            "idempotent": False,
            "risk": "high",
            "requiredCapabilities": ["robot.write"],
            **policy,
        },
    )


def _service(clock: FakeClock) -> tuple[RegistryService, ApprovalStore, CountingAdapter]:
    audit = AuditLog()
    store = ApprovalStore(
        audit=audit,
        timeout_s=TIMEOUT_S,
        clock=clock,
        wall=lambda: clock.wall_ms() / 1000,
        deadline=clock.timeout,
    )
    service = RegistryService(audit=audit, clock=clock, deadline=clock.timeout, approvals=store)
    adapter = CountingAdapter()
    service.register(_risky(), adapter)
    return service, store, adapter


def _start(service: RegistryService, request_id: str, query: str) -> asyncio.Task[ToolResult]:
    return asyncio.create_task(service.call(call(request_id, TOOL, query=query), AGENT))


async def _pending(store: ApprovalStore, count: int = 1) -> list[dict[str, Any]]:
    def listed() -> list[dict[str, Any]] | None:
        pending = store.approvals("pending")
        return pending if len(pending) == count else None

    return await eventually_async(listed, within=5.0, what=f"{count} pending approval(s)")


async def test_an_approved_call_runs_once_with_the_arguments_the_operator_saw() -> None:
    service, store, adapter = _service(FakeClock())
    waiting = _start(service, "r-1", "pick the cube")
    (record,) = await _pending(store)
    assert record["arguments"] == {"query": "pick the cube"}
    assert record["caller"] == "doraforge-agent"
    assert adapter.calls == []  # nothing runs before the decision
    store.approve(record["id"], "cell is clear", by=OPERATOR)
    result = await waiting
    assert result["state"] == "completed"
    assert adapter.calls == [{"query": "pick the cube"}]
    replay = await service.call(call("r-1", TOOL, query="pick the cube"), AGENT)
    assert replay["duplicate"] is True
    assert adapter.calls == [{"query": "pick the cube"}]  # a replay never re-runs


async def test_a_denied_call_is_a_denied_result_with_the_reason_and_is_audited() -> None:
    service, store, adapter = _service(FakeClock())
    waiting = _start(service, "r-1", "throw the cube")
    (record,) = await _pending(store)
    store.deny(record["id"], "not while people are near", by=OPERATOR)
    result = await waiting
    assert result["state"] == "denied"
    assert result["error"]["code"] == "TOOL_APPROVAL_DENIED"
    assert result["error"]["details"]["reason"] == "not while people are near"
    assert adapter.calls == []
    trail = [(r.get("event"), r.get("state"), r.get("errorCode")) for r in service.audit.records()]
    assert trail == [
        ("requested", None, None),
        ("denied", None, None),
        (None, "denied", "TOOL_APPROVAL_DENIED"),
    ]


async def test_no_decision_in_time_is_denied_approval_timeout() -> None:
    clock = FakeClock()
    service, store, adapter = _service(clock)
    waiting = _start(service, "r-1", "move")
    (record,) = await _pending(store)
    clock.advance(TIMEOUT_S)
    result = await waiting
    assert (result["state"], result["error"]["code"]) == ("denied", "TOOL_APPROVAL_TIMEOUT")
    assert store.get(record["id"])["state"] == "expired"
    assert adapter.calls == []


async def test_approving_one_call_never_releases_a_call_with_other_arguments() -> None:
    service, store, adapter = _service(FakeClock())
    call_a = _start(service, "r-a", "to the left")
    call_b = _start(service, "r-b", "to the right")
    record_a, record_b = await _pending(store, 2)
    assert record_a["arguments"] == {"query": "to the left"}
    store.approve(record_a["id"], "left is fine", by=OPERATOR)
    assert (await call_a)["state"] == "completed"
    assert adapter.calls == [{"query": "to the left"}]
    assert [r["id"] for r in store.approvals("pending")] == [record_b["id"]]
    assert not call_b.done()
    store.deny(record_b["id"], "right is blocked", by=OPERATOR)
    assert (await call_b)["error"]["code"] == "TOOL_APPROVAL_DENIED"
    assert adapter.calls == [{"query": "to the left"}]


async def test_an_approval_is_single_use_so_the_same_arguments_ask_again() -> None:
    service, store, adapter = _service(FakeClock())
    first = _start(service, "r-1", "same")
    (record,) = await _pending(store)
    store.approve(record["id"], "once", by=OPERATOR)
    await first
    again = _start(service, "r-2", "same")
    (second,) = await _pending(store)
    assert second["id"] != record["id"]
    assert second["fingerprint"] != record["fingerprint"]
    store.deny(second["id"], "not twice", by=OPERATOR)
    assert (await again)["state"] == "denied"
    assert len(adapter.calls) == 1


async def test_a_retry_with_the_same_request_id_shares_the_pending_approval() -> None:
    service, store, adapter = _service(FakeClock())
    first = _start(service, "r-1", "move")
    (record,) = await _pending(store)
    retry = _start(service, "r-1", "move")
    await eventually_async(lambda: service._callers["r-1"] == 2, what="the retry to wait")
    first.cancel()  # the first caller leaves; its retry still waits, so nothing is withdrawn
    with pytest.raises(asyncio.CancelledError):
        await first
    assert [r["id"] for r in store.approvals("pending")] == [record["id"]]
    store.approve(record["id"], "go", by=OPERATOR)
    result = await retry
    assert (result["state"], result["duplicate"]) == ("completed", True)
    assert len(adapter.calls) == 1
    assert len(store.approvals()) == 1


async def test_the_last_caller_leaving_withdraws_the_approval_and_nothing_runs() -> None:
    service, store, adapter = _service(FakeClock())
    waiting = _start(service, "r-1", "move")
    (record,) = await _pending(store)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    settled = await eventually_async(
        lambda: service._store.get("r-1"), what="the withdrawn call to settle"
    )
    assert settled["error"]["code"] == "TOOL_APPROVAL_WITHDRAWN"
    assert store.get(record["id"])["state"] == "withdrawn"
    assert adapter.calls == []


async def test_a_standing_rule_runs_without_asking_and_an_unattended_service_refuses() -> None:
    service, store, adapter = _service(FakeClock())
    standing = Principal(
        id="doraforge-agent", scope="agent", grants=AGENT.grants, approvals=frozenset({TOOL})
    )
    ran = await service.call(call("r-1", TOOL, query="q"), standing)
    assert ran["state"] == "completed"
    assert store.approvals() == []
    unattended = RegistryService()
    unattended.register(_risky(), adapter)
    refused = await unattended.call(call("r-2", TOOL, query="q"), AGENT)
    assert refused["error"]["code"] == "TOOL_APPROVAL_REQUIRED"
    assert unattended.ask_operators(0) is None  # 0: still nobody is asked


async def test_a_call_other_gates_refuse_is_never_put_to_an_operator() -> None:
    service, store, _adapter = _service(FakeClock())
    ungranted = Principal(id="doraforge-agent", scope="agent")
    refused = await service.call(call("r-1", TOOL, query="q"), ungranted)
    invalid = await service.call(call("r-2", TOOL, query="q", mode="slow"), AGENT)
    assert refused["error"]["code"] == "TOOL_CAPABILITY_DENIED"
    assert invalid["error"]["code"] == "TOOL_INVALID_ARGUMENTS"
    assert store.approvals() == []


async def test_waiting_calls_leave_other_calls_free_to_run() -> None:
    service, store, adapter = _service(FakeClock())
    service.register(entry("brain.search"), adapter)
    waiting = _start(service, "r-1", "move")
    await _pending(store)
    read = await service.call(call("r-2", "brain.search", query="status"), AGENT)
    assert read["state"] == "completed"
    assert not waiting.done()
    waiting.cancel()
