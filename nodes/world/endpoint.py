"""The ``world`` ToolEndpoint: Query ``scene_state`` and Action ``reset``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from forge_tool import (
    TOOL_ENDPOINT_PROTOCOL,
    EndpointStatus,
    ToolAccepted,
    ToolContext,
    ToolControlResponse,
    ToolEndpointDescriptor,
    ToolEndpointError,
    ToolError,
    ToolEventEmitter,
    ToolExecutionKey,
    ToolExecutionStatus,
    ToolOperationDescriptor,
    ToolRequest,
    ToolResult,
    ToolResultResponse,
)

from doraforge.nodes.executions import Execution, ExecutionTable
from doraforge.nodes.world.simulation import Simulation

ENDPOINT_ID = "world"
MAX_SEED = 2**31 - 1

DESCRIPTOR = ToolEndpointDescriptor(
    protocol_version=TOOL_ENDPOINT_PROTOCOL,
    endpoint_id=ENDPOINT_ID,
    operations=(
        ToolOperationDescriptor(name="scene_state", semantics="query", max_concurrency=16),
        ToolOperationDescriptor(
            name="reset", semantics="action", status_supported=True, max_concurrency=1
        ),
    ),
)


def _error(code: str, message: str, *, retryable: bool = False) -> ToolError:
    return ToolError(code=code, message=message, retryable=retryable)


class SceneStateQuery:
    """The latest scene snapshot: cube pose, target zone, gripper, sim time, seed and the
    task's success predicates (the JSON of ``nodes.world.scene``)."""

    def __init__(self, simulation: Simulation) -> None:
        self._simulation = simulation

    async def query(self, request: ToolRequest, context: ToolContext) -> ToolResult:
        if request.arguments:
            raise ToolEndpointError(_error("WORLD_INVALID_ARGUMENTS", "scene_state takes {}"))
        if self._simulation.diverged:
            error = _error("WORLD_DIVERGED", f"physics diverged: {self._simulation.diverged}")
            return ToolResult(status="failed", error=error)
        snapshot = self._simulation.snapshot()
        if snapshot is None:
            # The physics thread is still building the model (a packaged robot's meshes take
            # seconds): asking again shortly will work.
            error = _error("WORLD_NOT_READY", "no physics step yet; ask again", retryable=True)
            return ToolResult(status="failed", error=error)
        return ToolResult(status="succeeded", outputs=snapshot)


class ResetAction:
    """Start a new episode: the physics reset (arm home, gripper open), then the task draws
    its scenario from the seed (the cube's pose in its region)."""

    def __init__(self, simulation: Simulation) -> None:
        self._simulation = simulation
        self.executions = ExecutionTable("reset", code_prefix="WORLD")

    async def start(
        self, request: ToolRequest, context: ToolContext, events: ToolEventEmitter
    ) -> ToolAccepted:
        seed = _seed(request.arguments)
        execution = self.executions.admit(context.execution_key, events)
        loop = asyncio.get_running_loop()

        def done(outcome: dict[str, Any] | Exception) -> None:  # runs in the physics thread
            loop.call_soon_threadsafe(self._complete, execution, outcome)

        self._simulation.request_reset(seed, done)
        execution.mark_running()
        return ToolAccepted(details={"seed": seed})

    def _complete(self, execution: Execution, outcome: dict[str, Any] | Exception) -> None:
        if isinstance(outcome, Exception):
            error = _error("WORLD_RESET_FAILED", str(outcome) or type(outcome).__name__)
            finish = self.executions.finish(
                execution, ToolResult(status="failed", error=error), "executor_failed", {}
            )
        else:
            result = ToolResult(status="succeeded", outputs={"scene": outcome})
            finish = self.executions.finish(execution, result, "executor_completed", {})
        execution.task = asyncio.get_running_loop().create_task(finish)

    async def cancel(self, key: ToolExecutionKey, reason: str | None = None) -> ToolControlResponse:
        return ToolControlResponse(command="cancel", status="unsupported")

    async def status(self, key: ToolExecutionKey) -> ToolExecutionStatus:
        return self.executions.status(key)

    async def result(self, key: ToolExecutionKey) -> ToolResultResponse:
        return self.executions.result(key)


def _seed(arguments: Mapping[str, Any]) -> int | None:
    unknown = set(arguments) - {"seed"}
    if unknown:
        raise ToolEndpointError(_error("WORLD_INVALID_ARGUMENTS", f"unknown: {sorted(unknown)}"))
    seed = arguments.get("seed")
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ToolEndpointError(
            _error("WORLD_INVALID_ARGUMENTS", f"seed must be an integer in [0, {MAX_SEED}]")
        )
    return seed


def world_status(simulation: Simulation) -> EndpointStatus:
    """``unavailable`` before the first physics step (the model is still being built) and
    while physics is diverged (reset recovers it), else ``ready``."""
    if simulation.snapshot() is None and not simulation.diverged:
        return EndpointStatus(
            endpoint_id=ENDPOINT_ID,
            state="unavailable",
            details={"reason": "starting: no physics step yet"},
        )
    if simulation.diverged:
        return EndpointStatus(
            endpoint_id=ENDPOINT_ID,
            state="unavailable",
            details={"reason": simulation.diverged, "recover": "world.reset"},
        )
    stats = simulation.stats
    rtf = stats.sim_time / stats.wall_time if stats.wall_time > 0 else 0.0
    render_ms = 1000 * stats.render_seconds / stats.frames if stats.frames else None
    return EndpointStatus(
        endpoint_id=ENDPOINT_ID,
        state="ready",
        details={
            "sim_time": stats.sim_time,
            "real_time_factor": round(rtf, 3),
            "paced": simulation.options.paced,
            "frames": stats.frames,
            "render_seconds": round(stats.render_seconds, 6),
            "render_ms_per_frame": None if render_ms is None else round(render_ms, 3),
        },
    )
