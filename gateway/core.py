"""The Gateway core: one object wiring the registry, catalog, runtime and carrier.

Everything here runs on the asyncio loop thread. A carrier delivers each provider message
with :meth:`Gateway.on_message` and sends with the ``send`` callable it was built with.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

from forge_tool import ToolEnvelope, make_endpoint_registry_response_envelope

from doraforge.gateway.catalog import Catalog
from doraforge.gateway.clock import Clock, SystemClock
from doraforge.gateway.config import GatewayConfig
from doraforge.gateway.exchange import Exchanges
from doraforge.gateway.journal import Journal, MemoryJournal
from doraforge.gateway.observations import ObservationStore
from doraforge.gateway.query import QueryInvoker
from doraforge.gateway.registry import EndpointRegistry
from doraforge.gateway.runtime import ToolRuntime
from doraforge.wire.toolcodec import WireMessage

log = logging.getLogger(__name__)

type Send = Callable[[str, WireMessage], None]

_RESPONSES = frozenset(
    {
        "tool.invoke.response",
        "tool.status.response",
        "tool.result.response",
        "tool.control.response",
        "tool.error",
    }
)


class Gateway:
    """Owns Gateway state; HTTP routes and carriers talk only to this object."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        send: Send,
        journal: Journal | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.catalog = Catalog(config.tools)
        self.exchanges = Exchanges(send)
        self._send = send
        self.registry = EndpointRegistry(
            [route.endpoint_id for route in config.providers],
            lease_ttl_ms=config.lease_ttl_ms,
            on_instance_gone=self._instance_gone,
        )
        self.queries = QueryInvoker(
            config=config,
            catalog=self.catalog,
            registry=self.registry,
            exchanges=self.exchanges,
            clock=self.clock,
        )
        self.runtime = ToolRuntime(
            config=config,
            catalog=self.catalog,
            registry=self.registry,
            exchanges=self.exchanges,
            journal=journal or MemoryJournal(),
            clock=self.clock,
            queries_in_flight=self.queries.in_flight,
        )
        self.observations = ObservationStore(
            {image.input: image.source for image in config.observations.images},
            joint_state_input=config.observations.joint_state_input,
        )
        self.identity = {
            "gateway_id": config.gateway_id,
            "instance_id": f"gwinst-{uuid.uuid4().hex}",
            "started_at_ms": self.clock.wall_ms(),
            "catalog_revision": self.catalog.revision(),
        }
        self._ticker: asyncio.Task[None] | None = None

    def on_message(self, route: str, envelope: ToolEnvelope) -> None:
        """Handle one provider message that arrived on the trusted ``route``."""
        kind = envelope.message_type
        if kind in _RESPONSES:
            self.exchanges.resolve(route, envelope)
        elif kind == "tool.event":
            self.runtime.on_event(route, envelope)
        elif kind == "endpoint.register":
            response = self.registry.register(route, envelope, self.clock.monotonic())
            self._reply(route, envelope, response)
            if response.status == "accepted":
                self.runtime.on_registered(route, str(envelope.endpoint_instance_id))
        elif kind == "endpoint.unregister":
            self._reply(
                route, envelope, self.registry.unregister(route, envelope, self.clock.monotonic())
            )
        elif kind == "endpoint.status":
            self.registry.record_status(route, envelope, self.clock.monotonic())
        else:
            log.warning("dropping %s on route %s: not a provider message", kind, route)

    def _reply(self, route: str, request: ToolEnvelope, response: Any) -> None:
        if response.status == "rejected":
            log.warning(
                "registry rejected %s from %s: %s", request.message_type, route, response.error
            )
        try:
            self._send(route, make_endpoint_registry_response_envelope(response, request))
        except ConnectionError as exc:
            log.warning("cannot answer %s on %s: %s", request.message_type, route, exc)

    def _instance_gone(self, endpoint_id: str, instance_id: str, reason: str) -> None:
        log.info("endpoint %s instance %s %s", endpoint_id, instance_id, reason)
        self.runtime.on_instance_gone(endpoint_id, instance_id, reason)

    async def start(self, tick_s: float = 0.05) -> None:
        """Restore the journal and start the periodic tick (deadlines, leases, polls)."""
        self.observations.bind_loop(asyncio.get_running_loop())
        restored = self.runtime.restore()
        if restored:
            log.info("restored %d invocations from the journal", restored)
        self._ticker = asyncio.get_running_loop().create_task(self._tick_forever(tick_s))

    async def stop(self) -> None:
        """Stop the periodic tick."""
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
            self._ticker = None

    async def _tick_forever(self, tick_s: float) -> None:
        evict_every = max(1, int(1.0 / tick_s))
        count = 0
        while True:
            await asyncio.sleep(tick_s)
            try:
                self.runtime.tick()
                count += 1
                if count % evict_every == 0:
                    self.runtime.evict()
            except Exception:  # a bug in one tick must not stop deadlines forever
                log.exception("gateway tick failed")


def tool_context(gateway: Gateway, tool_id: str) -> dict[str, Any] | None:
    """The live context of one tool: binding, readiness, status and concurrency."""
    spec = gateway.catalog.get(tool_id)
    if spec is None:
        return None
    record = gateway.registry.current(spec.endpoint_id)
    binding_error = spec.binding_error(record.descriptor if record else None)
    operation = spec.descriptor_operation(record.descriptor) if record else None
    max_concurrency = operation.max_concurrency if operation else None
    active = gateway.runtime.active_count(spec)
    status = record.status if record else None
    saturated = status.details.get("saturated_operations", []) if status else []
    checks = {
        "endpoint_registered": record is not None,
        "endpoint_ready": status is not None and status.state in ("ready", "busy"),
        # The provider's own report counts too: after a Gateway restart it may still be
        # running work this Gateway process never admitted.
        "operation_capacity": max_concurrency is not None
        and active < max_concurrency
        and not (isinstance(saturated, list) and spec.operation in saturated),
    }
    endpoint_status = None
    if record is not None:
        lease_ms = max(0, int((record.lease_deadline - gateway.clock.monotonic()) * 1000))
        endpoint_status = {
            "endpoint_instance_id": record.instance_id,
            "state": status.state if status else "unreported",
            "active_invocations": status.active_invocations if status else None,
            "details": dict(status.details) if status else {},
            "lease_remaining_ms": lease_ms,
        }
    return {
        "tool_id": spec.tool_id,
        "semantics": spec.semantics,
        "ready": binding_error is None and all(checks[name] for name in spec.config.readiness),
        "readiness": {name: checks[name] for name in spec.config.readiness},
        "binding_error": binding_error,
        "endpoint_status": endpoint_status,
        "robot_frame_profile": spec.document.get("robot_frame_profile"),
        "max_concurrency": max_concurrency,
        "active_invocations": active,
        "spec_sha256": spec.sha256,
        "registry_revision": gateway.registry.revision,
        "gateway_instance_id": gateway.identity["instance_id"],
    }
