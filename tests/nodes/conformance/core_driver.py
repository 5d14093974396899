"""Drive one provider through the :class:`ProviderCore` the runner embeds, without Dora.

Every request goes in as the carrier row Dora would deliver (``ProviderCore.handle``) and
every answer is read back from what the core published, so a check sees exactly what
the Gateway would see: correlated envelopes, events in order, health snapshots. The
Wire builders and the collector come from :mod:`tests.nodes.provider_harness`.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from forge_msgs.tool import TOOL_MESSAGE_SCHEMA
from forge_tool import (
    ToolEnvelope,
    make_control_request_envelope,
    make_result_request_envelope,
    make_status_request_envelope,
)

from doraforge.nodes.definition import EndpointDefinition, RunnerOptions
from doraforge.nodes.provider import ProviderCore
from tests.nodes.provider_harness import Published, context_for, fresh, request_for, to_value
from tests.support.clock import FakeClock

TERMINAL_EVENTS = frozenset({"executor_completed", "executor_failed", "cancelled", "stopped"})
TERMINAL_PHASES = frozenset({"completed", "failed", "cancelled", "stopped", "unknown"})
#: Which terminal event a terminal result status is announced with (protocol 10.3).
EVENT_FOR_RESULT = {
    "succeeded": "executor_completed",
    "failed": "executor_failed",
    "cancelled": "cancelled",
    "stopped": "stopped",
}


class CoreDriver:
    """A :class:`ProviderCore` on a fake clock whose every published row is collected."""

    def __init__(self, definition: EndpointDefinition) -> None:
        self.definition = definition
        self.clock = FakeClock()
        self.published = Published()
        self.core = ProviderCore(
            definition,
            publish=self.published.publish,
            clock=self.clock,
            options=RunnerOptions(register_interval_s=1.0, status_interval_s=1.0),
        )
        self.endpoint_id = definition.endpoint_id
        self.instance_id = self.core.endpoint_instance_id

    async def exchange(self, request: ToolEnvelope) -> ToolEnvelope:
        """Hand ``request`` to the core and return the envelope correlated to it.

        A request the core drops is never answered: the wait fails after its bound.
        """
        await self.core.handle(to_value(request))
        return await self.published.wait_for(
            lambda e: e.request_id == request.request_id and e.message_type != "tool.event"
        )

    async def exchange_row(self, row: pa.StructArray, request_id: str) -> ToolEnvelope:
        """Hand a raw carrier row to the core; return the envelope answering ``request_id``."""
        await self.core.handle(row)
        return await self.published.wait_for(
            lambda e: e.request_id == request_id and e.message_type != "tool.event"
        )

    def invoke_request(
        self,
        operation: str,
        arguments: dict[str, Any] | None = None,
        *,
        invocation_id: str | None = None,
    ) -> ToolEnvelope:
        return request_for(
            self.endpoint_id, self.instance_id, operation, arguments, invocation_id=invocation_id
        )

    async def invoke(self, operation: str, arguments: dict[str, Any] | None = None) -> ToolEnvelope:
        return await self.exchange(self.invoke_request(operation, arguments))

    async def follow_up(
        self, operation: str, invocation_id: str, kind: str, command: str = "cancel"
    ) -> ToolEnvelope:
        """A status, result or control exchange for ``invocation_id`` (attempt ``att-1``)."""
        context = context_for(self.endpoint_id, operation, invocation_id)
        ids = {"request_id": fresh("req"), "endpoint_instance_id": self.instance_id}
        if kind == "status":
            request = make_status_request_envelope(context, **ids)
        elif kind == "result":
            request = make_result_request_envelope(context, **ids)
        else:
            request = make_control_request_envelope(command, context, **ids)  # type: ignore[arg-type]
        return await self.exchange(request)

    async def terminal_event(self, invoke: ToolEnvelope) -> ToolEnvelope:
        """The terminal ``tool.event`` of an accepted invocation (bounded wait)."""
        invocation_id = invoke.invocation_id
        return await self.published.wait_for(
            lambda e: (
                e.message_type == "tool.event"
                and e.invocation_id == invocation_id
                and e.payload["type"] in TERMINAL_EVENTS
            )
        )

    def events(self, invoke: ToolEnvelope) -> list[ToolEnvelope]:
        return self.published.events_for(str(invoke.invocation_id))

    def index_of(self, envelope: ToolEnvelope) -> int:
        return next(i for i, e in enumerate(self.published.envelopes) if e is envelope)


def carrier_row(request: ToolEnvelope, payload: Any) -> pa.StructArray:
    """``request`` as the Dora row carrying ``payload``, which the encoder would refuse."""
    row = {
        "protocol": request.protocol,
        "message_type": request.message_type,
        "request_id": request.request_id,
        "invocation_id": request.invocation_id,
        "attempt_id": request.attempt_id,
        "endpoint_id": request.endpoint_id,
        "endpoint_instance_id": request.endpoint_instance_id,
        "operation": request.operation,
        "sequence": None,
        "payload_json": json.dumps(payload),
    }
    return pa.RecordBatch.from_pylist([row], schema=TOOL_MESSAGE_SCHEMA).to_struct_array()
