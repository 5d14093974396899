"""The approval store: a pending approval is bound to one call's fingerprint, released once,
expires into a denial on the fake clock, is withdrawn when its caller goes away, and an
idempotent retry waits on the same approval."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from doraforge.registry.approvals import (
    Approval,
    ApprovalRequest,
    ApprovalStore,
    call_fingerprint,
    reason_of,
)
from doraforge.registry.audit import REDACTED, AuditLog
from doraforge.registry.errors import Conflict, InvalidRequest, NotFound
from doraforge.registry.gates import Denied
from tests.support.clock import FakeClock
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

TIMEOUT_S = 120.0


def _request(request_id: str = "r-1", **arguments: Any) -> ApprovalRequest:
    return ApprovalRequest(
        tool="arm.move",
        version=1,
        arguments=arguments or {"x": 0.3},
        caller="doraforge-agent",
        request_id=request_id,
        risk="high",
    )


def _store(clock: FakeClock, audit: AuditLog | None = None, **options: Any) -> ApprovalStore:
    return ApprovalStore(
        audit=audit if audit is not None else AuditLog(),
        timeout_s=TIMEOUT_S,
        clock=clock,
        wall=lambda: clock.wall_ms() / 1000,
        deadline=clock.timeout,
        **options,
    )


async def _pending(store: ApprovalStore, count: int = 1) -> list[dict[str, Any]]:
    """The pending records once ``count`` callers wait (each task waits once it is listed)."""

    def listed() -> list[dict[str, Any]] | None:
        pending = store.approvals("pending")
        return pending if len(pending) == count else None

    return await eventually_async(listed, within=5.0, what=f"{count} pending approval(s)")


async def _outcome(task: asyncio.Task[Approval]) -> Approval | Denied:
    try:
        return await task
    except Denied as denied:
        return denied


async def _denied(task: asyncio.Task[Approval]) -> Denied:
    outcome = await _outcome(task)
    assert isinstance(outcome, Denied), outcome
    return outcome


async def test_an_approval_releases_the_waiting_call_once_with_its_reason() -> None:
    clock = FakeClock()
    store = _store(clock)
    waiting = asyncio.create_task(store.clear(_request()))
    (record,) = await _pending(store)
    decided = store.approve(record["id"], "cell is clear", by="doraforge-ui")
    approval = await waiting
    assert approval.state == "approved"
    assert decided["state"] == "approved"
    assert decided["reason"] == "cell is clear"
    assert decided["decided_at"] is not None
    with pytest.raises(Conflict) as again:
        store.approve(record["id"], "once more", by="doraforge-ui")
    assert again.value.code == "APPROVAL_NOT_PENDING"
    assert again.value.details == {"id": record["id"], "state": "approved"}


async def test_the_record_names_the_bound_call_with_iso_times() -> None:
    clock = FakeClock()
    store = _store(clock)
    request = _request("r-7", x=0.25, api_token="tok-secret")
    waiting = asyncio.create_task(store.clear(request))
    (record,) = await _pending(store)
    store.deny(record["id"], "not now", by="doraforge-ui")
    await _outcome(waiting)
    assert record["fingerprint"] == call_fingerprint(
        "arm.move", 1, {"x": 0.25, "api_token": "tok-secret"}, "doraforge-agent", "r-7"
    )
    assert record["arguments"] == {"x": 0.25, "api_token": REDACTED}
    assert (record["tool"], record["version"], record["caller"], record["risk"]) == (
        "arm.move",
        1,
        "doraforge-agent",
        "high",
    )
    assert record["requested_at"] == "2027-01-15T08:00:00.000Z"
    assert record["expires_at"] == "2027-01-15T08:02:00.000Z"
    assert (record["state"], record["reason"], record["decided_at"]) == ("pending", None, None)


async def test_each_call_gets_its_own_approval_and_one_never_releases_another() -> None:
    clock = FakeClock()
    store = _store(clock)
    first = asyncio.create_task(store.clear(_request("r-a", x=0.1)))
    other_arguments = asyncio.create_task(store.clear(_request("r-b", x=0.9)))
    same_arguments_later = asyncio.create_task(store.clear(_request("r-c", x=0.1)))
    pending = await _pending(store, 3)
    assert len({record["fingerprint"] for record in pending}) == 3
    store.approve(pending[0]["id"], "only this one", by="doraforge-ui")
    assert (await first).request.request_id == "r-a"
    assert not other_arguments.done()
    assert not same_arguments_later.done()
    assert [r["id"] for r in store.approvals("pending")] == [pending[1]["id"], pending[2]["id"]]
    clock.advance(TIMEOUT_S)
    assert {(await _denied(t)).code for t in (other_arguments, same_arguments_later)} == {
        "TOOL_APPROVAL_TIMEOUT"
    }


async def test_no_decision_in_time_expires_the_approval_and_denies_the_call() -> None:
    clock = FakeClock()
    audit = AuditLog()
    store = _store(clock, audit)
    waiting = asyncio.create_task(store.clear(_request()))
    (record,) = await _pending(store)
    assert clock.requested == [TIMEOUT_S]  # the wait is bounded by the configured timeout
    clock.advance(TIMEOUT_S)
    denied = await _outcome(waiting)
    assert isinstance(denied, Denied)
    assert denied.code == "TOOL_APPROVAL_TIMEOUT"
    assert denied.retryable is True
    assert denied.details["approvalId"] == record["id"]
    assert store.get(record["id"])["state"] == "expired"
    with pytest.raises(Conflict):
        store.approve(record["id"], "too late", by="doraforge-ui")
    events = [(r["event"], r["approvalId"]) for r in audit.records()]
    assert events == [("requested", record["id"]), ("expired", record["id"])]


async def test_a_denial_reaches_the_call_with_the_operators_reason() -> None:
    clock = FakeClock()
    audit = AuditLog()
    store = _store(clock, audit)
    waiting = asyncio.create_task(store.clear(_request()))
    (record,) = await _pending(store)
    store.deny(record["id"], "a person is in the cell", by="doraforge-ui")
    denied = await _outcome(waiting)
    assert isinstance(denied, Denied)
    assert denied.code == "TOOL_APPROVAL_DENIED"
    assert "a person is in the cell" in denied.message
    assert denied.details["reason"] == "a person is in the cell"
    decision = audit.records()[-1]
    assert (decision["event"], decision["reason"], decision["by"]) == (
        "denied",
        "a person is in the cell",
        "doraforge-ui",
    )
    assert "x" not in str(decision)  # the arguments never enter the audit trail


async def test_withdrawing_a_call_denies_it_and_leaves_other_calls_pending() -> None:
    clock = FakeClock()
    store = _store(clock)
    gone = asyncio.create_task(store.clear(_request("r-gone")))
    staying = asyncio.create_task(store.clear(_request("r-stay")))
    await _pending(store, 2)
    store.withdraw("r-gone")
    denied = await _outcome(gone)
    assert isinstance(denied, Denied)
    assert denied.code == "TOOL_APPROVAL_WITHDRAWN"
    assert [r["state"] for r in store.approvals()] == ["pending", "withdrawn"]
    store.withdraw("r-unknown")  # nothing pending for it: a no-op
    assert not staying.done()
    staying.cancel()


async def test_a_cancelled_wait_withdraws_its_approval() -> None:
    store = _store(FakeClock())
    waiting = asyncio.create_task(store.clear(_request()))
    (record,) = await _pending(store)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert store.get(record["id"])["state"] == "withdrawn"


async def test_an_idempotent_retry_attaches_to_the_same_pending_approval() -> None:
    clock = FakeClock()
    store = _store(clock)
    first = asyncio.create_task(store.clear(_request("r-1")))
    (record,) = await _pending(store)
    retry = asyncio.create_task(store.clear(_request("r-1")))
    await eventually_async(lambda: store.waiters(record["id"]) == 2, what="the retry to attach")
    clock.advance(TIMEOUT_S / 2)  # the retry waits on the first one's deadline, not its own
    store.approve(record["id"], "go", by="doraforge-ui")
    assert (await first).id == (await retry).id == record["id"]
    assert len(store.approvals()) == 1


async def test_a_full_queue_denies_without_asking() -> None:
    store = _store(FakeClock(), max_pending=1)
    waiting = asyncio.create_task(store.clear(_request("r-1")))
    await _pending(store)
    with pytest.raises(Denied) as full:
        await store.clear(_request("r-2"))
    assert full.value.code == "TOOL_APPROVAL_QUEUE_FULL"
    assert full.value.retryable is True
    waiting.cancel()


async def test_decided_approvals_are_kept_up_to_a_bound() -> None:
    clock = FakeClock()
    store = _store(clock, max_decided=2)
    ids = []
    for n in range(3):
        waiting = asyncio.create_task(store.clear(_request(f"r-{n}")))
        (record,) = await _pending(store)
        store.deny(record["id"], "no", by="doraforge-ui")
        await _outcome(waiting)
        ids.append(record["id"])
    assert [r["id"] for r in store.approvals("denied")] == ids[1:]
    with pytest.raises(NotFound) as dropped:
        store.get(ids[0])
    assert dropped.value.code == "APPROVAL_NOT_FOUND"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "APPROVAL_REASON_REQUIRED"),
        ({"reason": "   "}, "APPROVAL_REASON_REQUIRED"),
        ({"reason": 3}, "APPROVAL_REASON_REQUIRED"),
        (None, "APPROVAL_DECISION_INVALID"),
        ({"reason": "ok", "approved": True}, "APPROVAL_DECISION_INVALID"),
        ({"reason": "x" * 501}, "APPROVAL_DECISION_INVALID"),
        ({"reason": "bell\x07"}, "APPROVAL_DECISION_INVALID"),
    ],
)
def test_a_decision_needs_one_plain_reason(body: Any, code: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        reason_of(body)
    assert refused.value.code == code


def test_a_reason_is_trimmed_and_may_span_lines() -> None:
    assert reason_of({"reason": "  checked the cell\nby camera  "}) == "checked the cell\nby camera"
