"""The Endpoint Registry of ``forge.tool.endpoint/v1alpha1`` section 8.

It holds at most one current availability record per configured endpoint. The trusted
Dora route, not message content, authorises an endpoint. ``registry_revision`` counts
availability changes in this process only: absent-to-current registration, atomic
instance replacement, matching unregister and lease expiry each bump it exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from forge_tool import (
    EndpointRegistryResponse,
    EndpointStatus,
    ToolEndpointDescriptor,
    ToolEnvelope,
    ToolError,
    ToolOperationDescriptor,
    ToolProtocolError,
    endpoint_status_from_envelope,
    validate_registration_envelope,
)

#: Why an instance stopped being current; in-flight work on it becomes ``unknown``.
type GoneReason = str
type InstanceGone = Callable[[str, str, GoneReason], None]


@dataclass
class EndpointRecord:
    """The current instance of one endpoint and its lease."""

    endpoint_id: str
    instance_id: str
    descriptor: ToolEndpointDescriptor
    lease_deadline: float
    registered_at: float
    status: EndpointStatus | None = None
    status_at: float | None = None
    renewals: int = field(default=0)

    def operation(self, name: str) -> ToolOperationDescriptor | None:
        """Return the descriptor operation called ``name`` or ``None``."""
        return next((op for op in self.descriptor.operations if op.name == name), None)


class EndpointRegistry:
    """Availability state for the configured endpoints, driven by an injected clock."""

    def __init__(
        self,
        routes: Iterable[str],
        *,
        lease_ttl_ms: int,
        on_instance_gone: InstanceGone | None = None,
    ) -> None:
        self._routes = frozenset(routes)
        self._lease_ttl_ms = lease_ttl_ms
        self._records: dict[str, EndpointRecord] = {}
        self._on_gone = on_instance_gone or (lambda endpoint, instance, reason: None)
        self.revision = 0

    def current(self, endpoint_id: str) -> EndpointRecord | None:
        """Return the current record of ``endpoint_id``; expiry is applied by :meth:`expire`."""
        return self._records.get(endpoint_id)

    def records(self) -> list[EndpointRecord]:
        """Return all current records ordered by endpoint id."""
        return [self._records[key] for key in sorted(self._records)]

    def register(self, route: str, envelope: ToolEnvelope, now: float) -> EndpointRegistryResponse:
        """Apply ``endpoint.register`` received on trusted ``route`` at monotonic ``now``."""
        rejection = self._route_rejection(route, envelope, "register")
        if rejection is not None:
            return rejection
        try:
            descriptor = validate_registration_envelope(envelope)
        except ToolProtocolError as exc:
            return self._rejected("register", exc.code, exc.message, path=exc.path)
        instance = str(envelope.endpoint_instance_id)
        record = self._records.get(route)
        if record is not None and record.instance_id == instance:
            if record.descriptor != descriptor:
                return self._rejected(
                    "register",
                    "FORGE_REGISTRY_DESCRIPTOR_CHANGED",
                    "the current instance may not change its descriptor; restart it",
                )
            record.lease_deadline = now + self._lease_ttl_ms / 1000
            record.renewals += 1
            return self._accepted_register()
        self._records[route] = EndpointRecord(
            endpoint_id=route,
            instance_id=instance,
            descriptor=descriptor,
            lease_deadline=now + self._lease_ttl_ms / 1000,
            registered_at=now,
        )
        self.revision += 1
        if record is not None:
            self._on_gone(route, record.instance_id, "replaced")
        return self._accepted_register()

    def unregister(
        self, route: str, envelope: ToolEnvelope, now: float
    ) -> EndpointRegistryResponse:
        """Apply ``endpoint.unregister`` received on trusted ``route``."""
        del now  # unregister is not time-dependent; kept for a uniform signature
        rejection = self._route_rejection(route, envelope, "unregister")
        if rejection is not None:
            return rejection
        if envelope.payload:
            return self._rejected("unregister", "FORGE_PROTOCOL_INVALID_PAYLOAD", "must be {}")
        record = self._records.get(route)
        if record is None:
            return EndpointRegistryResponse("unregister", "accepted", self.revision)
        if record.instance_id != envelope.endpoint_instance_id:
            return self._rejected(
                "unregister", "STALE_ENDPOINT_INSTANCE", "endpoint instance is not current"
            )
        del self._records[route]
        self.revision += 1
        self._on_gone(route, record.instance_id, "unregistered")
        return EndpointRegistryResponse("unregister", "accepted", self.revision)

    def record_status(self, route: str, envelope: ToolEnvelope, now: float) -> bool:
        """Store an ``endpoint.status`` snapshot from the current instance; not a mutation."""
        record = self._records.get(route)
        if (
            record is None
            or envelope.endpoint_id != route
            or envelope.endpoint_instance_id != record.instance_id
        ):
            return False
        try:
            record.status = endpoint_status_from_envelope(envelope)
        except (ToolProtocolError, ValueError):
            return False
        record.status_at = now
        return True

    def expire(self, now: float) -> list[EndpointRecord]:
        """Remove records whose lease ended before ``now``; each bumps the revision once."""
        expired = [r for r in self._records.values() if r.lease_deadline <= now]
        for record in expired:
            del self._records[record.endpoint_id]
            self.revision += 1
            self._on_gone(record.endpoint_id, record.instance_id, "lease_expired")
        return expired

    def _route_rejection(
        self, route: str, envelope: ToolEnvelope, operation: str
    ) -> EndpointRegistryResponse | None:
        if route not in self._routes:
            return self._rejected(operation, "FORGE_REGISTRY_UNKNOWN_ROUTE", "route not configured")
        if envelope.endpoint_id != route:
            return self._rejected(
                operation,
                "FORGE_REGISTRY_ROUTE_MISMATCH",
                f"route authorises endpoint {route!r}, not {envelope.endpoint_id!r}",
            )
        return None

    def _accepted_register(self) -> EndpointRegistryResponse:
        return EndpointRegistryResponse(
            "register", "accepted", self.revision, lease_ttl_ms=self._lease_ttl_ms
        )

    def _rejected(
        self, operation: str, code: str, message: str, *, path: str | None = None
    ) -> EndpointRegistryResponse:
        details = {"path": path} if path else {}
        return EndpointRegistryResponse(
            operation,  # type: ignore[arg-type]
            "rejected",
            self.revision,
            error=ToolError(code=code, message=message, details=details),
        )
