"""ProviderCore: registration, Registry responses, status, dispatch ordering, shutdown."""

from __future__ import annotations

import asyncio
import logging
import re

import pyarrow as pa
import pytest
from forge_msgs.tool import TOOL_MESSAGE_SCHEMA
from forge_tool import (
    TOOL_ENDPOINT_PROTOCOL,
    EndpointRegistryResponse,
    EndpointStatus,
    ToolAccepted,
    ToolContext,
    ToolControlResponse,
    ToolEndpointDescriptor,
    ToolEnvelope,
    ToolError,
    ToolEvent,
    ToolEventEmitter,
    ToolExecutionKey,
    ToolExecutionStatus,
    ToolOperationDescriptor,
    ToolRequest,
    ToolResult,
    ToolResultResponse,
    make_endpoint_registry_response_envelope,
)

from doraforge.nodes.runner import EndpointDefinition, ProviderCore, RunnerOptions
from tests.nodes.provider_harness import WAIT_S, Published, request_for, to_value
from tests.support.clock import FakeClock

pytestmark = pytest.mark.anyio

ENDPOINT = "fake"


class LookupQuery:
    """Query that answers with its argument once ``gate`` is open."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()

    async def query(self, request: ToolRequest, context: ToolContext) -> ToolResult:
        await self.gate.wait()
        return ToolResult(status="succeeded", outputs=dict(request.arguments))


class ScriptedAction:
    """Action that emits an event inside ``start`` and finishes when the test says so."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.emitters: dict[ToolExecutionKey, ToolEventEmitter] = {}
        self.results: dict[ToolExecutionKey, ToolResult] = {}

    async def start(
        self, request: ToolRequest, context: ToolContext, events: ToolEventEmitter
    ) -> ToolAccepted:
        await self.gate.wait()
        await events.emit(ToolEvent(type="progress", data={"step": "inside start"}))
        self.emitters[context.execution_key] = events
        return ToolAccepted()

    async def finish(self, key: ToolExecutionKey) -> None:
        self.results[key] = ToolResult(status="succeeded")
        await self.emitters[key].emit(ToolEvent(type="executor_completed"))

    async def cancel(self, key: ToolExecutionKey, reason: str | None = None) -> ToolControlResponse:
        return ToolControlResponse(command="cancel", status="unsupported")

    async def status(self, key: ToolExecutionKey) -> ToolExecutionStatus:
        return ToolExecutionStatus(phase="completed" if key in self.results else "running")

    async def result(self, key: ToolExecutionKey) -> ToolResultResponse:
        if key in self.results:
            return ToolResultResponse(status="available", result=self.results[key])
        return ToolResultResponse(status="pending")


DESCRIPTOR = ToolEndpointDescriptor(
    protocol_version=TOOL_ENDPOINT_PROTOCOL,
    endpoint_id=ENDPOINT,
    operations=(
        ToolOperationDescriptor(name="lookup", semantics="query", max_concurrency=8),
        ToolOperationDescriptor(
            name="act", semantics="action", status_supported=True, max_concurrency=1
        ),
    ),
)


class Provider:
    """A ProviderCore wired to a fake clock and a collecting publisher."""

    def __init__(self, definition: EndpointDefinition | None = None) -> None:
        self.lookup = LookupQuery()
        self.act = ScriptedAction()
        self.definition = definition or EndpointDefinition(
            descriptor=DESCRIPTOR, operations={"lookup": self.lookup, "act": self.act}
        )
        self.clock = FakeClock()
        self.published = Published()
        self.core = ProviderCore(
            self.definition,
            publish=self.published.publish,
            clock=self.clock,
            options=RunnerOptions(register_interval_s=1.0, status_interval_s=2.0),
        )

    def request(self, operation: str, arguments: dict[str, object] | None = None) -> ToolEnvelope:
        return request_for(ENDPOINT, self.core.endpoint_instance_id, operation, arguments)

    def types(self) -> list[str]:
        """Published message types, health snapshots left out."""
        return [e.message_type for e in self.tool_messages()]

    def tool_messages(self) -> list[ToolEnvelope]:
        return [e for e in self.published.envelopes if e.message_type != "endpoint.status"]

    async def answer_registration(self, response: EndpointRegistryResponse) -> None:
        register = self.published.of_type("endpoint.register")[-1]
        envelope = make_endpoint_registry_response_envelope(response, register)
        await self.core.handle(to_value(envelope))


@pytest.fixture
def provider() -> Provider:
    return Provider()


def accepted(revision: int = 1, lease_ttl_ms: int = 5_000) -> EndpointRegistryResponse:
    return EndpointRegistryResponse(
        operation="register",
        status="accepted",
        registry_revision=revision,
        lease_ttl_ms=lease_ttl_ms,
    )


def test_every_core_gets_a_fresh_endpoint_instance_id() -> None:
    first, second = Provider().core, Provider().core
    assert re.fullmatch(r"epinst-[0-9a-f]{32}", first.endpoint_instance_id)
    assert first.endpoint_instance_id != second.endpoint_instance_id


