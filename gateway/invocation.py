"""Caller-visible invocations: phases that never regress, bounded event logs."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

TERMINAL_PHASES = frozenset({"completed", "failed", "cancelled", "stopped", "unknown"})
_RANK = {"dispatching": 0, "accepted": 1, "running": 2, "stopping": 3}
PHASE_FOR_RESULT = {
    "succeeded": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "stopped": "stopped",
    "unknown": "unknown",
}


def can_advance(current: str, new: str) -> bool:
    """Whether ``current`` may move to ``new``: forward only, terminal is final."""
    if current in TERMINAL_PHASES:
        return False
    if new in TERMINAL_PHASES:
        return True
    return _RANK[new] > _RANK[current]


@dataclass(frozen=True, slots=True)
class GatewayEvent:
    """One invocation-scoped event with a Gateway sequence (the SSE ``id:``)."""

    seq: int
    type: str
    data: dict[str, Any]
    at_ms: int


@dataclass(slots=True)
class Invocation:
    """One Action or Session invocation as the Tool Runtime tracks it (slotted: the
    Gateway retains thousands of them, see ``retention.max_invocations``)."""

    invocation_id: str
    attempt_id: str
    tool_id: str
    endpoint_id: str
    operation: str
    semantics: str
    caller_id: str | None
    fingerprint: str
    created_at_ms: int
    deadline_ms: int
    deadline_mono: float
    max_events: int
    endpoint_instance_id: str | None = None
    phase: str = "dispatching"
    cancel_status: str = "none"
    updated_at_ms: int = 0
    terminal_at_ms: int | None = None
    progress: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    slot_held: bool = False
    fenced: bool = False
    last_contact_mono: float = 0.0
    result_fetch_pending: bool = False
    events: deque[GatewayEvent] = field(default_factory=deque)
    next_seq: int = 1
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def terminal(self) -> bool:
        """Whether the caller-visible outcome is final."""
        return self.phase in TERMINAL_PHASES

    def advance(self, phase: str, now_ms: int) -> bool:
        """Move to a later non-terminal ``phase``; returns whether anything changed."""
        if phase in TERMINAL_PHASES or not can_advance(self.phase, phase):
            return False
        self.phase = phase
        self.updated_at_ms = now_ms
        self._notify()
        return True

    def finish(self, result: dict[str, Any], now_ms: int) -> bool:
        """Retain ``result`` and then expose its terminal phase; once only."""
        if self.terminal:
            return False
        self.result = result
        self.phase = PHASE_FOR_RESULT[result["status"]]
        self.terminal_at_ms = now_ms
        self.updated_at_ms = now_ms
        self.append_event("terminal", {"phase": self.phase, "result": result}, now_ms)
        return True

    def append_event(self, type_: str, data: dict[str, Any], now_ms: int) -> GatewayEvent:
        """Append to the bounded log; the oldest events fall off first."""
        event = GatewayEvent(seq=self.next_seq, type=type_, data=data, at_ms=now_ms)
        self.next_seq += 1
        self.events.append(event)
        while len(self.events) > self.max_events:
            self.events.popleft()
        self._notify()
        return event

    def _notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    def public(self) -> dict[str, Any]:
        """The caller-visible status document."""
        document: dict[str, Any] = {
            "invocation_id": self.invocation_id,
            "attempt_id": self.attempt_id,
            "tool_id": self.tool_id,
            "endpoint_id": self.endpoint_id,
            "operation": self.operation,
            "semantics": self.semantics,
            "caller_id": self.caller_id,
            "phase": self.phase,
            "status": self.phase,
            "terminal": self.terminal,
            "cancel_status": self.cancel_status,
            "endpoint_instance_id": self.endpoint_instance_id,
            "created_at_ms": self.created_at_ms,
            "updated_at_ms": self.updated_at_ms,
            "deadline_ms": self.deadline_ms,
            "terminal_at_ms": self.terminal_at_ms,
            "progress": self.progress,
        }
        if self.result is not None:
            document["result"] = self.result
        return document
