"""Loopback listeners that count what reaches them: proof nothing was dialled."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
from collections.abc import Iterator

from tests.support.live_server import serving


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


class _Answer500(http.server.BaseHTTPRequestHandler):
    """Counts each request on its server, then answers 500."""

    server: CountingHttpServer

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.hits += 1
        self.send_error(500)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the count is what a test reads."""


class CountingHttpServer(http.server.ThreadingHTTPServer):
    """A loopback HTTP server that counts the requests reaching it (each answered 500)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answer500)
        self.hits = 0
        self.lock = threading.Lock()

    def url(self, path: str) -> str:
        """``http://127.0.0.1:<port><path>``."""
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


@contextlib.contextmanager
def counting_http() -> Iterator[CountingHttpServer]:
    """A :class:`CountingHttpServer` served for the block."""
    with serving(CountingHttpServer()) as server:
        yield server
