"""An in-process carrier: providers reached without Dora, through the same Arrow carrier.

It is the in-memory default for tests and embedding. Each :class:`LocalProvider` wraps a
forge-tool handler in ``DoraToolEndpointBinding`` exactly as a Dora provider node does, so
every message still crosses the ``forge_msgs.ToolMessage`` encoding.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Callable

import pyarrow as pa
from forge_tool import (
    ToolEndpointHandler,
    ToolEnvelope,
    make_registration_envelope,
    make_unregister_envelope,
)
from forge_tool.dora import DoraToolEndpointBinding

from doraforge.wire import toolcodec

_MAX_BYTES = 1_048_576
_HISTORY = 10_000

type Deliver = Callable[[str, ToolEnvelope], None]


class LocalProvider:
    """One provider process, simulated: it can register, go silent or be replaced."""

    def __init__(self, endpoint_id: str, make_handler: Callable[[str], ToolEndpointHandler]):
        self.endpoint_id = endpoint_id
        self._make_handler = make_handler
        self.deliver: Deliver = lambda route, envelope: None
        self.silent = False
        # Bounded histories that tests inspect.
        self.received: deque[ToolEnvelope] = deque(maxlen=_HISTORY)
        self.sent: deque[ToolEnvelope] = deque(maxlen=_HISTORY)
        self.registry_responses: deque[ToolEnvelope] = deque(maxlen=_HISTORY)
        self._tasks: set[asyncio.Task[None]] = set()
        self.handler = make_handler(self._new_instance_id())
        self._binding = DoraToolEndpointBinding(self.handler, event_sink=self._publish)

    @property
    def instance_id(self) -> str:
        """The current process-start identity."""
        return self.handler.endpoint_instance_id

    def restart(self) -> None:
        """Simulate a process restart: a fresh handler and instance id, old work lost."""
        self.handler = self._make_handler(self._new_instance_id())
        self._binding = DoraToolEndpointBinding(self.handler, event_sink=self._publish)
        self.silent = False

    def register(self) -> None:
        """Send ``endpoint.register`` for the current instance."""
        envelope = make_registration_envelope(
            self.handler.descriptor,
            endpoint_instance_id=self.instance_id,
            request_id=f"reg-{uuid.uuid4().hex[:8]}",
        )
        self._emit(envelope)

    def unregister(self) -> None:
        """Send ``endpoint.unregister`` for the current instance."""
        self._emit(
            make_unregister_envelope(
                endpoint_id=self.endpoint_id,
                endpoint_instance_id=self.instance_id,
                request_id=f"unreg-{uuid.uuid4().hex[:8]}",
            )
        )

    def receive(self, message: toolcodec.WireMessage) -> None:
        """Accept one message the Gateway sent, through the real Arrow carrier row."""
        if self.silent:
            return
        row = toolcodec.encode(message, max_message_bytes=_MAX_BYTES)
        envelope = toolcodec.decode(row, max_message_bytes=_MAX_BYTES)
        if envelope.message_type == "endpoint.registry.response":
            self.registry_responses.append(envelope)
            return
        self.received.append(envelope)
        task = asyncio.get_running_loop().create_task(self._dispatch(row))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _dispatch(self, row: pa.StructArray) -> None:
        for answer in await self._binding.dispatch_input(row):
            await self._publish(answer)

    async def _publish(self, batch: pa.RecordBatch) -> None:
        if not self.silent:
            self._emit(toolcodec.decode(batch, max_message_bytes=_MAX_BYTES))

    def _emit(self, envelope: ToolEnvelope) -> None:
        self.sent.append(envelope)
        loop = asyncio.get_running_loop()
        loop.call_soon(self.deliver, self.endpoint_id, envelope)

    @staticmethod
    def _new_instance_id() -> str:
        return f"epinst-{uuid.uuid4().hex}"


class LocalCarrier:
    """Routes Gateway sends to in-process providers by endpoint id."""

    def __init__(self) -> None:
        self.providers: dict[str, LocalProvider] = {}

    def add(self, provider: LocalProvider, deliver: Deliver) -> LocalProvider:
        """Attach ``provider``; its messages go to ``deliver`` (the Gateway)."""
        provider.deliver = deliver
        self.providers[provider.endpoint_id] = provider
        return provider

    def send(self, endpoint_id: str, envelope: toolcodec.WireMessage) -> None:
        """The Gateway's ``send``: hand ``envelope`` to the provider on that route."""
        provider = self.providers.get(endpoint_id)
        if provider is None:
            raise ConnectionError(f"no provider attached for {endpoint_id!r}")
        provider.receive(envelope)
