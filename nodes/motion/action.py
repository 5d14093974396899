"""The cancellable motion Action shared by the arm and gripper providers.

A :class:`Planner` turns validated arguments and the measured state into a
:class:`MotionPlan` (or rejects them before any motion); :class:`MotionAction` admits the
execution under the provider-wide :class:`MotionGuard`, follows the plan and maps the
follow outcome onto the Wire: ``succeeded`` only on measured, settled completion;
``cancelled`` after holding still; ``failed`` with ``<PREFIX>_MOTION_TIMEOUT`` when the
measured robot did not settle at the goal; ``unknown`` with ``<PREFIX>_STATE_LOST`` when the
joint state stopped arriving mid-motion (nobody can say where the robot ended, so it is
never reported as failed and never retried as if it had not moved).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from forge_tool import (
    EndpointState,
    EndpointStatus,
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
from doraforge.nodes.motion.errors import CAPACITY_CODE, rejection
from doraforge.nodes.motion.follow import Follower, FollowReport, Outcome
from doraforge.nodes.motion.plane import JointSample
from doraforge.nodes.motion.trajectory import JointTrajectory


@dataclass(frozen=True)
class MotionPlan:
    """What to follow, how close is done (``None``: at rest is done), and accept details."""

    trajectory: JointTrajectory
    tolerance: np.ndarray | None
    details: Mapping[str, Any] = field(default_factory=dict)
    target: Any = None  # planner-specific context handed back to ``Planner.outputs``


class Planner(Protocol):
    """Operation-specific half of a motion Action."""

    def plan(self, arguments: Mapping[str, Any], sample: JointSample) -> MotionPlan:
        """Validate ``arguments`` and plan from ``sample``; raise ``ToolEndpointError``."""
        ...

    def outputs(self, plan: MotionPlan, outcome: Outcome, sample: JointSample) -> dict[str, Any]:
        """Outputs of the finished motion from the final measured ``sample``."""
        ...


_TERMINAL_EVENT = {
    "succeeded": "executor_completed",
    "failed": "executor_failed",
    "cancelled": "cancelled",
    # ``unknown`` has no terminal event on the Wire: the result is retained and the
    # Gateway's status poll of a silent attempt finds it.
    "unknown": "",
}


class MotionGuard:
    """One motion at a time across all of a provider's motion operations.

    forge-tool's ``max_concurrency`` bounds each operation on its own; this guard makes
    ``home`` refuse while ``move_to_pose`` runs, with the retryable capacity code the
    Gateway turns into 503.
    """

    def __init__(self, operations: Sequence[str]) -> None:
        self.operations = tuple(operations)
        self._holder: ToolExecutionKey | None = None
        self.operation: str | None = None

    @property
    def busy(self) -> bool:
        return self._holder is not None

    def acquire(self, key: ToolExecutionKey, operation: str) -> None:
        """Take the guard for ``key``; raise the capacity rejection if it is held."""
        if self._holder is not None:
            raise rejection(CAPACITY_CODE, f"{self.operation} is in progress", retryable=True)
        self._holder, self.operation = key, operation

    def release(self, key: ToolExecutionKey) -> None:
        if self._holder == key:
            self._holder, self.operation = None, None


class MotionAction:
    """A cancellable Action that plans a joint goal and follows it on the data plane."""

    def __init__(
        self,
        operation: str,
        planner: Planner,
        *,
        follower: Follower,
        guard: MotionGuard,
        prefix: str,
        max_retained: int = 256,
    ) -> None:
        self._operation = operation
        self._planner = planner
        self._follower = follower
        self._guard = guard
        self._prefix = prefix
        self.executions = ExecutionTable(operation, max_retained=max_retained, code_prefix=prefix)

    async def start(
        self, request: ToolRequest, context: ToolContext, events: ToolEventEmitter
    ) -> ToolAccepted:
        sample = self._follower.fresh_sample()
        if sample is None:
            raise rejection(
                f"{self._prefix}_NO_STATE",
                "no recent joint_state from the robot; is the robot node running?",
                retryable=True,
            )
        plan = self._planner.plan(dict(request.arguments), sample)
        key = context.execution_key
        self._guard.acquire(key, self._operation)
        try:
            execution = self.executions.admit(key, events)
        except BaseException:
            self._guard.release(key)
            raise
        self.executions.launch(execution, self._drive(execution, plan))
        return ToolAccepted(
            details={**plan.details, "duration_s": round(plan.trajectory.duration, 4)}
        )

    async def cancel(self, key: ToolExecutionKey, reason: str | None = None) -> ToolControlResponse:
        return self.executions.request_halt(key, "cancel")

    async def status(self, key: ToolExecutionKey) -> ToolExecutionStatus:
        return self.executions.status(key)

    async def result(self, key: ToolExecutionKey) -> ToolResultResponse:
        return self.executions.result(key)

    async def _drive(self, execution: Execution, plan: MotionPlan) -> None:
        try:
            await self._move(execution, plan)
        finally:
            # Free the robot for the next motion before a caller can see this outcome.
            self._guard.release(execution.key)

    async def _move(self, execution: Execution, plan: MotionPlan) -> None:
        execution.mark_running()

        async def progress(fraction: float) -> None:
            await execution.emit("progress", {"fraction": fraction})

        report = await self._follower.follow(
            plan.trajectory, plan.tolerance, execution.halt, progress
        )
        sample = report.sample
        if report.outcome in (Outcome.HALTED, Outcome.TIMEOUT):
            # Stop pushing toward the goal: hold wherever the robot actually is.
            sample = await self._follower.hold() or sample
        assert sample is not None  # start() required a sample, and samples are never dropped
        outputs = self._planner.outputs(plan, report.outcome, sample)
        outputs["elapsed_s"] = round(report.elapsed_s, 4)
        if report.outcome is Outcome.REACHED:
            await execution.emit("progress", {"fraction": 1.0})
        result = self._result(report, outputs)
        self._guard.release(execution.key)
        data = {**outputs, "code": result.error.code} if result.error else outputs
        await self.executions.finish(execution, result, _TERMINAL_EVENT[result.status], data)

    def _result(self, report: FollowReport, outputs: dict[str, Any]) -> ToolResult:
        if report.outcome is Outcome.REACHED:
            return ToolResult(status="succeeded", outputs=outputs)
        if report.outcome is Outcome.HALTED:
            return ToolResult(status="cancelled", outputs=outputs)
        if report.outcome is Outcome.STATE_LOST:
            error = ToolError(
                code=f"{self._prefix}_STATE_LOST",
                message=(
                    "joint_state stopped arriving during the motion; where the robot ended "
                    "is unknown: check the cell before moving it again"
                ),
                retryable=False,
            )
            return ToolResult(status="unknown", outputs=outputs, error=error)
        else:
            error = ToolError(
                code=f"{self._prefix}_MOTION_TIMEOUT",
                message=f"did not settle at the goal within {report.elapsed_s:.1f} s",
            )
        return ToolResult(status="failed", outputs=outputs, error=error)


def motion_status(endpoint_id: str, follower: Follower, guard: MotionGuard) -> EndpointStatus:
    """Health snapshot: ``degraded`` on stale joint state, ``busy`` while a motion runs."""
    age = follower.plane.age()
    stale = follower.fresh_sample() is None
    state: EndpointState = "degraded" if stale else ("busy" if guard.busy else "ready")
    active = {name: int(name == guard.operation) for name in guard.operations}
    return EndpointStatus(
        endpoint_id=endpoint_id,
        state=state,
        active_invocations=int(guard.busy),
        details={
            "joint_state_age_ms": None if math.isinf(age) else int(age * 1000),
            "active_by_operation": active,
            # While one motion runs every motion operation is effectively saturated.
            "saturated_operations": list(guard.operations) if guard.busy else [],
        },
    )