async def test_start_registers_the_descriptor_then_publishes_status(provider: Provider) -> None:
    provider.core.start()
    register, status = provider.published.envelopes
    assert register.message_type == "endpoint.register"
    assert register.endpoint_instance_id == provider.core.endpoint_instance_id
    assert register.payload["descriptor"]["endpoint_id"] == ENDPOINT
    assert [op["name"] for op in register.payload["descriptor"]["operations"]] == [
        "lookup",
        "act",
    ]
    assert status.message_type == "endpoint.status"
    assert status.payload["status"]["state"] == "ready"


async def test_registration_is_renewed_each_interval_on_the_clock(provider: Provider) -> None:
    provider.core.start()
    provider.clock.advance(0.5)
    provider.core.tick()
    assert len(provider.published.of_type("endpoint.register")) == 1
    provider.clock.advance(0.5)
    provider.core.tick()
    registers = provider.published.of_type("endpoint.register")
    assert len(registers) == 2
    assert registers[0].request_id != registers[1].request_id
    assert len(provider.published.of_type("endpoint.status")) == 1  # status every 2 s
    provider.clock.advance(1.0)
    provider.core.tick()
    assert len(provider.published.of_type("endpoint.register")) == 3
    assert len(provider.published.of_type("endpoint.status")) == 2


async def test_accepted_registration_is_recorded(provider: Provider) -> None:
    provider.core.start()
    await provider.answer_registration(accepted(revision=7))
    state = provider.core.registration
    assert state.registered
    assert state.registry_revision == 7
    assert state.lease_ttl_ms == 5_000


async def test_short_lease_shortens_the_renewal_interval(provider: Provider) -> None:
    provider.core.start()
    await provider.answer_registration(accepted(lease_ttl_ms=600))
    provider.clock.advance(0.2)
    provider.core.tick()
    assert len(provider.published.of_type("endpoint.register")) == 2


async def test_rejected_changed_descriptor_is_logged_loudly(
    provider: Provider, caplog: pytest.LogCaptureFixture
) -> None:
    provider.core.start()
    error = ToolError(code="ENDPOINT_DESCRIPTOR_CHANGED", message="descriptor differs")
    rejected = EndpointRegistryResponse(
        operation="register", status="rejected", registry_revision=3, error=error
    )
    with caplog.at_level(logging.ERROR, logger="nodes"):
        await provider.answer_registration(rejected)
    assert not provider.core.registration.registered
    assert provider.core.registration.last_rejection == error
    assert any(
        r.levelno == logging.ERROR and "REGISTRATION REJECTED" in r.getMessage()
        for r in caplog.records
    )


async def test_registry_response_to_an_unknown_request_is_ignored(provider: Provider) -> None:
    provider.core.start()
    register = provider.published.of_type("endpoint.register")[0]
    stranger = ToolEnvelope(
        protocol=register.protocol,
        message_type="endpoint.register",
        request_id="req-not-sent-by-us",
        endpoint_id=ENDPOINT,
        endpoint_instance_id=provider.core.endpoint_instance_id,
        payload=register.payload,
    )
    response = make_endpoint_registry_response_envelope(accepted(), stranger)
    await provider.core.handle(to_value(response))
    assert provider.core.registration.accepted_count == 0


async def test_query_response_is_published(provider: Provider) -> None:
    await provider.core.handle(to_value(provider.request("lookup", {"q": "cup"})))
    (response,) = provider.published.envelopes
    assert response.message_type == "tool.invoke.response"
    assert response.payload["result"]["outputs"] == {"q": "cup"}


async def test_action_acceptance_is_published_before_its_events(provider: Provider) -> None:
    request = provider.request("act")
    await provider.core.handle(to_value(request))
    key = ToolExecutionKey(str(request.invocation_id), str(request.attempt_id))
    await provider.act.finish(key)
    assert provider.types() == ["tool.invoke.response", "tool.event", "tool.event"]
    response, early, terminal = provider.tool_messages()
    assert response.payload["outcome"] == "accepted"
    assert (early.sequence, early.payload["type"]) == (0, "progress")
    assert (terminal.sequence, terminal.payload["type"]) == (1, "executor_completed")


async def test_a_slow_action_start_does_not_block_a_query(provider: Provider) -> None:
    provider.act.gate.clear()
    action = provider.core.submit(to_value(provider.request("act")))
    query = provider.core.submit(to_value(provider.request("lookup", {"q": 1})))
    assert action is not None
    assert query is not None
    await asyncio.wait_for(query, WAIT_S)
    assert provider.types() == ["tool.invoke.response"]
    assert not action.done()
    provider.act.gate.set()
    await asyncio.wait_for(action, WAIT_S)
    assert provider.types()[1:] == ["tool.invoke.response", "tool.event"]


