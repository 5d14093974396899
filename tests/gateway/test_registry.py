"""The Endpoint Registry follows forge.tool.endpoint/v1alpha1 section 8 rule by rule."""

from __future__ import annotations

import dataclasses

import pytest
from forge_tool import (
    EndpointState,
    EndpointStatus,
    ToolEndpointDescriptor,
    ToolEnvelope,
    ToolOperationDescriptor,
    endpoint_registry_response_from_payload,
    make_endpoint_status_envelope,
    make_registration_envelope,
    make_unregister_envelope,
)

from doraforge.gateway.core import Gateway
from doraforge.gateway.registry import EndpointRecord, EndpointRegistry
from doraforge.nodes.mock.endpoint import DESCRIPTOR
from doraforge.wire.toolcodec import WireMessage
from tests.gateway.harness import mock_config
from tests.support.clock import FakeClock

TTL_MS = 3000


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def gone() -> list[tuple[str, str, str]]:
    return []


@pytest.fixture
def registry(gone: list[tuple[str, str, str]]) -> EndpointRegistry:
    return EndpointRegistry(
        ["mock", "other"], lease_ttl_ms=TTL_MS, on_instance_gone=lambda *args: gone.append(args)
    )


def register(instance: str, descriptor: ToolEndpointDescriptor = DESCRIPTOR) -> ToolEnvelope:
    return make_registration_envelope(
        descriptor, endpoint_instance_id=instance, request_id=f"reg-{instance}"
    )


def unregister(instance: str, endpoint_id: str = "mock") -> ToolEnvelope:
    return make_unregister_envelope(
        endpoint_id=endpoint_id, endpoint_instance_id=instance, request_id=f"unreg-{instance}"
    )


def status(instance: str, state: EndpointState = "ready", active: int = 0) -> ToolEnvelope:
    return make_endpoint_status_envelope(
        EndpointStatus(endpoint_id="mock", state=state, active_invocations=active),
        endpoint_instance_id=instance,
    )


def current(registry: EndpointRegistry, endpoint_id: str = "mock") -> EndpointRecord:
    """The current record of ``endpoint_id``, which the test expects to exist."""
    record = registry.current(endpoint_id)
    assert record is not None
    return record


def changed_descriptor() -> ToolEndpointDescriptor:
    operations = list(DESCRIPTOR.operations)
    operations[0] = dataclasses.replace(operations[0], max_concurrency=2)
    return dataclasses.replace(DESCRIPTOR, operations=tuple(operations))


def test_first_registration_is_accepted_and_bumps_the_revision_once(
    registry: EndpointRegistry, clock: FakeClock, gone: list[tuple[str, str, str]]
) -> None:
    response = registry.register("mock", register("a"), clock.monotonic())
    assert response.status == "accepted"
    assert response.registry_revision == 1
    assert response.lease_ttl_ms == TTL_MS
    assert response.error is None
    record = registry.current("mock")
    assert record is not None
    assert record.instance_id == "a"
    assert record.descriptor == DESCRIPTOR
    assert record.lease_deadline == clock.monotonic() + TTL_MS / 1000
    assert registry.revision == 1
    assert gone == []


def test_equal_descriptor_renewal_keeps_the_revision_and_extends_the_lease(
    registry: EndpointRegistry, clock: FakeClock
) -> None:
    registry.register("mock", register("a"), clock.monotonic())
    clock.advance(2.0)
    response = registry.register("mock", register("a"), clock.monotonic())
    assert response.status == "accepted"
    assert response.registry_revision == 1
    assert current(registry).lease_deadline == clock.monotonic() + TTL_MS / 1000
    clock.advance(2.0)  # past the first lease, within the renewed one
    assert registry.expire(clock.monotonic()) == []
    assert current(registry).instance_id == "a"
    assert registry.revision == 1


def test_changed_descriptor_from_the_current_instance_is_rejected_without_effect(
    registry: EndpointRegistry, clock: FakeClock, gone: list[tuple[str, str, str]]
) -> None:
    registry.register("mock", register("a"), clock.monotonic())
    deadline = current(registry).lease_deadline
    clock.advance(1.0)
    response = registry.register("mock", register("a", changed_descriptor()), clock.monotonic())
    assert response.status == "rejected"
    assert response.error is not None
    assert response.error.code == "FORGE_REGISTRY_DESCRIPTOR_CHANGED"
    assert response.lease_ttl_ms is None
    assert response.registry_revision == 1
    record = current(registry)
    assert record.descriptor == DESCRIPTOR  # not replaced
    assert record.lease_deadline == deadline  # not renewed
    assert registry.revision == 1
    assert gone == []


