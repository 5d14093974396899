"""The transport-free core of a provider node: registration, status, dispatch.

:class:`ProviderCore` knows nothing about Dora. It publishes single-row carrier batches
through a ``publish`` callable, reads time from an injected monotonic clock, and is
driven by whoever owns the event loop (the Dora adapter in production, tests directly).
All of its methods must be called from that one event loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pyarrow as pa
from forge_tool import (
    EndpointState,
    EndpointStatus,
    ToolEndpointHandler,
    ToolEnvelope,
    ToolError,
    ToolProtocolError,
    make_endpoint_status_envelope,
    make_error_response_envelope,
)
from forge_tool.dora import DoraToolEndpointBinding

from doraforge.nodes.activity import ActivityTracker, tracked_operations
from doraforge.nodes.carrier import EXECUTION_REQUEST_TYPES, REGISTRY_RESPONSE_TYPE
from doraforge.nodes.definition import EndpointDefinition, RunnerOptions, new_endpoint_instance_id
from doraforge.nodes.query_path import QueryPath
from doraforge.nodes.registration import Registration, RegistrationState
from doraforge.wire import toolcodec

logger = logging.getLogger(__name__)

type Publish = Callable[[pa.RecordBatch | pa.StructArray], None]
type Clock = Callable[[], float]

_LOG_REASON_CHARS = 300


class ProviderCore:
    """Embeds one ``ToolEndpointHandler`` and speaks the provider side of the Wire.

    ``start()`` announces the endpoint (register, then a status snapshot); ``tick()``
    renews the lease and repeats the snapshot when due; ``submit()`` handles one input
    concurrently with every other; ``stop()`` drains briefly and sends ``unregister``.
    Untrusted or malformed inputs are logged and dropped; no input makes a method raise.
    """

    def __init__(
        self,
        definition: EndpointDefinition,
        *,
        publish: Publish,
        clock: Clock = time.monotonic,
        options: RunnerOptions | None = None,
    ) -> None:
        self._definition = definition
        self._options = options or RunnerOptions()
        self._publish = publish
        self._clock = clock
        self._instance_id = definition.endpoint_instance_id or new_endpoint_instance_id()
        # A snapshot on every start and end keeps the Gateway's readiness current: a caller
        # that saw an Action end must not be told the operation is still saturated.
        self._tracker = ActivityTracker(
            definition.descriptor, on_execution_change=self._status_changed
        )
        self._handler = ToolEndpointHandler(
            definition.descriptor,
            endpoint_instance_id=self._instance_id,
            operations=tracked_operations(
                definition.descriptor, definition.operations, self._tracker
            ),
            max_early_events=self._options.max_early_events,
            max_retained_executions=self._options.max_retained_executions,
        )
        self._queries = QueryPath(
            self._handler,
            tracked_operations(definition.descriptor, definition.operations, self._tracker),
            max_message_bytes=self._options.max_message_bytes,
        )
        self._binding = DoraToolEndpointBinding(
            self._handler,
            max_message_bytes=self._options.max_message_bytes,
            event_sink=self._publish_event,
        )
        self._registration = Registration(
            definition.descriptor,
            endpoint_instance_id=self._instance_id,
            interval_s=self._options.register_interval_s,
        )
        self._operation_names = frozenset(op.name for op in definition.descriptor.operations)
        self._next_register = self._next_status = 0.0
        self._inflight: set[asyncio.Task[None]] = set()
        self._stopped = False

    @property
    def endpoint_instance_id(self) -> str:
        """Return this process start's endpoint instance id."""
        return self._instance_id

    @property
    def handler(self) -> ToolEndpointHandler:
        """Return the embedded forge-tool handler."""
        return self._handler

    @property
    def registration(self) -> RegistrationState:
        """Return the Gateway's last registration decision for this instance."""
        return self._registration.state

    @property
    def inflight(self) -> int:
        """Return how many submitted inputs are still being handled."""
        return len(self._inflight)

    def start(self) -> None:
        """Register immediately and publish a first status snapshot."""
        now = self._clock()
        self._send_register(now)
        self._send_status(now)

    def tick(self) -> None:
        """Send the registration renewal and status snapshot if they are due."""
        if self._stopped:
            return
        now = self._clock()
        if now >= self._next_register:
            self._send_register(now)
        if now >= self._next_status:
            self._send_status(now)

    def _status_changed(self) -> None:
        if not self._stopped:
            self._send_status(self._clock())

    def seconds_until_due(self) -> float:
        """Return how long the driver may wait before calling :meth:`tick` again."""
        return max(0.0, min(self._next_register, self._next_status) - self._clock())

    def submit(self, value: object) -> asyncio.Task[None] | None:
        """Handle one input value in its own task; ``None`` once stopping."""
        if self._stopped:
            logger.debug("input dropped: provider is stopping")
            return None
        task = asyncio.get_running_loop().create_task(self.handle(value))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)
        return task

    async def handle(self, value: object) -> None:
        """Route one input: Registry response, execution request, or drop it with a log."""
        try:
            envelope = toolcodec.decode(value, max_message_bytes=self._options.max_message_bytes)
            message_type = envelope.message_type
            if message_type == REGISTRY_RESPONSE_TYPE:
                self._on_registry_response(envelope)
            elif message_type in EXECUTION_REQUEST_TYPES:
                await self._dispatch(value, envelope)
            else:
                logger.warning("dropped %r: not a message a provider accepts", message_type)
        except (ToolProtocolError, ValueError, TypeError) as exc:
            logger.warning("dropped input: %s", str(exc)[:_LOG_REASON_CHARS])
        except Exception:
            logger.exception("dropped input after an unexpected failure")

    def status_snapshot(self) -> EndpointStatus:
        """Return the provider's status source, or a snapshot derived from activity."""
        source = self._definition.status
        if source is None:
            return self._derived_status()
        try:
            status = source()
        except Exception:
            logger.exception("endpoint status source failed; reporting degraded")
            return self._derived_status("degraded")
        if not isinstance(status, EndpointStatus) or status.endpoint_id != self._endpoint_id:
            logger.error("endpoint status source returned %r; reporting degraded", status)
            return self._derived_status("degraded")
        return status

    async def stop(self) -> None:
        """Let in-flight inputs finish within the grace period, then unregister."""
        if self._stopped:
            return
        self._stopped = True
        pending = set(self._inflight)
        if pending:
            _, late = await asyncio.wait(pending, timeout=self._options.stop_grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        logger.info("endpoint %s instance %s unregistering", self._endpoint_id, self._instance_id)
        self._publish_envelope(self._registration.unregister_envelope())

    @property
    def _endpoint_id(self) -> str:
        return self._definition.endpoint_id

    def _derived_status(self, state: EndpointState | None = None) -> EndpointStatus:
        active = self._tracker.active_by_operation()
        saturated = self._tracker.saturated_operations()
        return EndpointStatus(
            endpoint_id=self._endpoint_id,
            state=state or ("busy" if saturated else "ready"),
            active_invocations=sum(active.values()),
            details={"active_by_operation": active, "saturated_operations": saturated},
        )

    def _send_register(self, now: float) -> None:
        self._publish_envelope(self._registration.register_envelope())
        self._next_register = now + self._registration.interval_s

    def _send_status(self, now: float) -> None:
        envelope = make_endpoint_status_envelope(
            self.status_snapshot(), endpoint_instance_id=self._instance_id
        )
        self._publish_envelope(envelope)
        self._next_status = now + self._options.status_interval_s

    def _on_registry_response(self, envelope: ToolEnvelope) -> None:
        before = self._registration.interval_s
        if not self._registration.apply(envelope):
            logger.debug("ignored registry response %s", envelope.request_id)
            return
        if self._registration.interval_s < before:
            self._next_register = min(
                self._next_register, self._clock() + self._registration.interval_s
            )

    async def _dispatch(self, value: object, request: ToolEnvelope) -> None:
        if self._queries.serves(request.message_type, request.operation):
            self._publish(await self._queries.answer(request))
            return
        if self._undeclared_on_our_route(request):
            # Protocol 9.7: once the route is ours, answer a correlated tool.error rather
            # than leave the sender waiting out its deadline for an operation we lack.
            error = ToolError(
                code="FORGE_PROTOCOL_UNKNOWN_OPERATION",
                message=f"endpoint {self._endpoint_id!r} declares no operation "
                f"{request.operation!r}",
                details={"path": "operation"},
            )
            self._publish_envelope(make_error_response_envelope(error, request))
            return
        # The binding publishes Action/Session responses through the event sink itself
        # (response first, then events); Query/status/result/control come back here.
        for batch in await self._binding.dispatch_input(value):
            self._publish(batch)

    def _undeclared_on_our_route(self, request: ToolEnvelope) -> bool:
        """A request for this endpoint and instance naming an operation it does not declare."""
        return (
            request.endpoint_id == self._endpoint_id
            and request.endpoint_instance_id == self._instance_id
            and request.operation not in self._operation_names
        )

    async def _publish_event(self, batch: pa.RecordBatch) -> None:
        self._publish(batch)

    def _publish_envelope(self, envelope: ToolEnvelope) -> None:
        try:
            batch = toolcodec.encode(envelope, max_message_bytes=self._options.max_message_bytes)
            self._publish(batch)
        except Exception:
            logger.exception("failed to publish %s", envelope.message_type)
