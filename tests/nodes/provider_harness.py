"""Test doubles and Wire builders shared by the provider-node tests.

Nothing here sleeps for synchronisation: waits are on asyncio events with a bound.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
from forge_msgs import ToolMessage
from forge_tool import (
    ToolContext,
    ToolEndpointHandler,
    ToolEnvelope,
    ToolExecutionKey,
    ToolRequest,
    make_control_request_envelope,
    make_invoke_request_envelope,
    make_result_request_envelope,
    make_status_request_envelope,
)
from forge_tool.dora import tool_envelope_to_message, tool_message_to_envelope

from doraforge.nodes.definition import EndpointDefinition
from tests.support.clock import FakeClock

WAIT_S = 5.0
_ids = itertools.count()


def fresh(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


class FakeTiming:
    """Mock-provider timing where every pause advances fake time and only yields."""

    def __init__(self) -> None:
        self.clock = FakeClock(0.0)

    def now(self) -> float:
        return self.clock.now

    async def pause(self, seconds: float, wake: asyncio.Event) -> None:
        if not wake.is_set():
            self.clock.advance(max(seconds, 1e-3))
        await asyncio.sleep(0)


def to_value(envelope: ToolEnvelope) -> pa.StructArray:
    """Encode an envelope the way it arrives from Dora (a one-row StructArray)."""
    return tool_envelope_to_message(envelope).to_arrow().to_struct_array()


def decode(batch: pa.RecordBatch | pa.StructArray) -> ToolEnvelope:
    return tool_message_to_envelope(ToolMessage.from_arrow(batch))


class Published:
    """Collects published batches as envelopes and lets a test await one."""

    def __init__(self) -> None:
        self.envelopes: list[ToolEnvelope] = []
        self._changed = asyncio.Event()

    def publish(self, batch: pa.RecordBatch) -> None:
        self.envelopes.append(decode(batch))
        self._changed.set()

    async def sink(self, envelope: ToolEnvelope) -> None:
        self.envelopes.append(envelope)
        self._changed.set()

    def of_type(self, message_type: str) -> list[ToolEnvelope]:
        return [e for e in self.envelopes if e.message_type == message_type]

    def events_for(self, invocation_id: str) -> list[ToolEnvelope]:
        return [
            e
            for e in self.envelopes
            if e.message_type == "tool.event" and e.invocation_id == invocation_id
        ]

    async def wait_for(self, predicate: Callable[[ToolEnvelope], bool]) -> ToolEnvelope:
        """Return the first envelope matching ``predicate``; fail after ``WAIT_S``."""
        async with asyncio.timeout(WAIT_S):
            while True:
                self._changed.clear()
                for envelope in self.envelopes:
                    if predicate(envelope):
                        return envelope
                await self._changed.wait()


def request_for(
    endpoint_id: str,
    instance_id: str,
    operation: str,
    arguments: dict[str, Any] | None = None,
    *,
    invocation_id: str | None = None,
) -> ToolEnvelope:
    context = context_for(endpoint_id, operation, invocation_id or fresh("inv"))
    return make_invoke_request_envelope(
        ToolRequest(arguments=arguments or {}),
        context,
        request_id=fresh("req"),
        endpoint_instance_id=instance_id,
    )


def context_for(endpoint_id: str, operation: str, invocation_id: str) -> ToolContext:
    return ToolContext(
        execution_key=ToolExecutionKey(invocation_id=invocation_id, attempt_id="att-1"),
        tool_id=f"test.{operation}",
        implementation_id="test",
        endpoint_id=endpoint_id,
        operation=operation,
    )


class HandlerHarness:
    """Drives one definition through a real ``ToolEndpointHandler`` (no runner, no Dora)."""

    def __init__(self, definition: EndpointDefinition) -> None:
        assert definition.endpoint_instance_id is not None
        self.definition = definition
        self.instance_id = definition.endpoint_instance_id
        self.endpoint_id = definition.endpoint_id
        self.handler = ToolEndpointHandler(
            definition.descriptor,
            endpoint_instance_id=self.instance_id,
            operations=definition.operations,
        )
        self.published = Published()

    async def invoke(self, operation: str, arguments: dict[str, Any] | None = None) -> ToolEnvelope:
        request = request_for(self.endpoint_id, self.instance_id, operation, arguments)
        messages = await self.handler.dispatch(request, event_sink=self.published.sink)
        for message in messages:
            await self.published.sink(message)
        return messages[0]

    async def _follow_up(self, invoke: ToolEnvelope, kind: str, command: str = "") -> ToolEnvelope:
        context = context_for(self.endpoint_id, str(invoke.operation), str(invoke.invocation_id))
        ids = {"request_id": fresh("req"), "endpoint_instance_id": self.instance_id}
        if kind == "status":
            request = make_status_request_envelope(context, **ids)
        elif kind == "result":
            request = make_result_request_envelope(context, **ids)
        else:
            request = make_control_request_envelope(command, context, **ids)  # type: ignore[arg-type]
        (response,) = await self.handler.dispatch(request)
        return response

    async def status(self, invoke: ToolEnvelope) -> dict[str, Any]:
        status: dict[str, Any] = (await self._follow_up(invoke, "status")).payload["status"]
        return status

    async def result(self, invoke: ToolEnvelope) -> Mapping[str, Any]:
        return (await self._follow_up(invoke, "result")).payload

    async def control(self, invoke: ToolEnvelope, command: str) -> dict[str, Any]:
        response = await self._follow_up(invoke, "control", command)
        answer: dict[str, Any] = response.payload["response"]
        return answer

    async def wait_event(self, invoke: ToolEnvelope, event_type: str, count: int = 1) -> None:
        def enough(_: ToolEnvelope) -> bool:
            events = self.published.events_for(str(invoke.invocation_id))
            return sum(1 for e in events if e.payload["type"] == event_type) >= count

        await self.published.wait_for(enough)

    async def wait_phase(self, invoke: ToolEnvelope, phase: str, within: float = 5.0) -> None:
        """Poll the attempt's status until it reports ``phase`` (an ``unknown`` outcome has
        no terminal event to wait for)."""
        deadline = asyncio.get_running_loop().time() + within
        while (current := (await self.status(invoke))["phase"]) != phase:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"phase {current!r}, not {phase!r}, after {within} s")
            await asyncio.sleep(0.005)

    def event_types(self, invoke: ToolEnvelope) -> list[str]:
        return [e.payload["type"] for e in self.published.events_for(str(invoke.invocation_id))]
