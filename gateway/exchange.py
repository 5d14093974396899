"""Request/response correlation over the carrier, keyed by Wire ``request_id``."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable

from forge_tool import ToolEnvelope, ToolProtocolError

from doraforge.wire.toolcodec import WireMessage

type Send = Callable[[str, WireMessage], None]
#: Sends several messages as one carrier value; returns those it could not encode.
type SendMany = Callable[[str, list[WireMessage]], list[tuple[WireMessage, ToolProtocolError]]]


class InstanceLost(ConnectionError):
    """The provider instance serving an exchange stopped being current."""


class Exchanges:
    """Pending Wire exchanges; a response resolves the one future waiting for it."""

    def __init__(self, send: Send, send_many: SendMany | None = None) -> None:
        self._send = send
        self._send_many = send_many
        self._queued: dict[str, list[WireMessage]] = {}
        self._pending: dict[str, tuple[str, asyncio.Future[ToolEnvelope]]] = {}
        self._prefix = f"req-{os.getpid():x}-{os.urandom(3).hex()}-"
        self._counter = itertools.count(1)

    def new_request_id(self) -> str:
        """Return a process-unique request id."""
        return f"{self._prefix}{next(self._counter)}"

    async def request(
        self, endpoint_id: str, message: WireMessage, timeout_s: float, *, batch_rows: int = 1
    ) -> ToolEnvelope:
        """Send ``message`` and wait for its correlated response.

        With ``batch_rows`` > 1 (a provider that takes several rows a value, for a
        message with no effect in the world: a Query) the first message of a loop turn
        leaves at once and those issued after it in the same turn leave together when the
        turn ends, at most ``batch_rows`` to a value.

        Raises ``TimeoutError`` after ``timeout_s`` (nothing is known then),
        :class:`InstanceLost` when the instance goes away, ``ConnectionError`` when the
        carrier cannot send at all.
        """
        request_id = str(message.request_id)
        future = self.open(request_id, endpoint_id)
        try:
            if batch_rows > 1 and self._send_many is not None:
                self._queue(endpoint_id, message, batch_rows)
            else:
                self._send(endpoint_id, message)
            return await asyncio.wait_for(future, timeout=timeout_s)
        finally:
            self.close(request_id)

    def _queue(self, endpoint_id: str, message: WireMessage, batch_rows: int) -> None:
        """The first Query of a loop turn leaves at once (a lone caller waits for nothing);
        those issued after it in the same turn leave together when the turn ends."""
        queued = self._queued.get(endpoint_id)
        if queued is not None:
            queued.append(message)
            return
        self._queued[endpoint_id] = []
        asyncio.get_running_loop().call_soon(self._flush, endpoint_id, batch_rows)
        self._send(endpoint_id, message)

    def _flush(self, endpoint_id: str, batch_rows: int) -> None:
        """Send what is queued for ``endpoint_id``: requests whose caller gave up (a
        timeout, a closed connection) stay unsent; a failure fails its own requests."""
        assert self._send_many is not None
        queued = [
            message
            for message in self._queued.pop(endpoint_id, [])
            if str(message.request_id) in self._pending
        ]
        for start in range(0, len(queued), batch_rows):
            chunk = queued[start : start + batch_rows]
            refused: list[tuple[WireMessage, Exception]]
            try:
                if len(chunk) == 1:
                    self._send(endpoint_id, chunk[0])
                    continue
                refused = list(self._send_many(endpoint_id, chunk))
            except (ConnectionError, ToolProtocolError) as exc:
                refused = [(message, exc) for message in chunk]
            for message, error in refused:
                self._fail(str(message.request_id), error)

    def _fail(self, request_id: str, error: BaseException) -> None:
        entry = self._pending.pop(request_id, None)
        if entry is not None and not entry[1].done():
            entry[1].set_exception(error)

    def open(self, request_id: str, endpoint_id: str) -> asyncio.Future[ToolEnvelope]:
        """Register interest in the response to ``request_id``."""
        future: asyncio.Future[ToolEnvelope] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (endpoint_id, future)
        return future

    def close(self, request_id: str) -> None:
        """Forget ``request_id`` (after a timeout or once answered)."""
        self._pending.pop(request_id, None)

    def resolve(self, route: str, envelope: ToolEnvelope) -> bool:
        """Hand ``envelope`` to its waiter when it came back on the request's route."""
        entry = self._pending.get(str(envelope.request_id))
        if entry is None or entry[0] != route:
            return False
        del self._pending[str(envelope.request_id)]
        if not entry[1].done():
            entry[1].set_result(envelope)
        return True

    def fail_route(self, endpoint_id: str, error: BaseException) -> None:
        """Fail every pending exchange of ``endpoint_id`` (its instance is gone)."""
        for request_id, (route, future) in list(self._pending.items()):
            if route == endpoint_id:
                del self._pending[request_id]
                if not future.done():
                    future.set_exception(error)

    def __len__(self) -> int:
        return len(self._pending)
