"""The Dora carrier: ToolMessages between the Gateway node and its provider routes.

One thread blocks in the Dora event iterator and hands decoded envelopes to the asyncio
loop with ``call_soon_threadsafe``; every ``send_output`` happens on the loop thread
(safe while the other thread iterates, measured with dora-rs 1.1).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from forge_tool import DEFAULT_MAX_MESSAGE_BYTES, ToolEnvelope, ToolProtocolError

from doraforge.gateway.config import ProviderRoute
from doraforge.wire import toolcodec

log = logging.getLogger(__name__)

type Deliver = Callable[[str, ToolEnvelope], None]
type InputHandler = Callable[[str, Any, dict[str, Any]], None]


class DoraCarrier:
    """Bridges a Dora ``Node`` and the Gateway core over trusted provider routes."""

    def __init__(
        self,
        node: Any,
        routes: Iterable[ProviderRoute],
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self._node = node
        self._outputs = {route.endpoint_id: route.output for route in routes}
        self._inputs = {route.input: route.endpoint_id for route in routes}
        self._max_bytes = max_message_bytes
        self.dropped = 0

    def send(self, endpoint_id: str, envelope: toolcodec.WireMessage) -> None:
        """Publish ``envelope`` on the output of ``endpoint_id``'s route (loop thread)."""
        output = self._outputs.get(endpoint_id)
        if output is None:
            raise ConnectionError(f"no Dora route for endpoint {endpoint_id!r}")
        row = toolcodec.encode(envelope, max_message_bytes=self._max_bytes)
        try:
            self._node.send_output(output, row)
        except Exception as exc:  # dora raises plain RuntimeError on a closed output
            raise ConnectionError(f"dora send_output {output!r} failed: {exc}") from exc

    def decode(self, input_id: str, value: Any) -> tuple[str, ToolEnvelope] | None:
        """Turn one Dora input into ``(route, envelope)``; ``None`` when not a tool route."""
        route = self._inputs.get(input_id)
        if route is None:
            return None
        try:
            return route, toolcodec.decode(value, max_message_bytes=self._max_bytes)
        except (ToolProtocolError, ValueError, TypeError) as exc:
            self.dropped += 1
            log.warning("dropping malformed ToolMessage on %s: %s", input_id, exc)
            return None

    def pump(
        self,
        loop: asyncio.AbstractEventLoop,
        deliver: Deliver,
        on_stop: Callable[[], None],
        other_input: InputHandler | None = None,
    ) -> None:
        """Iterate Dora events until STOP; run in a dedicated thread."""
        try:
            for event in self._node:
                kind = event.get("type")
                if kind == "INPUT":
                    self._on_input(event, loop, deliver, other_input)
                elif kind == "STOP":
                    break
                elif kind == "ERROR":
                    log.warning("dora error event: %s", event.get("error"))
        finally:
            loop.call_soon_threadsafe(on_stop)

    def _on_input(
        self,
        event: dict[str, Any],
        loop: asyncio.AbstractEventLoop,
        deliver: Deliver,
        other_input: InputHandler | None,
    ) -> None:
        input_id = event["id"]
        decoded = self.decode(input_id, event["value"])
        if decoded is not None:
            loop.call_soon_threadsafe(deliver, *decoded)
        elif input_id not in self._inputs and other_input is not None:
            other_input(input_id, event["value"], event.get("metadata") or {})
