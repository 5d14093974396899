"""A loopback listener that counts the connections reaching it: proof nothing was dialled."""

from __future__ import annotations

import socket


def counting_listener() -> socket.socket:
    """A non-blocking listener on an ephemeral 127.0.0.1 port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    return listener


def accepted(listener: socket.socket) -> int:
    """How many connections reached ``listener`` (drained without blocking)."""
    listener.setblocking(False)
    count = 0
    while True:
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1
