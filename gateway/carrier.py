"""The Dora carrier: ToolMessages between the Gateway node and its provider routes.

One thread blocks in the Dora event iterator and hands the decoded envelopes of each event
(one, or a provider's batch of Query answers) to the asyncio loop with one
``call_soon_threadsafe``; every ``send_output`` happens on the loop thread (safe while the
other thread iterates, measured with dora-rs 1.1). The pump takes one event per wake: of
dora-rs 1.1's non-blocking reads, ``try_recv`` raises "Already borrowed" while the loop
thread is inside ``send_output``, and ``drain`` returned after 170 ms p50 while a peer
kept sending, so bursts are carried as batches (one value, several rows) instead.
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
        output = self._output(endpoint_id)
        self._send_output(output, toolcodec.encode(envelope, max_message_bytes=self._max_bytes))

    def send_many(
        self, endpoint_id: str, envelopes: list[toolcodec.WireMessage]
    ) -> list[tuple[toolcodec.WireMessage, ToolProtocolError]]:
        """Publish ``envelopes`` as one carrier value of that many rows, for a provider
        that said it takes them (:data:`~doraforge.wire.toolcodec.BATCH_ROWS_DETAIL`);
        returns the envelopes that could not be encoded, which were not sent."""
        output = self._output(endpoint_id)
        rows, refused = toolcodec.encode_many(envelopes, max_message_bytes=self._max_bytes)
        if len(rows):
            self._send_output(output, rows)
        return refused

    def _output(self, endpoint_id: str) -> str:
        output = self._outputs.get(endpoint_id)
        if output is None:
            raise ConnectionError(f"no Dora route for endpoint {endpoint_id!r}")
        return output

    def _send_output(self, output: str, rows: Any) -> None:
        try:
            self._node.send_output(output, rows)
        except Exception as exc:  # dora raises plain RuntimeError on a closed output
            raise ConnectionError(f"dora send_output {output!r} failed: {exc}") from exc

    def decode(self, input_id: str, value: Any) -> list[tuple[str, ToolEnvelope]] | None:
        """Turn one Dora input into its ``(route, envelope)`` messages (a provider may
        answer a batch of Queries in one value); ``None`` when not a tool route."""
        route = self._inputs.get(input_id)
        if route is None:
            return None
        try:
            rows = toolcodec.decode_rows(value, max_message_bytes=self._max_bytes)
        except (ToolProtocolError, ValueError, TypeError) as exc:
            rows = [ToolProtocolError("FORGE_PROTOCOL_INVALID_MESSAGE", str(exc))]
        decoded = []
        for row in rows:
            if isinstance(row, ToolProtocolError):
                self.dropped += 1
                log.warning("dropping malformed ToolMessage on %s: %s", input_id, row)
            else:
                decoded.append((route, row))
        return decoded

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
                decoded, stopped = self._burst([event], other_input)
                if decoded:
                    loop.call_soon_threadsafe(_deliver_all, deliver, decoded)
                if stopped:
                    break
        finally:
            loop.call_soon_threadsafe(on_stop)

    def _burst(
        self, events: list[dict[str, Any]], other_input: InputHandler | None
    ) -> tuple[list[tuple[str, ToolEnvelope]], bool]:
        """The decoded tool messages of ``events`` in order, and whether STOP came."""
        decoded: list[tuple[str, ToolEnvelope]] = []
        for event in events:
            kind = event.get("type")
            if kind == "INPUT":
                input_id = event["id"]
                messages = self.decode(input_id, event["value"])
                if messages is not None:
                    decoded.extend(messages)
                elif input_id not in self._inputs and other_input is not None:
                    other_input(input_id, event["value"], event.get("metadata") or {})
            elif kind == "STOP":
                return decoded, True
            elif kind == "ERROR":
                log.warning("dora error event: %s", event.get("error"))
        return decoded, False


def _deliver_all(deliver: Deliver, messages: list[tuple[str, ToolEnvelope]]) -> None:
    """Hand a burst to the core in arrival order (loop thread); a message the core fails
    on is logged and the rest still delivered, as separate callbacks were."""
    for route, envelope in messages:
        try:
            deliver(route, envelope)
        except Exception:
            log.exception("gateway failed on %s from %s", envelope.message_type, route)
