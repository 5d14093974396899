"""HTTPS to a pinned address: TLS SNI and certificate checks use the bundle's hostname."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from doraforge.registry.api_tools.client import ApiClient, execute
from doraforge.registry.api_tools.errors import ToolFailure
from doraforge.registry.api_tools.outbound import OutboundPolicy
from tests.support.live_server import serving

from .conftest import make_bundle, tool


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        body = f"host={self.headers['Host']}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _certificate(directory: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=api.test",
         "-addext", "subjectAltName=DNS:api.test"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    cert, key = _certificate(tmp_path_factory.mktemp("tls"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
    with serving(server):
        yield server.server_address[1], cert


async def _loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


def _call(base: str, cert: Path, host: str = "api.test") -> Any:
    bundle = make_bundle(base, tool("hello", "/", response={"type": "text"}))
    client = ApiClient(
        OutboundPolicy(default="deny", internal=[f"{host}:{urlsplit(base).port}"]),
        resolver=_loopback,
        verify=ssl.create_default_context(cafile=cert),
    )
    return asyncio.run(
        execute(bundle, bundle.tools[0], {}, secrets={"TOKEN": "tls-test-token"}, client=client)
    )


def test_https_uses_the_hostname_for_sni_and_verification(tls_server: tuple[int, Path]) -> None:
    port, cert = tls_server
    result = _call(f"https://api.test:{port}", cert)
    assert result["content"] == f"host=api.test:{port}"


def test_a_certificate_for_another_name_is_refused(tls_server: tuple[int, Path]) -> None:
    port, cert = tls_server
    with pytest.raises(ToolFailure) as info:
        _call(f"https://other.api.test:{port}", cert, host="other.api.test")
    assert info.value.code == "API_IO_ERROR"
