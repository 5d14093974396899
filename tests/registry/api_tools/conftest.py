"""A real local HTTP upstream on 127.0.0.1 (port 0) for API-tool execution tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from doraforge.registry.api_tools.bundle import Bundle, parse_bundle
from doraforge.registry.api_tools.outbound import OutboundPolicy
from tests.support.live_server import serving

BIG_BYTES = 5 * 1024 * 1024


def local_policy(port: int) -> OutboundPolicy:
    """Deny by default; only ``127.0.0.1`` and ``api.test`` on ``port`` may be dialled (a
    rule without a port would open only the scheme's default port)."""
    return OutboundPolicy(default="deny", internal=[f"127.0.0.1:{port}", f"api.test:{port}"])


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, document: Any) -> None:
        self._send(status, json.dumps(document).encode(), "application/json")

    def _echo(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else None
        parts = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        self._json(
            200, {"path": parts.path, "query": parts.query, "headers": headers, "body": body}
        )

    def _big(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(BIG_BYTES))
        self.end_headers()
        chunk = b"a" * 65536
        try:
            for _ in range(BIG_BYTES // len(chunk)):
                self.wfile.write(chunk)
        except (BrokenPipeError, ConnectionResetError):
            return

    def _route(self) -> None:
        path = urlsplit(self.path).path
        routes = {
            "/json/ok": lambda: self._json(200, {"code": "0", "data": {"x": 1}, "message": ""}),
            "/json/fail": lambda: self._json(200, {"code": 7, "message": "quota exhausted"}),
            "/json/500": lambda: self._json(500, {"code": 500, "message": "upstream broke"}),
            "/text": lambda: self._send(200, b"plain hello", "text/plain"),
            "/redirect": lambda: self._send(
                302, b"", "text/plain", Location="http://169.254.169.254/latest"
            ),
            "/html": lambda: self._send(
                200, b"<!DOCTYPE html><html><body>Please log in</body></html>", "text/html"
            ),
            "/status/503": lambda: self._send(503, b"busy, try later", "text/plain"),
            "/big": self._big,
            "/slow": self._slow,
        }
        handler = routes.get(path)
        if handler is None:
            self._echo()
        else:
            handler()

    def _slow(self) -> None:
        self.server.release.wait(timeout=10)
        self._send(200, b"late", "text/plain")

    do_GET = do_POST = do_PUT = do_DELETE = _route


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.release = threading.Event()

    def handle_error(self, request: Any, client_address: Any) -> None:
        return


@dataclass
class Upstream:
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def policy(self) -> OutboundPolicy:
        return local_policy(self.port)


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    with serving(_Server()) as server:
        try:
            yield Upstream(server.server_address[1])
        finally:
            server.release.set()  # a handler still held must not outlast the shutdown


def make_bundle(base_url: str, *tools: dict[str, Any], **extra: Any) -> Bundle:
    document = {
        "schemaVersion": 1,
        "name": "svc",
        "baseUrl": base_url,
        "headers": {"Authorization": "Bearer {{secret:TOKEN}}"},
        "credentials": ["TOKEN"],
        "tools": list(tools),
        **extra,
    }
    return parse_bundle(document)


def tool(name: str, path: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": f"{name} tool", "path": path, **fields}