def test_different_instance_on_the_trusted_route_replaces_atomically(clock: FakeClock) -> None:
    gone: list[tuple[str, str, str]] = []
    observed: list[str | None] = []
    registry: EndpointRegistry  # bound below, before the callback can run

    def on_gone(endpoint: str, instance: str, reason: str) -> None:
        gone.append((endpoint, instance, reason))
        current = registry.current(endpoint)
        observed.append(current.instance_id if current else None)

    registry = EndpointRegistry(["mock"], lease_ttl_ms=TTL_MS, on_instance_gone=on_gone)
    registry.register("mock", register("a"), clock.monotonic())
    response = registry.register("mock", register("b", changed_descriptor()), clock.monotonic())
    assert response.status == "accepted"
    assert response.registry_revision == 2
    assert registry.revision == 2
    assert current(registry).instance_id == "b"
    assert current(registry).descriptor == changed_descriptor()
    assert gone == [("mock", "a", "replaced")]
    # No transient absent state: the callback already saw the new instance as current.
    assert observed == ["b"]


def test_unregister_of_the_current_instance_removes_it_and_bumps(
    registry: EndpointRegistry, clock: FakeClock, gone: list[tuple[str, str, str]]
) -> None:
    registry.register("mock", register("a"), clock.monotonic())
    response = registry.unregister("mock", unregister("a"), clock.monotonic())
    assert response.status == "accepted"
    assert response.registry_revision == 2
    assert response.lease_ttl_ms is None
    assert response.error is None
    assert registry.current("mock") is None
    assert gone == [("mock", "a", "unregistered")]


def test_unregister_when_absent_is_accepted_without_change(
    registry: EndpointRegistry, clock: FakeClock, gone: list[tuple[str, str, str]]
) -> None:
    response = registry.unregister("mock", unregister("a"), clock.monotonic())
    assert response.status == "accepted"
    assert response.registry_revision == 0
    assert registry.revision == 0
    assert gone == []


def test_unregister_from_a_stale_instance_is_rejected_without_change(
    registry: EndpointRegistry, clock: FakeClock, gone: list[tuple[str, str, str]]
) -> None:
    registry.register("mock", register("a"), clock.monotonic())
    registry.register("mock", register("b"), clock.monotonic())
    gone.clear()
    response = registry.unregister("mock", unregister("a"), clock.monotonic())
    assert response.status == "rejected"
    assert response.error is not None
    assert response.error.code == "STALE_ENDPOINT_INSTANCE"
    assert response.registry_revision == 2
    assert current(registry).instance_id == "b"
    assert registry.revision == 2
    assert gone == []


def test_unregister_with_a_payload_is_rejected(
    registry: EndpointRegistry, clock: FakeClock
) -> None:
    registry.register("mock", register("a"), clock.monotonic())
    envelope = dataclasses.replace(unregister("a"), payload={"reason": "bye"})
    response = registry.unregister("mock", envelope, clock.monotonic())
    assert response.status == "rejected"
    assert registry.current("mock") is not None


def test_route_endpoint_mismatch_is_rejected_without_state_change(
    registry: EndpointRegistry, clock: FakeClock, gone: list[tuple[str, str, str]]
) -> None:
    other = dataclasses.replace(DESCRIPTOR, endpoint_id="other")
    response = registry.register("mock", register("x", other), clock.monotonic())
    assert response.status == "rejected"
    assert response.error is not None
    assert response.error.code == "FORGE_REGISTRY_ROUTE_MISMATCH"
    assert registry.current("mock") is None
    assert registry.current("other") is None
    registry.register("mock", register("a"), clock.monotonic())
    response = registry.unregister("other", unregister("a", "mock"), clock.monotonic())
    assert response.status == "rejected"
    assert current(registry).instance_id == "a"
    assert registry.revision == 1
    assert gone == []


def test_descriptor_endpoint_must_match_the_envelope_endpoint(
    registry: EndpointRegistry, clock: FakeClock
) -> None:
    other = dataclasses.replace(DESCRIPTOR, endpoint_id="other")
    envelope = dataclasses.replace(register("x", other), endpoint_id="mock")
    response = registry.register("mock", envelope, clock.monotonic())
    assert response.status == "rejected"
    assert registry.current("mock") is None
    assert registry.revision == 0


def test_unconfigured_route_is_rejected(registry: EndpointRegistry, clock: FakeClock) -> None:
    ghost = dataclasses.replace(DESCRIPTOR, endpoint_id="ghost")
    response = registry.register("ghost", register("g", ghost), clock.monotonic())
    assert response.status == "rejected"
    assert response.error is not None
    assert response.error.code == "FORGE_REGISTRY_UNKNOWN_ROUTE"
    assert registry.current("ghost") is None
    assert registry.revision == 0


def test_lease_expiry_removes_the_record_and_bumps_once(
    registry: EndpointRegistry, clock: FakeClock, gone: list[tuple[str, str, str]]
) -> None:
    registry.register("mock", register("a"), clock.monotonic())
    clock.advance(TTL_MS / 1000 - 0.001)
    assert registry.expire(clock.monotonic()) == []
    clock.advance(0.002)
    expired = registry.expire(clock.monotonic())
    assert [record.instance_id for record in expired] == ["a"]
    assert registry.current("mock") is None
    assert registry.revision == 2
    assert gone == [("mock", "a", "lease_expired")]
    assert registry.expire(clock.monotonic() + 100) == []
    assert registry.revision == 2


