"""Action ``move``: a scripted motion that succeeds, fails, hangs or crashes the process."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from forge_tool import (
    ToolAccepted,
    ToolContext,
    ToolControlResponse,
    ToolError,
    ToolEventEmitter,
    ToolExecutionKey,
    ToolExecutionStatus,
    ToolRequest,
    ToolResult,
    ToolResultResponse,
)

from doraforge.nodes.executions import Execution, ExecutionTable
from doraforge.nodes.mock.errors import invalid_arguments
from doraforge.nodes.mock.queries import InvokeCounter
from doraforge.nodes.timing import Timing

type Behaviour = Literal["succeed", "fail", "hang", "crash"]

BEHAVIOURS: frozenset[str] = frozenset(("succeed", "fail", "hang", "crash"))
MAX_DURATION_S = 3_600.0
STEP_S = 0.05  # motion control period: progress cadence and cancel latency
MAX_PROGRESS_EVENTS = 200  # long moves report less often rather than more events
HANG_HEARTBEAT_S = 0.2
FAILED_CODE = "MOCK_MOVE_FAILED"


@dataclass(frozen=True)
class MoveArguments:
    """Validated ``move`` arguments."""

    duration_s: float
    behaviour: Behaviour

    @classmethod
    def parse(cls, arguments: dict[str, Any]) -> MoveArguments:
        """Validate untrusted arguments; raise ``ToolEndpointError`` before acceptance."""
        unknown = sorted(set(arguments) - {"duration_s", "behaviour"})
        if unknown:
            raise invalid_arguments(f"unknown arguments: {', '.join(unknown)}")
        duration = arguments.get("duration_s")
        if isinstance(duration, bool) or not isinstance(duration, int | float):
            raise invalid_arguments("duration_s must be a number of seconds")
        if not math.isfinite(duration) or not 0 <= duration <= MAX_DURATION_S:
            raise invalid_arguments(f"duration_s must be within [0, {MAX_DURATION_S:g}]")
        behaviour = arguments.get("behaviour", "succeed")
        # Membership hashes the value: an object or a list must be refused, not raise.
        if not isinstance(behaviour, str) or behaviour not in BEHAVIOURS:
            raise invalid_arguments(f"behaviour must be one of {', '.join(sorted(BEHAVIOURS))}")
        return cls(duration_s=float(duration), behaviour=cast(Behaviour, behaviour))


class MoveAction:
    """Cancellable Action; emits ``progress`` about every 50 ms, bounded in count."""

    def __init__(
        self,
        *,
        timing: Timing,
        counter: InvokeCounter,
        crash: Callable[[], None],
        max_retained: int = 1_024,
    ) -> None:
        self._timing = timing
        self._counter = counter
        self._crash = crash
        self.executions = ExecutionTable("move", max_retained=max_retained, code_prefix="MOCK")

    async def start(
        self, request: ToolRequest, context: ToolContext, events: ToolEventEmitter
    ) -> ToolAccepted:
        self._counter.received("move")
        arguments = MoveArguments.parse(dict(request.arguments))
        execution = self.executions.admit(context.execution_key, events)
        self.executions.launch(execution, self._drive(execution, arguments))
        return ToolAccepted(
            details={"duration_s": arguments.duration_s, "behaviour": arguments.behaviour}
        )

    async def cancel(self, key: ToolExecutionKey, reason: str | None = None) -> ToolControlResponse:
        return self.executions.request_halt(key, "cancel")

    async def status(self, key: ToolExecutionKey) -> ToolExecutionStatus:
        return self.executions.status(key)

    async def result(self, key: ToolExecutionKey) -> ToolResultResponse:
        return self.executions.result(key)

    async def _drive(self, execution: Execution, arguments: MoveArguments) -> None:
        execution.mark_running()
        if arguments.behaviour == "hang":
            await self._hang(execution)
            return
        travelled = await self._travel(execution, arguments)
        if travelled is None:
            return  # the process was told to crash; nothing more is reported
        if execution.halting:
            await self._cancelled(execution, travelled)
        elif arguments.behaviour == "fail":
            error = ToolError(code=FAILED_CODE, message="mock move failed as scripted")
            outputs = {"travelled_s": travelled}
            result = ToolResult(status="failed", outputs=outputs, error=error)
            data = {"code": FAILED_CODE, "travelled_s": travelled}
            await self.executions.finish(execution, result, "executor_failed", data)
        else:
            await execution.emit("progress", {"fraction": 1.0})
            result = ToolResult(status="succeeded", outputs={"travelled_s": travelled})
            data = {"travelled_s": travelled}
            await self.executions.finish(execution, result, "executor_completed", data)

    async def _travel(self, execution: Execution, arguments: MoveArguments) -> float | None:
        """Move until done or halted; return seconds travelled, ``None`` after a crash."""
        duration, timing = arguments.duration_s, self._timing
        report_every = max(STEP_S, duration / MAX_PROGRESS_EVENTS)
        begin = timing.now()
        next_report = begin
        while not execution.halting:
            now = timing.now()
            if arguments.behaviour == "crash" and now - begin >= duration / 2:
                self._crash()
                return None
            if now - begin >= duration:
                return duration
            if now >= next_report:
                fraction = round(min(1.0, (now - begin) / duration), 4) if duration else 1.0
                await execution.emit("progress", {"fraction": fraction})
                next_report = now + report_every
            await timing.pause(min(STEP_S, begin + duration - now), execution.halt)
        return min(duration, timing.now() - begin)

    async def _hang(self, execution: Execution) -> None:
        beat = 0
        begin = self._timing.now()
        while not execution.halting:
            await execution.emit("heartbeat", {"beat": beat})
            beat += 1
            await self._timing.pause(HANG_HEARTBEAT_S, execution.halt)
        await self._cancelled(execution, self._timing.now() - begin)

    async def _cancelled(self, execution: Execution, travelled: float) -> None:
        outputs = {"travelled_s": travelled}
        result = ToolResult(status="cancelled", outputs=outputs)
        await self.executions.finish(execution, result, "cancelled", outputs)
