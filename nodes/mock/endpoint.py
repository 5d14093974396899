"""The ``mock`` endpoint: scriptable operations for Gateway tests and benchmarks.

``echo`` and ``stats`` are Queries, ``move`` a cancellable Action whose arguments script
success, failure, a hang or a process crash, and ``stream`` a stoppable Session. Nothing
here imports ``dora``; :func:`definition` is what both the Dora node and an in-process
test carrier build on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from forge_tool import TOOL_ENDPOINT_PROTOCOL, ToolEndpointDescriptor, ToolOperationDescriptor

from doraforge.nodes.definition import (
    EndpointDefinition,
    OperationImpl,
    new_endpoint_instance_id,
)
from doraforge.nodes.mock.move import MoveAction
from doraforge.nodes.mock.queries import EchoQuery, InvokeCounter, StatsQuery
from doraforge.nodes.mock.stream import StreamSession
from doraforge.nodes.timing import RealTiming, Timing

ENDPOINT_ID = "mock"
CRASH_EXIT_STATUS = 17

DESCRIPTOR = ToolEndpointDescriptor(
    protocol_version=TOOL_ENDPOINT_PROTOCOL,
    endpoint_id=ENDPOINT_ID,
    operations=(
        ToolOperationDescriptor(name="echo", semantics="query", max_concurrency=64),
        ToolOperationDescriptor(name="stats", semantics="query", max_concurrency=64),
        ToolOperationDescriptor(
            name="move",
            semantics="action",
            cancellable=True,
            status_supported=True,
            max_concurrency=1,
        ),
        ToolOperationDescriptor(
            name="stream",
            semantics="session",
            stoppable=True,
            status_supported=True,
            max_concurrency=4,
        ),
    ),
)


def crash_process() -> None:
    """Kill the whole provider process at once, as a real driver crash would."""
    os._exit(CRASH_EXIT_STATUS)


def definition(
    *,
    endpoint_instance_id: str | None = None,
    timing: Timing | None = None,
    crash: Callable[[], None] = crash_process,
    wall_clock_ms: Callable[[], int] | None = None,
    max_retained: int = 1_024,
) -> EndpointDefinition:
    """Build the mock endpoint for one process start.

    The returned definition always pins ``endpoint_instance_id`` (fresh unless given) so
    ``stats`` reports the id the runner registers. ``timing`` and ``crash`` let tests
    drive time and observe the crash without dying; ``max_retained`` bounds the finished
    executions each Action/Session keeps.
    """
    instance_id = endpoint_instance_id or new_endpoint_instance_id()
    timing = timing or RealTiming()
    started_at_ms = (wall_clock_ms or (lambda: time.time_ns() // 1_000_000))()
    counter = InvokeCounter()
    operations: dict[str, OperationImpl] = {
        "echo": EchoQuery(counter),
        "stats": StatsQuery(counter, endpoint_instance_id=instance_id, started_at_ms=started_at_ms),
        "move": MoveAction(timing=timing, counter=counter, crash=crash, max_retained=max_retained),
        "stream": StreamSession(timing=timing, counter=counter, max_retained=max_retained),
    }
    return EndpointDefinition(
        descriptor=DESCRIPTOR, operations=operations, endpoint_instance_id=instance_id
    )
