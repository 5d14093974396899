"""Request/response correlation over the carrier, keyed by Wire ``request_id``."""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable

from forge_tool import ToolEnvelope

from doraforge.wire.toolcodec import WireMessage

type Send = Callable[[str, WireMessage], None]


class InstanceLost(ConnectionError):
    """The provider instance serving an exchange stopped being current."""


class Exchanges:
    """Pending Wire exchanges; a response resolves the one future waiting for it."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._pending: dict[str, tuple[str, asyncio.Future[ToolEnvelope]]] = {}
        self._prefix = f"req-{os.getpid():x}-{os.urandom(3).hex()}-"
        self._counter = itertools.count(1)

    def new_request_id(self) -> str:
        """Return a process-unique request id."""
        return f"{self._prefix}{next(self._counter)}"

    async def request(
        self, endpoint_id: str, message: WireMessage, timeout_s: float
    ) -> ToolEnvelope:
        """Send ``message`` and wait for its correlated response.

        Raises ``TimeoutError`` after ``timeout_s`` (nothing is known then),
        :class:`InstanceLost` when the instance goes away, ``ConnectionError`` when the
        carrier cannot send at all.
        """
        request_id = str(message.request_id)
        future = self.open(request_id, endpoint_id)
        try:
            self._send(endpoint_id, message)
            return await asyncio.wait_for(future, timeout=timeout_s)
        finally:
            self.close(request_id)

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
