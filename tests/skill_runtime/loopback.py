"""A tiny HTTP file server on 127.0.0.1 for download, index and registry tests.

It serves ``routes`` (path -> bytes), honours ``Range: bytes=N-`` with 206 and
``Content-Range``, records every request, and can misbehave on purpose per path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.live_server import serving


@dataclass
class Fault:
    """Ways a path can misbehave; each ``*_times`` counts down per request."""

    cut_after: int | None = None  # send the full Content-Length, then hang up after N bytes
    cut_times: int = 1
    ignore_range: bool = False  # answer 200 with the whole body even to a Range request
    wrong_range: bool = False  # answer 206 with a Content-Range that starts at 0
    content_length: int | None = None  # lie about the length
    no_length: bool = False  # close-delimited body without Content-Length


@dataclass
class Loopback:
    """The running server: its base URL, routes, faults and request log."""

    base: str
    routes: dict[str, bytes] = field(default_factory=dict)
    faults: dict[str, Fault] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def gets(self, path: str) -> list[str | None]:
        """The Range headers of every GET of ``path`` (``None`` when absent)."""
        return [rng for method, p, rng in self.requests if method == "GET" and p == path]


_RANGE = re.compile(r"bytes=(\d+)-$")


def _handler(state: Loopback) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_args: object) -> None:
            return

        def do_HEAD(self) -> None:
            self._serve(head=True)

        def do_GET(self) -> None:
            self._serve(head=False)

        def _serve(self, *, head: bool) -> None:
            requested = self.headers.get("Range")
            state.requests.append((self.command, self.path, requested))
            body = state.routes.get(self.path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            fault = state.faults.get(self.path, Fault())
            start = 0
            match = _RANGE.match(requested or "")
            if match and not fault.ignore_range:
                start = int(match[1])
                self.send_response(206)
                first = 0 if fault.wrong_range else start
                self.send_header("Content-Range", f"bytes {first}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            payload = body[start:]
            if fault.no_length:
                self.send_header("Connection", "close")
                self.close_connection = True
            else:
                length = fault.content_length if fault.content_length is not None else len(payload)
                self.send_header("Content-Length", str(length))
            self.end_headers()
            if head:
                return
            if fault.cut_after is not None and fault.cut_times > 0:
                fault.cut_times -= 1
                self.wfile.write(payload[: fault.cut_after])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(payload)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        # A client hanging up mid-body is what some tests do on purpose.
        return


@contextmanager
def serve() -> Iterator[Loopback]:
    """Run a loopback server for the duration of the block."""
    state = Loopback(base="")
    server = _Server(("127.0.0.1", 0), _handler(state))
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    with serving(server):
        yield state
