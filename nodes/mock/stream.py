"""Session ``stream``: a heartbeat every ~100 ms until stopped."""

from __future__ import annotations

from forge_tool import (
    ToolAccepted,
    ToolContext,
    ToolControlResponse,
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

HEARTBEAT_S = 0.1


class StreamSession:
    """Stoppable Session; ``stop`` ends it with a ``stopped`` event and result."""

    def __init__(self, *, timing: Timing, counter: InvokeCounter, max_retained: int = 1_024):
        self._timing = timing
        self._counter = counter
        self.executions = ExecutionTable("stream", max_retained=max_retained, code_prefix="MOCK")

    async def start(
        self, request: ToolRequest, context: ToolContext, events: ToolEventEmitter
    ) -> ToolAccepted:
        self._counter.received("stream")
        if request.arguments:
            raise invalid_arguments("stream takes no arguments")
        execution = self.executions.admit(context.execution_key, events)
        self.executions.launch(execution, self._beat(execution))
        return ToolAccepted(details={"heartbeat_s": HEARTBEAT_S})

    async def stop(self, key: ToolExecutionKey, reason: str | None = None) -> ToolControlResponse:
        return self.executions.request_halt(key, "stop")

    async def status(self, key: ToolExecutionKey) -> ToolExecutionStatus:
        return self.executions.status(key)

    async def result(self, key: ToolExecutionKey) -> ToolResultResponse:
        return self.executions.result(key)

    async def _beat(self, execution: Execution) -> None:
        execution.mark_running()
        beats = 0
        while not execution.halting:
            await execution.emit("heartbeat", {"beat": beats})
            beats += 1
            await self._timing.pause(HEARTBEAT_S, execution.halt)
        outputs = {"beats": beats}
        result = ToolResult(status="stopped", outputs=outputs)
        await self.executions.finish(execution, result, "stopped", outputs)
