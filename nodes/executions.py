"""Bounded bookkeeping for a provider's Action and Session executions.

One :class:`ExecutionTable` per operation holds each execution's phase and authoritative
result. The terminal result is stored *before* the terminal event is emitted (forge-tool
asks ``result()`` when it sees a terminal event). Finished executions are retained up to
a bound, oldest evicted first, so memory stays flat over long runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from forge_tool import (
    ExecutionPhase,
    ToolControlCommand,
    ToolControlResponse,
    ToolEndpointError,
    ToolError,
    ToolEvent,
    ToolEventEmitter,
    ToolExecutionKey,
    ToolExecutionStatus,
    ToolResult,
    ToolResultResponse,
)

logger = logging.getLogger(__name__)

_PHASE_OF_RESULT: dict[str, ExecutionPhase] = {
    "succeeded": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "stopped": "stopped",
    "unknown": "unknown",
}


@dataclass
class Execution:
    """One accepted attempt: its emitter, phase, result and halt request."""

    key: ToolExecutionKey
    events: ToolEventEmitter
    phase: ExecutionPhase = "accepted"
    result: ToolResult | None = None
    halt: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def terminal(self) -> bool:
        return self.result is not None

    @property
    def halting(self) -> bool:
        return self.halt.is_set()

    def mark_running(self) -> None:
        """Move ``accepted`` to ``running``; a halt requested before the start wins."""
        if self.phase == "accepted":
            self.phase = "running"

    def status(self) -> ToolExecutionStatus:
        error = self.result.error if self.result is not None else None
        return ToolExecutionStatus(phase=self.phase, error=error)

    async def emit(self, event_type: str, data: dict[str, Any]) -> None:
        """Emit one event; a failed publication is logged, never fatal to the execution."""
        try:
            await self.events.emit(ToolEvent(type=event_type, data=data))  # type: ignore[arg-type]
        except Exception:
            logger.exception("event %s for %s was not delivered", event_type, self.key)


class ExecutionTable:
    """Executions of one operation; answers status, result and halt requests."""

    def __init__(
        self, operation: str, *, max_retained: int = 1_024, code_prefix: str = "ENDPOINT"
    ) -> None:
        self._operation = operation
        self._prefix = code_prefix
        self._max_retained = max_retained
        self._executions: OrderedDict[ToolExecutionKey, Execution] = OrderedDict()
        self._finished: deque[ToolExecutionKey] = deque()

    def __len__(self) -> int:
        return len(self._executions)

    def admit(self, key: ToolExecutionKey, events: ToolEventEmitter) -> Execution:
        """Record a new execution; reject a key this table already holds."""
        if key in self._executions:
            raise ToolEndpointError(
                ToolError(
                    code=f"{self._prefix}_DUPLICATE_EXECUTION", message="execution key already used"
                )
            )
        execution = Execution(key=key, events=events)
        self._executions[key] = execution
        return execution

    def launch(self, execution: Execution, body: Coroutine[Any, Any, None]) -> None:
        """Run ``body`` as the execution's background task.

        A body that fails unexpectedly ends the execution as ``unknown``: the provider
        can no longer say what the motion did.
        """
        execution.task = asyncio.get_running_loop().create_task(self._guard(execution, body))

    async def _guard(self, execution: Execution, body: Coroutine[Any, Any, None]) -> None:
        try:
            await body
        except Exception:
            logger.exception("%s execution %s failed unexpectedly", self._operation, execution.key)
            if not execution.terminal:
                error = ToolError(
                    code=f"{self._prefix}_INTERNAL", message="execution failed unexpectedly"
                )
                await self.finish(execution, ToolResult(status="unknown", error=error), "", {})

    async def finish(
        self, execution: Execution, result: ToolResult, event_type: str, data: dict[str, Any]
    ) -> None:
        """Retain the terminal result, then emit the terminal event (the Wire barrier).

        An empty ``event_type`` retains the result without an event (``unknown`` has no
        terminal event type on the Wire).
        """
        execution.result = result
        execution.phase = _PHASE_OF_RESULT[result.status]
        self._finished.append(execution.key)
        while len(self._finished) > self._max_retained:
            self._executions.pop(self._finished.popleft(), None)
        if event_type:
            await execution.emit(event_type, data)

    def status(self, key: ToolExecutionKey) -> ToolExecutionStatus:
        """Return the execution's status; raise ``ToolEndpointError`` for an unknown key."""
        execution = self._executions.get(key)
        if execution is None:
            raise ToolEndpointError(
                ToolError(code=f"{self._prefix}_UNKNOWN_EXECUTION", message="no such execution")
            )
        return execution.status()

    def result(self, key: ToolExecutionKey) -> ToolResultResponse:
        """Return ``available``, ``pending`` or ``not_found`` for ``key``."""
        execution = self._executions.get(key)
        if execution is None:
            return ToolResultResponse(status="not_found")
        if execution.result is None:
            return ToolResultResponse(status="pending")
        return ToolResultResponse(status="available", result=execution.result)

    def request_halt(
        self, key: ToolExecutionKey, command: ToolControlCommand
    ) -> ToolControlResponse:
        """Ask a live execution to halt; its own task then emits the terminal event."""
        execution = self._executions.get(key)
        if execution is None:
            error = ToolError(code=f"{self._prefix}_UNKNOWN_EXECUTION", message="no such execution")
            return ToolControlResponse(command=command, status="rejected", error=error)
        if execution.terminal:
            return ToolControlResponse(command=command, status="terminal")
        if not execution.halting:
            execution.phase = "stopping"
            execution.halt.set()
        return ToolControlResponse(command=command, status="accepted")
