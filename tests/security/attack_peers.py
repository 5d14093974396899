"""The peers an attack row runs against or counts on: a Gateway config bound to a chosen
host, and a loopback listener that counts every connection made to it, which is how a row
proves that nothing was dialled. (The ``doraforge serve`` process the rows run against is
:func:`tests.support.live_server.serve_process`.)
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from doraforge.dataflows import DATAFLOWS
from tests.support.live_server import serving

# ------------------------------------------------------------------------- listener


@dataclass(frozen=True)
class Reply:
    """What the listener answers on one path."""

    status: int = 200
    body: bytes = b'{"ok":true}'
    headers: Mapping[str, str] = field(default_factory=dict)


class _CountingServer(ThreadingHTTPServer):
    """An HTTP server that counts accepted connections and records request targets."""

    daemon_threads = True

    def __init__(self, host: str, replies: Mapping[str, Reply]) -> None:
        super().__init__((host, 0), _ReplyHandler)
        self.replies = dict(replies)
        self.lock = threading.Lock()
        self.connections = 0
        self.targets: list[str] = []

    def get_request(self) -> tuple[socket.socket, Any]:
        request = super().get_request()
        with self.lock:
            self.connections += 1
        return request


class _ReplyHandler(BaseHTTPRequestHandler):
    server: _CountingServer

    def _answer(self) -> None:
        with self.server.lock:
            self.server.targets.append(self.path)  # the raw request target, query and all
        reply = self.server.replies.get(self.path, Reply())
        self.send_response(reply.status)
        for name, value in {"Content-Type": "application/json", **reply.headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, *_args: Any) -> None:
        return  # a listener hit is counted, not logged


class Listener:
    """A loopback HTTP server on a free port that counts every connection made to it and
    records every raw request target, answering each as ``replies`` says (default 200 JSON).

    The counts are how a row proves that nothing was dialled.
    """

    def __init__(
        self, replies: Mapping[str, Reply] | None = None, *, host: str = "127.0.0.1"
    ) -> None:
        self._server = _CountingServer(host, replies or {})
        self._serving = serving(self._server)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._server.server_address[0]!s}:{self.port}"

    @property
    def connections(self) -> int:
        with self._server.lock:
            return self._server.connections

    def hits(self, target: str) -> int:
        with self._server.lock:
            return self._server.targets.count(target)

    def requests(self) -> list[str]:
        """Every request target received so far, in order."""
        with self._server.lock:
            return list(self._server.targets)

    def __enter__(self) -> Listener:
        self._serving.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._serving.__exit__(*exc)


# ------------------------------------------------------------------------- Gateway


def gateway_config(directory: Path, host: str, **security: Any) -> Path:
    """The mock dataflow's Gateway config bound to ``host`` with ``security``."""
    config = yaml.safe_load((DATAFLOWS / "mock.gateway.yml").read_text(encoding="utf-8"))
    config["host"] = host
    if security:
        config["security"] = security
    path = directory / "mock.gateway.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path
