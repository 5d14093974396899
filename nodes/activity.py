"""Per-operation activity counts, observed by wrapping the provider's SPI objects.

The runner derives ``endpoint.status`` (``ready``/``busy``, ``active_invocations``) from
these counts. An Action or Session counts as active from the moment ``start`` is called
until the provider reports its result as available (or the key as unknown), which is the
same span during which ``ToolEndpointHandler`` holds its admission permit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from forge_tool import (
    ActionToolEndpoint,
    QueryToolEndpoint,
    SessionToolEndpoint,
    ToolAccepted,
    ToolContext,
    ToolControlResponse,
    ToolEndpointDescriptor,
    ToolEventEmitter,
    ToolExecutionKey,
    ToolExecutionStatus,
    ToolRequest,
    ToolResult,
    ToolResultResponse,
)

from doraforge.nodes.definition import OperationImpl


class ActivityTracker:
    """Counts in-flight Queries and live Action/Session executions per operation."""

    def __init__(
        self,
        descriptor: ToolEndpointDescriptor,
        on_execution_change: Callable[[], None] | None = None,
    ) -> None:
        self._limits = {op.name: op.max_concurrency for op in descriptor.operations}
        self._queries = dict.fromkeys(self._limits, 0)
        self._executions: dict[str, set[ToolExecutionKey]] = {n: set() for n in self._limits}
        # Called when an Action/Session starts or ends, so status is published at once.
        self._on_change = on_execution_change or (lambda: None)

    def active_by_operation(self) -> dict[str, int]:
        """Return the current active count of every declared operation."""
        return {name: self._queries[name] + len(self._executions[name]) for name in self._limits}

    def saturated_operations(self) -> list[str]:
        """Return the operations whose active count has reached ``max_concurrency``."""
        active = self.active_by_operation()
        return [name for name, limit in self._limits.items() if active[name] >= limit]

    def query_entered(self, operation: str) -> None:
        self._queries[operation] += 1

    def query_left(self, operation: str) -> None:
        self._queries[operation] -= 1

    def execution_started(self, operation: str, key: ToolExecutionKey) -> None:
        self._executions[operation].add(key)
        self._on_change()

    def execution_ended(self, operation: str, key: ToolExecutionKey) -> None:
        if key in self._executions[operation]:
            self._executions[operation].discard(key)
            self._on_change()


class _TrackedQuery:
    __slots__ = ("_inner", "_name", "_tracker")

    def __init__(self, inner: QueryToolEndpoint, name: str, tracker: ActivityTracker) -> None:
        self._inner, self._name, self._tracker = inner, name, tracker

    async def query(self, request: ToolRequest, context: ToolContext) -> ToolResult:
        self._tracker.query_entered(self._name)
        try:
            return await self._inner.query(request, context)
        finally:
            self._tracker.query_left(self._name)


class _TrackedExecution:
    """Wraps an Action or Session; exposes both control verbs, the handler picks one."""

    __slots__ = ("_inner", "_name", "_tracker")

    def __init__(
        self,
        inner: ActionToolEndpoint | SessionToolEndpoint,
        name: str,
        tracker: ActivityTracker,
    ) -> None:
        self._inner, self._name, self._tracker = inner, name, tracker

    async def start(
        self, request: ToolRequest, context: ToolContext, events: ToolEventEmitter
    ) -> ToolAccepted:
        # Counted before start() so a terminal reached during start() is not re-added.
        key = context.execution_key
        self._tracker.execution_started(self._name, key)
        try:
            return await self._inner.start(request, context, events)
        except BaseException:
            self._tracker.execution_ended(self._name, key)
            raise

    async def cancel(self, key: ToolExecutionKey, reason: str | None = None) -> ToolControlResponse:
        return await self._inner.cancel(key, reason)  # type: ignore[union-attr]

    async def stop(self, key: ToolExecutionKey, reason: str | None = None) -> ToolControlResponse:
        return await self._inner.stop(key, reason)  # type: ignore[union-attr]

    async def status(self, key: ToolExecutionKey) -> ToolExecutionStatus:
        return await self._inner.status(key)

    async def result(self, key: ToolExecutionKey) -> ToolResultResponse:
        response = await self._inner.result(key)
        if isinstance(response, ToolResultResponse) and response.status != "pending":
            self._tracker.execution_ended(self._name, key)
        return response


_REQUIRED_METHODS = {
    "query": ("query",),
    "action": ("start", "cancel", "status", "result"),
    "session": ("start", "stop", "status", "result"),
}


def _require_methods(name: str, semantics: str, impl: object) -> None:
    # The wrappers expose every method, so check the wrapped object as the handler would.
    for method in _REQUIRED_METHODS[semantics]:
        if not callable(getattr(impl, method, None)):
            raise TypeError(
                f"operation {name!r} with {semantics} semantics requires a callable {method}()"
            )


def tracked_operations(
    descriptor: ToolEndpointDescriptor,
    operations: Mapping[str, OperationImpl],
    tracker: ActivityTracker,
) -> dict[str, OperationImpl]:
    """Wrap every declared operation so ``tracker`` observes it.

    Undeclared names are passed through untouched so ``ToolEndpointHandler`` still
    reports the mismatch with its own error.
    """
    semantics = {op.name: op.semantics for op in descriptor.operations}
    wrapped: dict[str, OperationImpl] = {}
    for name, impl in operations.items():
        kind = semantics.get(name)
        if kind is not None:
            _require_methods(name, kind, impl)
        if kind == "query":
            wrapped[name] = _TrackedQuery(impl, name, tracker)  # type: ignore[arg-type]
        elif kind in ("action", "session"):
            wrapped[name] = _TrackedExecution(impl, name, tracker)  # type: ignore[arg-type]
        else:
            wrapped[name] = impl
    return wrapped