def test_registration_after_expiry_is_a_new_absent_to_current_change(
    registry: EndpointRegistry, clock: FakeClock
) -> None:
    registry.register("mock", register("a"), clock.monotonic())
    clock.advance(TTL_MS / 1000 + 1)
    registry.expire(clock.monotonic())
    response = registry.register("mock", register("a"), clock.monotonic())
    assert response.status == "accepted"
    assert response.registry_revision == 3


def test_status_snapshots_are_stored_only_from_the_current_instance(
    registry: EndpointRegistry, clock: FakeClock
) -> None:
    assert registry.record_status("mock", status("a"), clock.monotonic()) is False
    registry.register("mock", register("a"), clock.monotonic())
    clock.advance(0.5)
    assert registry.record_status("mock", status("a", "busy", 1), clock.monotonic()) is True
    record = current(registry)
    assert record.status is not None
    assert record.status.state == "busy"
    assert record.status.active_invocations == 1
    assert record.status_at == clock.monotonic()
    assert registry.record_status("mock", status("stale", "unavailable"), 0.0) is False
    assert registry.record_status("other", status("a", "degraded"), 0.0) is False
    assert record.status.state == "busy"
    assert registry.revision == 1  # a status is not a Registry mutation


def test_a_status_snapshot_does_not_renew_the_lease(
    registry: EndpointRegistry, clock: FakeClock
) -> None:
    registry.register("mock", register("a"), clock.monotonic())
    clock.advance(TTL_MS / 1000 - 0.5)
    registry.record_status("mock", status("a"), clock.monotonic())
    clock.advance(1.0)
    assert [r.instance_id for r in registry.expire(clock.monotonic())] == ["a"]


def test_every_response_reports_the_revision_after_its_decision(
    registry: EndpointRegistry, clock: FakeClock
) -> None:
    revisions = [
        registry.register("mock", register("a"), 0.0).registry_revision,
        registry.register("mock", register("a"), 0.0).registry_revision,
        registry.register("mock", register("a", changed_descriptor()), 0.0).registry_revision,
        registry.register("mock", register("b"), 0.0).registry_revision,
        registry.unregister("mock", unregister("a"), 0.0).registry_revision,
        registry.unregister("mock", unregister("b"), 0.0).registry_revision,
        registry.unregister("mock", unregister("b"), 0.0).registry_revision,
    ]
    assert revisions == [1, 1, 1, 2, 2, 3, 3]


def test_changed_operation_list_counts_as_a_changed_descriptor(
    registry: EndpointRegistry, clock: FakeClock
) -> None:
    registry.register("mock", register("a"), 0.0)
    smaller = dataclasses.replace(DESCRIPTOR, operations=DESCRIPTOR.operations[:1])
    assert registry.register("mock", register("a", smaller), 0.0).status == "rejected"
    extra = ToolOperationDescriptor(name="extra", semantics="query")
    bigger = dataclasses.replace(DESCRIPTOR, operations=(*DESCRIPTOR.operations, extra))
    assert registry.register("mock", register("a", bigger), 0.0).status == "rejected"
    assert current(registry).descriptor == DESCRIPTOR


@pytest.mark.anyio
async def test_gateway_answers_registry_requests_on_the_trusted_route(clock: FakeClock) -> None:
    sent: list[tuple[str, WireMessage]] = []
    gateway = Gateway(mock_config(), send=lambda route, env: sent.append((route, env)), clock=clock)
    gateway.on_message("mock", register("a"))
    gateway.on_message("mock", register("a", changed_descriptor()))
    gateway.on_message("mock", unregister("a"))
    assert [route for route, _ in sent] == ["mock", "mock", "mock"]
    answers = [envelope for _, envelope in sent]
    assert [env.message_type for env in answers] == ["endpoint.registry.response"] * 3
    assert [env.request_id for env in answers] == ["reg-a", "reg-a", "unreg-a"]
    assert {env.endpoint_instance_id for env in answers} == {"a"}
    decoded = [endpoint_registry_response_from_payload(env.payload) for env in answers]
    assert [(r.operation, r.status, r.registry_revision) for r in decoded] == [
        ("register", "accepted", 1),
        ("register", "rejected", 1),
        ("unregister", "accepted", 2),
    ]


@pytest.mark.anyio
async def test_gateway_expires_leases_on_tick(clock: FakeClock) -> None:
    gateway = Gateway(mock_config(), send=lambda route, env: None, clock=clock)
    gateway.on_message("mock", register("a"))
    clock.advance(gateway.config.lease_ttl_ms / 1000 + 0.1)
    gateway.runtime.tick()
    assert gateway.registry.current("mock") is None
    assert gateway.registry.revision == 2
