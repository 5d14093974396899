"""Operator approval of one high-risk call: pending, bounded, bound to the call, single-use.

A call that needs approval and has no standing rule (``--approve TOOL``) asks
:meth:`ApprovalStore.clear`, which lists a pending :class:`Approval` and waits, at most
``timeout_s``, for an operator to approve or deny it with a reason. The approval is bound to
the call's :func:`call_fingerprint` (tool, version, canonical arguments, caller, request id)
and releases exactly the waiting call that created it: nothing looks an approval up later,
so it can never be reused for other arguments or another call. The outcomes:

* approved — ``clear`` returns and the call runs;
* denied — ``TOOL_APPROVAL_DENIED`` carrying the operator's reason;
* no decision in time — the approval is ``expired`` and the call ``TOOL_APPROVAL_TIMEOUT``;
* the caller went away — the approval is ``withdrawn`` and the call
  ``TOOL_APPROVAL_WITHDRAWN`` (:meth:`ApprovalStore.withdraw`);
* too many pending — ``TOOL_APPROVAL_QUEUE_FULL`` without asking anyone.

A second ``clear`` for the same fingerprint while it is pending (an idempotent retry)
attaches to the same approval. Every request, decision, expiry and withdrawal is audited.
A call that concerns one cell of a fleet (a skill's runtime and robot) names it: the
approval's ``cell``, shown to the operator and carried by every audit event of it.
State is process memory: a pending call cannot outlive the process that holds it.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from doraforge.registry.audit import AuditLog, CellName, redact_arguments
from doraforge.registry.errors import Conflict, InvalidRequest, NotFound
from doraforge.registry.gates import Deadline, Denied
from doraforge.wire.canonical import sha256_hex

type State = Literal["pending", "approved", "denied", "expired", "withdrawn"]

STATES: tuple[State, ...] = ("pending", "approved", "denied", "expired", "withdrawn")
DEFAULT_TIMEOUT_S = 120.0
MAX_PENDING = 256
MAX_DECIDED = 1000
MAX_REASON_CHARS = 500
ID_PREFIX = "apr_"


def call_fingerprint(
    tool: str, version: int, arguments: Mapping[str, Any], caller: str, request_id: str
) -> str:
    """SHA-256 over the canonical JSON of everything that makes a call this call."""
    return sha256_hex(
        {
            "tool": tool,
            "version": version,
            "arguments": arguments,
            "caller": caller,
            "requestId": request_id,
        }
    )


@dataclass(frozen=True)
class ApprovalRequest:
    """What an operator is asked about: one call, as the gates normalised it.

    ``tool`` is the canonical name (the call's identity); ``listed_name`` the name the
    operator reads (``ToolEntry.listed_name``, what the agent called in ``tools/list``)."""

    tool: str
    version: int
    arguments: Mapping[str, Any]
    caller: str
    request_id: str
    risk: str
    listed_name: str | None = None

    @property
    def shown(self) -> str:
        """The tool's name as the record, the CLI, the console and denials show it."""
        return self.listed_name or self.tool

    @property
    def fingerprint(self) -> str:
        return call_fingerprint(
            self.tool, self.version, self.arguments, self.caller, self.request_id
        )


@dataclass
class Approval:
    """One approval request and its decision; ``public()`` is its wire form."""

    id: str
    request: ApprovalRequest
    fingerprint: str
    requested_at: float
    expires_at: float
    expires_on_clock: float
    state: State = "pending"
    reason: str | None = None
    decided_at: float | None = None
    waiters: int = 0
    cell: CellName | None = None
    decided: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def public(self) -> dict[str, Any]:
        """The record the HTTP API and the CLI show; credential-looking values masked;
        ``cell`` (skill, runtime instance, robot) when the call concerns one cell."""
        record = {
            "id": self.id,
            "tool": self.request.shown,
            "version": self.request.version,
            "arguments": redact_arguments(self.request.arguments),
            "fingerprint": self.fingerprint,
            "caller": self.request.caller,
            "risk": self.request.risk,
            "requested_at": iso(self.requested_at),
            "expires_at": iso(self.expires_at),
            "state": self.state,
            "reason": self.reason,
            "decided_at": None if self.decided_at is None else iso(self.decided_at),
        }
        if self.cell is not None:
            record["cell"] = dict(self.cell)
        return record


def iso(epoch_s: float) -> str:
    """ISO-8601 UTC with milliseconds and a ``Z``: ``2026-12-01T11:32:53.120Z``."""
    stamp = datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def new_id() -> str:
    """An unguessable approval id (``apr_`` + 24 hex digits)."""
    return ID_PREFIX + secrets.token_hex(12)


class ApprovalStore:
    """Pending approvals (at most ``max_pending``) and the last ``max_decided`` decided ones.

    ``deadline`` opens each wait's bound on ``clock`` (``asyncio.timeout`` on
    ``time.monotonic`` in production; tests pass a fake clock's); ``wall`` stamps the
    records. Callers catch :class:`Denied` from :meth:`clear`, :class:`NotFound` and
    :class:`Conflict` from the decisions.
    """

    def __init__(
        self,
        *,
        audit: AuditLog,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        deadline: Deadline = asyncio.timeout,
        max_pending: int = MAX_PENDING,
        max_decided: int = MAX_DECIDED,
        ids: Callable[[], str] = new_id,
    ) -> None:
        self._audit = audit
        self._timeout_s = timeout_s
        self._clock, self._wall, self._deadline = clock, wall, deadline
        self._max_pending, self._max_decided = max_pending, max_decided
        self._ids = ids
        self._pending: dict[str, Approval] = {}
        self._decided: OrderedDict[str, Approval] = OrderedDict()

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    async def clear(self, request: ApprovalRequest) -> Approval:
        """Wait for an operator's decision on ``request``; return the approval when it was
        approved, else raise :class:`Denied` (denied, timeout, withdrawn, queue full)."""
        approval = self._attach(request, await self._cell(request))
        remaining = max(0.0, approval.expires_on_clock - self._clock())
        approval.waiters += 1
        try:
            async with self._deadline(remaining):
                await approval.decided.wait()
        except TimeoutError:
            self._settle(approval, "expired", f"no decision within {self._timeout_s:g} s")
        except asyncio.CancelledError:  # the last caller left, or the process stops
            if approval.waiters == 1:
                self._settle(approval, "withdrawn", "the call was interrupted")
            raise
        finally:
            approval.waiters -= 1
        return _released(approval, request.fingerprint, self._timeout_s)

    def approvals(self, state: State | None = None) -> list[dict[str, Any]]:
        """Pending then decided records, oldest first, optionally of one ``state``."""
        every = [*self._pending.values(), *self._decided.values()]
        return [a.public() for a in every if state is None or a.state == state]

    def waiters(self, approval_id: str) -> int:
        """How many callers wait on this approval now (an idempotent retry adds one)."""
        return self._find(approval_id).waiters

    def get(self, approval_id: str) -> dict[str, Any]:
        """One record; :class:`NotFound` ``APPROVAL_NOT_FOUND`` when unknown or dropped."""
        return self._find(approval_id).public()

    def approve(self, approval_id: str, reason: str, *, by: str) -> dict[str, Any]:
        """Release the one call waiting on this approval; see :meth:`decide`."""
        return self.decide(approval_id, "approved", reason, by=by)

    def deny(self, approval_id: str, reason: str, *, by: str) -> dict[str, Any]:
        """Refuse the call waiting on this approval; see :meth:`decide`."""
        return self.decide(approval_id, "denied", reason, by=by)

    def decide(
        self, approval_id: str, state: Literal["approved", "denied"], reason: str, *, by: str
    ) -> dict[str, Any]:
        """Record an operator's decision; :class:`NotFound` for an unknown id and
        :class:`Conflict` ``APPROVAL_NOT_PENDING`` once it was decided, expired or
        withdrawn (a decision is never changed or repeated)."""
        approval = self._find(approval_id)
        if approval.state != "pending":
            raise Conflict(
                "APPROVAL_NOT_PENDING",
                f"approval {approval_id} is already {approval.state}; nothing was changed",
                details={"id": approval_id, "state": approval.state},
            )
        self._settle(approval, state, reason, by=by)
        return approval.public()

    def withdraw(self, request_id: str) -> None:
        """Withdraw the pending approval of the call ``request_id`` (its caller went away);
        a call without one, or already decided, is left alone."""
        for approval in list(self._pending.values()):
            if approval.request.request_id == request_id:
                self._settle(approval, "withdrawn", "the caller went away")

    async def _cell(self, request: ApprovalRequest) -> CellName | None:
        """The cell the call concerns, noted for its audit records too."""
        cell = await self._audit.cell_of(request.tool, request.arguments)
        self._audit.note_cell(request.request_id, cell)
        return cell

    def _attach(self, request: ApprovalRequest, cell: CellName | None = None) -> Approval:
        fingerprint = request.fingerprint
        held = next((a for a in self._pending.values() if a.fingerprint == fingerprint), None)
        if held is not None:  # an idempotent retry of the same call waits on the same one
            return held
        if len(self._pending) >= self._max_pending:
            raise Denied(
                "TOOL_APPROVAL_QUEUE_FULL",
                f"{self._max_pending} calls already wait for an operator; decide those first",
                retryable=True,
                details={"maxPending": self._max_pending},
            )
        now = self._wall()
        approval = Approval(
            id=self._ids(),
            request=request,
            fingerprint=fingerprint,
            requested_at=now,
            expires_at=now + self._timeout_s,
            expires_on_clock=self._clock() + self._timeout_s,
            cell=cell,
        )
        self._pending[approval.id] = approval
        self._record("requested", approval)
        return approval

    def _settle(self, approval: Approval, state: State, reason: str, *, by: str = "") -> None:
        """Move a pending approval to its final ``state`` (a no-op once it has one)."""
        if approval.state != "pending":
            return
        approval.state, approval.reason, approval.decided_at = state, reason, self._wall()
        del self._pending[approval.id]
        self._decided[approval.id] = approval
        while len(self._decided) > self._max_decided:
            self._decided.popitem(last=False)
        approval.decided.set()
        self._record(state, approval, by=by)

    def _find(self, approval_id: str) -> Approval:
        approval = self._pending.get(approval_id) or self._decided.get(approval_id)
        if approval is None:
            raise NotFound(
                "APPROVAL_NOT_FOUND",
                f"no approval {approval_id[:64]!r} (unknown, or dropped after "
                f"{self._max_decided} later decisions)",
            )
        return approval

    def _record(self, event: str, approval: Approval, *, by: str = "") -> None:
        self._audit.record_approval(
            event=event,
            approval_id=approval.id,
            request_id=approval.request.request_id,
            name=approval.request.tool,
            principal_id=approval.request.caller,
            fingerprint=approval.fingerprint,
            reason=approval.reason,
            by=by or None,
            cell=approval.cell,
        )


def _released(approval: Approval, fingerprint: str, timeout_s: float) -> Approval:
    """The approval when it releases the call with ``fingerprint``, else the denial."""
    details = {"approvalId": approval.id, "reason": approval.reason}
    if approval.state == "approved" and approval.fingerprint == fingerprint:
        return approval
    if approval.state == "denied":
        message = f"an operator denied {approval.request.shown}: {approval.reason}"
        raise Denied("TOOL_APPROVAL_DENIED", message, details=details)
    if approval.state == "expired":
        message = (
            f"no operator decided on {approval.request.shown} within {timeout_s:g} s; "
            "call again with a new requestId to ask again"
        )
        raise Denied(
            "TOOL_APPROVAL_TIMEOUT",
            message,
            retryable=True,
            details={**details, "timeoutS": timeout_s},
        )
    if approval.state == "withdrawn":
        message = "the approval request was withdrawn before an operator decided"
        raise Denied("TOOL_APPROVAL_WITHDRAWN", message, retryable=True, details=details)
    # An approval bound to another fingerprint never releases this call.
    raise Denied("TOOL_APPROVAL_MISMATCH", "the approval does not match this call")


def reason_of(body: Any) -> str:
    """The decision body's reason: ``{"reason": "<non-empty text>"}`` and nothing else.

    Raises :class:`InvalidRequest` ``APPROVAL_REASON_REQUIRED`` (missing or blank) or
    ``APPROVAL_DECISION_INVALID`` (another shape, too long, control characters)."""
    if not isinstance(body, dict) or set(body) - {"reason"}:
        raise InvalidRequest(
            "APPROVAL_DECISION_INVALID", 'the body must be {"reason": "<why>"} and nothing else'
        )
    reason = body.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidRequest(
            "APPROVAL_REASON_REQUIRED", "a decision needs a non-empty reason (say why)"
        )
    reason = reason.strip()
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidRequest(
            "APPROVAL_DECISION_INVALID", f"the reason exceeds {MAX_REASON_CHARS} characters"
        )
    if any((ord(c) < 32 and c not in "\t\n") or ord(c) == 127 for c in reason):
        raise InvalidRequest(
            "APPROVAL_DECISION_INVALID", "the reason may not hold control characters"
        )
    return reason
