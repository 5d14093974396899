"""Endpoint registration as lease renewal (PROTOCOL.md section 8), provider side.

The provider announces itself immediately at start and then periodically; a
descriptor-equal registration from the current instance renews the Gateway lease. The
renewal interval shrinks to a third of the granted lease when the lease is short, so a
single lost message never lets the lease lapse.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from forge_tool import (
    EndpointRegistryResponse,
    ToolEndpointDescriptor,
    ToolEnvelope,
    ToolError,
    endpoint_registry_response_from_payload,
    make_registration_envelope,
    make_unregister_envelope,
)

from doraforge.nodes.definition import MIN_RENEWAL_INTERVAL_S

logger = logging.getLogger(__name__)

# Responses correlate by request_id; older outstanding ids are forgotten first.
_MAX_OUTSTANDING = 64


@dataclass
class RegistrationState:
    """What the Gateway last decided about this instance's registration."""

    accepted_count: int = 0
    rejected_count: int = 0
    registry_revision: int | None = None
    lease_ttl_ms: int | None = None
    last_rejection: ToolError | None = None

    @property
    def registered(self) -> bool:
        """True once a registration was accepted and no later one was rejected."""
        return self.accepted_count > 0 and self.last_rejection is None


class Registration:
    """Builds register/unregister envelopes and applies correlated Registry responses."""

    def __init__(
        self,
        descriptor: ToolEndpointDescriptor,
        *,
        endpoint_instance_id: str,
        interval_s: float,
    ) -> None:
        self._descriptor = descriptor
        self._instance_id = endpoint_instance_id
        self._configured_interval_s = interval_s
        self._interval_s = interval_s
        self._outstanding: OrderedDict[str, str] = OrderedDict()
        self.state = RegistrationState()

    @property
    def interval_s(self) -> float:
        """Return the current renewal interval in seconds."""
        return self._interval_s

    def register_envelope(self) -> ToolEnvelope:
        """Return a fresh ``endpoint.register`` and remember its request id."""
        request_id = self._remember("register")
        return make_registration_envelope(
            self._descriptor, endpoint_instance_id=self._instance_id, request_id=request_id
        )

    def unregister_envelope(self) -> ToolEnvelope:
        """Return a fresh ``endpoint.unregister`` and remember its request id."""
        request_id = self._remember("unregister")
        return make_unregister_envelope(
            endpoint_id=self._descriptor.endpoint_id,
            endpoint_instance_id=self._instance_id,
            request_id=request_id,
        )

    def apply(self, envelope: ToolEnvelope) -> bool:
        """Apply one validated ``endpoint.registry.response``; False when it is not ours.

        Raises ``ToolProtocolError`` when the payload is not a valid Registry response.
        """
        if (
            envelope.endpoint_id != self._descriptor.endpoint_id
            or envelope.endpoint_instance_id != self._instance_id
        ):
            return False
        operation = self._outstanding.pop(envelope.request_id or "", None)
        if operation is None:
            logger.debug("ignoring uncorrelated registry response %s", envelope.request_id)
            return False
        response = endpoint_registry_response_from_payload(envelope.payload)
        if response.operation != operation:
            logger.warning(
                "registry response %s answers %s, expected %s; ignored",
                envelope.request_id,
                response.operation,
                operation,
            )
            return False
        if response.status == "accepted":
            self._accepted(response)
        else:
            self._rejected(response)
        return True

    def _remember(self, operation: str) -> str:
        request_id = f"{operation[:5]}-{uuid.uuid4().hex}"
        self._outstanding[request_id] = operation
        while len(self._outstanding) > _MAX_OUTSTANDING:
            self._outstanding.popitem(last=False)
        return request_id

    def _accepted(self, response: EndpointRegistryResponse) -> None:
        state = self.state
        if response.operation == "unregister":
            logger.info("endpoint %s unregistered", self._descriptor.endpoint_id)
            return
        if not state.registered or state.registry_revision != response.registry_revision:
            logger.info(
                "endpoint %s instance %s registered (revision %d, lease %s ms)",
                self._descriptor.endpoint_id,
                self._instance_id,
                response.registry_revision,
                response.lease_ttl_ms,
            )
        state.accepted_count += 1
        state.registry_revision = response.registry_revision
        state.lease_ttl_ms = response.lease_ttl_ms
        state.last_rejection = None
        self._fit_interval_to_lease(response.lease_ttl_ms)

    def _fit_interval_to_lease(self, lease_ttl_ms: int | None) -> None:
        if lease_ttl_ms is None:
            return
        fitted = max(MIN_RENEWAL_INTERVAL_S, min(self._configured_interval_s, lease_ttl_ms / 3000))
        if fitted != self._interval_s:
            logger.info("renewing every %.3f s to fit a %d ms lease", fitted, lease_ttl_ms)
            self._interval_s = fitted

    def _rejected(self, response: EndpointRegistryResponse) -> None:
        error = response.error
        if error is None:  # EndpointRegistryResponse forbids this; keep the type checker honest
            return
        self.state.rejected_count += 1
        self.state.registry_revision = response.registry_revision
        if response.operation == "unregister":
            logger.warning("Gateway rejected unregister: %s: %s", error.code, error.message)
            return
        self.state.last_rejection = error
        if "DESCRIPTOR" in error.code.upper():
            logger.error(
                "REGISTRATION REJECTED: the Gateway holds a different descriptor for endpoint "
                "%s instance %s (%s: %s). This provider is NOT available; restart it so it "
                "registers as a fresh instance.",
                self._descriptor.endpoint_id,
                self._instance_id,
                error.code,
                error.message,
            )
            return
        logger.error(
            "registration of endpoint %s instance %s rejected (%s: %s); retrying at next renewal",
            self._descriptor.endpoint_id,
            self._instance_id,
            error.code,
            error.message,
        )
