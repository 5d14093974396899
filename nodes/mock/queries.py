"""Queries ``echo`` and ``stats``, and the per-operation invoke counter behind ``stats``."""

from __future__ import annotations

from typing import Any

from forge_tool import ToolContext, ToolRequest, ToolResult

from doraforge.nodes.mock.errors import invalid_arguments

COUNTED_OPERATIONS = ("echo", "move", "stream")
MAX_ECHO_CHARS = 65_536


class InvokeCounter:
    """Counts invoke requests that reached each counted operation in this process.

    Every call to ``query``/``start`` counts, valid or not. ``ToolEndpointHandler``
    answers a repeated Action/Session start for the same execution key from its own
    record without calling ``start`` again, so such a replay is not counted.
    """

    def __init__(self) -> None:
        self._counts = dict.fromkeys(COUNTED_OPERATIONS, 0)

    def received(self, operation: str) -> None:
        self._counts[operation] += 1

    def snapshot(self) -> dict[str, int]:
        return dict(self._counts)


def _exact_keys(arguments: dict[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise invalid_arguments(f"unknown arguments: {', '.join(unknown)}")


class EchoQuery:
    """``{"message": str}`` in, the same ``{"message": str}`` out."""

    def __init__(self, counter: InvokeCounter) -> None:
        self._counter = counter

    async def query(self, request: ToolRequest, context: ToolContext) -> ToolResult:
        self._counter.received("echo")
        arguments = dict(request.arguments)
        _exact_keys(arguments, {"message"})
        message = arguments.get("message")
        if not isinstance(message, str):
            raise invalid_arguments("message must be a string")
        if len(message) > MAX_ECHO_CHARS:
            raise invalid_arguments(f"message must be at most {MAX_ECHO_CHARS} characters")
        return ToolResult(status="succeeded", outputs={"message": message})


class StatsQuery:
    """Reports invoke counts, the instance id and the start time of this process."""

    def __init__(self, counter: InvokeCounter, *, endpoint_instance_id: str, started_at_ms: int):
        self._counter = counter
        self._instance_id = endpoint_instance_id
        self._started_at_ms = started_at_ms

    async def query(self, request: ToolRequest, context: ToolContext) -> ToolResult:
        _exact_keys(dict(request.arguments), set())
        outputs = {
            "invokes": self._counter.snapshot(),
            "endpoint_instance_id": self._instance_id,
            "started_at_ms": self._started_at_ms,
        }
        return ToolResult(status="succeeded", outputs=outputs)