async def test_a_status_snapshot_is_published_when_an_action_starts_and_ends(
    provider: Provider,
) -> None:
    request = provider.request("act")
    await provider.core.handle(to_value(request))
    busy = provider.published.of_type("endpoint.status")[-1].payload["status"]
    assert busy["details"]["saturated_operations"] == ["act"]
    await provider.act.finish(ToolExecutionKey(str(request.invocation_id), "att-1"))
    ready = provider.published.of_type("endpoint.status")[-1].payload["status"]
    assert (ready["state"], ready["active_invocations"]) == ("ready", 0)


async def test_status_is_busy_while_an_operation_is_at_capacity(provider: Provider) -> None:
    request = provider.request("act")
    await provider.core.handle(to_value(request))
    busy = provider.core.status_snapshot()
    assert (busy.state, busy.active_invocations) == ("busy", 1)
    assert busy.details["saturated_operations"] == ["act"]
    await provider.act.finish(ToolExecutionKey(str(request.invocation_id), "att-1"))
    ready = provider.core.status_snapshot()
    assert (ready.state, ready.active_invocations) == ("ready", 0)


async def test_status_source_of_the_definition_is_published() -> None:
    base = Provider()
    definition = EndpointDefinition(
        descriptor=DESCRIPTOR,
        operations=base.definition.operations,
        status=lambda: EndpointStatus(endpoint_id=ENDPOINT, state="degraded", details={"x": 1}),
    )
    provider = Provider(definition)
    provider.core.start()
    (status,) = provider.published.of_type("endpoint.status")
    expected = {"state": "degraded", "active_invocations": 0, "details": {"x": 1}}
    assert status.payload["status"] == expected


async def test_stop_unregisters_and_ends_renewals(provider: Provider) -> None:
    provider.core.start()
    await provider.core.stop()
    assert provider.types()[-1] == "endpoint.unregister"
    unregister = provider.published.envelopes[-1]
    assert unregister.endpoint_instance_id == provider.core.endpoint_instance_id
    count = len(provider.published.envelopes)
    provider.clock.advance(10)
    provider.core.tick()
    assert provider.core.submit(to_value(provider.request("lookup"))) is None
    assert len(provider.published.envelopes) == count


async def test_stop_waits_for_inflight_requests_before_unregistering(provider: Provider) -> None:
    provider.lookup.gate.clear()
    task = provider.core.submit(to_value(provider.request("lookup", {"q": 2})))
    stopping = asyncio.ensure_future(provider.core.stop())
    await asyncio.sleep(0)
    provider.lookup.gate.set()
    await asyncio.wait_for(stopping, WAIT_S)
    assert task is not None
    assert task.done()
    assert provider.types() == ["tool.invoke.response", "endpoint.unregister"]


def _carrier(**overrides: object) -> pa.StructArray:
    row: dict[str, object] = {
        "protocol": TOOL_ENDPOINT_PROTOCOL,
        "message_type": "tool.invoke.request",
        "request_id": "r",
        "invocation_id": "i",
        "attempt_id": "a",
        "endpoint_id": ENDPOINT,
        "endpoint_instance_id": None,
        "operation": "lookup",
        "sequence": None,
        "payload_json": "{}",
    }
    row.update(overrides)
    batch = pa.RecordBatch.from_pylist([row], schema=TOOL_MESSAGE_SCHEMA)
    return batch.to_struct_array()


async def test_malformed_and_foreign_inputs_are_dropped(
    provider: Provider, caplog: pytest.LogCaptureFixture
) -> None:
    instance = provider.core.endpoint_instance_id
    two_rows = pa.concat_arrays([to_value(provider.request("lookup"))] * 2)
    malformed: list[object] = [
        b"\x00\x01",
        pa.array([1, 2, 3]),
        pa.array([{"message_type": 5}]),
        two_rows,
        _carrier(endpoint_instance_id=instance, payload_json="{not json"),
        _carrier(endpoint_instance_id="epinst-someone-else"),
        _carrier(endpoint_instance_id=instance, message_type="tool.event", sequence=0),
        _carrier(endpoint_id="other", message_type="endpoint.registry.response"),
    ]
    with caplog.at_level(logging.WARNING, logger="nodes"):
        for value in malformed:
            await provider.core.handle(value)
    assert provider.published.envelopes == []
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) >= 7
    await provider.core.handle(to_value(provider.request("lookup", {"q": "still alive"})))
    assert provider.published.envelopes[0].payload["result"]["outputs"] == {"q": "still alive"}


async def test_an_undeclared_operation_on_our_route_gets_a_correlated_tool_error(
    provider: Provider,
) -> None:
    request = provider.request("no_such_operation")
    await provider.core.handle(to_value(request))
    (answer,) = provider.published.envelopes
    assert answer.message_type == "tool.error"
    assert (answer.request_id, answer.operation) == (request.request_id, "no_such_operation")
    assert answer.payload["error"]["code"] == "FORGE_PROTOCOL_UNKNOWN_OPERATION"
