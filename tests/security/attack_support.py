"""What the attack tables send: the shared rows, a raw HTTP exchange, a chunked flood that
watches the server's memory, and a WebSocket handshake (the peers they send to and the
listeners that count dials are in :mod:`tests.security.attack_peers`).

Every request here is written header by header (``http.client`` with ``skip_host``), so a
row can send what a browser, a DNS-rebinding page or a hand-rolled agent would: a foreign
``Host``, two ``Host`` headers, no ``Content-Type`` with a body, a chunked body of any size.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psutil
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin, Subprotocol

MiB = 1024 * 1024
#: The wire limit both servers run with (Gateway ``max_body_bytes``, registry default).
BODY_LIMIT = 1_048_576
#: A hostile body: an integer of 5,000 digits (Python's int() refuses past 4,300).
HUGE_INTEGER = "9" * 5_000
#: Nesting far past any parser's recursion limit.
DEEP_LEVELS = 100_000
EVIL_ORIGINS = ("http://evil.example", "null", "http://localhost:1")
REQUEST_TIMEOUT_S = 15.0


def deep_array(levels: int = DEEP_LEVELS) -> str:
    """``[[[…]]]`` nested ``levels`` deep (200 KB for 100,000 levels)."""
    return "[" * levels + "]" * levels


# ---------------------------------------------------------------- the shared rows

type Headers = tuple[tuple[str, str], ...]
JSON: tuple[str, str] = ("Content-Type", "application/json")
#: What an MCP client must accept on ``POST /mcp``.
ACCEPT_MCP: tuple[str, str] = ("Accept", "application/json, text/event-stream")

#: Bodies a browser may send cross-origin without a preflight (a JSON-looking parameter
#: included), a body with no type, and a JSON type contradicted by a second header.
NOT_JSON: dict[str, Headers] = {
    "text-plain": (("Content-Type", "text/plain"),),
    "text-plain-with-a-json-parameter": (("Content-Type", "text/plain; x=application/json"),),
    "form-urlencoded": (("Content-Type", "application/x-www-form-urlencoded"),),
    "multipart-form-data": (("Content-Type", "multipart/form-data; boundary=attack"),),
    "no-content-type-with-a-body": (),
    "content-type-duplicated": (
        ("Content-Type", "application/json"),
        ("Content-Type", "text/plain"),
    ),
}

#: What a page on another origin sends, by row name; each takes the server's port.
FOREIGN_ORIGINS: dict[str, Callable[[int], Headers]] = {
    "origin-evil-example": lambda _port: (("Origin", "http://evil.example"),),
    "origin-null": lambda _port: (("Origin", "null"),),
    "origin-localhost-port-1": lambda _port: (("Origin", "http://localhost:1"),),
    "origin-own-host-other-scheme": lambda port: (("Origin", f"https://127.0.0.1:{port}"),),
    "cross-site-fetch-without-origin": lambda _port: (("Sec-Fetch-Site", "cross-site"),),
}

#: ``Host`` headers of a DNS-rebinding page (or a confused proxy), by row name.
REBINDING_HOSTS: dict[str, Callable[[int], list[str]]] = {
    "host-evil-example": lambda port: [f"evil.example:{port}"],
    "host-127-0-0-1-nip-io": lambda port: [f"127.0.0.1.nip.io:{port}"],
    "host-localhost-evil-example": lambda port: [f"localhost.evil.example:{port}"],
    "host-duplicated": lambda port: [f"127.0.0.1:{port}", f"evil.example:{port}"],
    "host-with-userinfo": lambda port: [f"user@127.0.0.1:{port}"],
    "host-empty": lambda _port: [""],
}

#: Bearer presentations that must not pass, and the code each is refused with.
TOKEN_REFUSALS: dict[str, str] = {
    "missing-token": "AUTH_REQUIRED",
    "wrong-token": "AUTH_INVALID",
    "short-token": "AUTH_INVALID",
    "wrong-scheme-basic": "AUTH_REQUIRED",
    "bearer-without-token": "AUTH_REQUIRED",
}


def presented(case: str, token: str) -> Headers:
    """The ``Authorization`` header of the :data:`TOKEN_REFUSALS` row ``case``."""
    value = {
        "missing-token": None,
        "wrong-token": f"Bearer {'w' * len(token)}",
        "short-token": f"Bearer {token[:16]}",
        "wrong-scheme-basic": f"Basic {token}",
        "bearer-without-token": "Bearer ",
    }[case]
    return () if value is None else (("Authorization", value),)


# ------------------------------------------------------------------------- exchange


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: status, headers (lower-case names) and body bytes."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def code(self) -> str | None:
        """The refusal code, whichever envelope carries it: the Gateway's and the
        registry's ``error.code``, or JSON-RPC's ``error.data.code`` on ``/mcp``."""
        try:
            document = self.json()
        except ValueError:
            return None
        error = document.get("error") if isinstance(document, dict) else None
        if not isinstance(error, dict):
            return None
        if document.get("jsonrpc") == "2.0":
            data = error.get("data")
            return data.get("code") if isinstance(data, dict) else None
        return error.get("code")

    def __str__(self) -> str:
        return f"HTTP {self.status} {self.body[:400]!r}"


def exchange(
    port: int,
    method: str,
    path: str,
    *,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes | None = None,
    hosts: Sequence[str] | None = None,
) -> Answer:
    """Send one request to ``127.0.0.1:port`` exactly as given and read the answer.

    ``hosts`` are the ``Host`` header values in order (default: the server's own
    ``127.0.0.1:port``); ``Content-Length`` is added when there is a ``body``.
    """
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for host in hosts if hosts is not None else (f"127.0.0.1:{port}",):
            connection.putheader("Host", host)
        for name, value in headers:
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        content = response.read()
        names = {name.lower(): value for name, value in response.getheaders()}
        return Answer(response.status, names, content)
    finally:
        connection.close()


def raw_exchange(port: int, request: bytes) -> Answer:
    """Write ``request`` byte for byte to ``127.0.0.1:port`` and read the answer, for
    requests no HTTP client library would form (both framings, two lengths)."""
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S) as sock:
        sock.sendall(request)
        return _parse_response(_read_until_closed(sock))


def declared_oversize(
    port: int, path: str, headers: Sequence[tuple[str, str]], *, method: str = "POST"
) -> Answer:
    """Declare a body twice the limit and send none of it: the answer must not wait."""
    oversize = (("Content-Length", str(2 * BODY_LIMIT)),)
    return exchange(port, method, path, headers=(*headers, *oversize))


@dataclass(frozen=True)
class Flood:
    """A chunked upload cut short by the server: its answer, what was sent, and how far
    the server's resident memory rose above where it started while it was sent."""

    answer: Answer
    sent_bytes: int
    rss_growth_bytes: int


def chunked_flood(
    port: int,
    path: str,
    headers: Sequence[tuple[str, str]],
    *,
    server_pid: int,
    method: str = "POST",
    total_bytes: int = 200 * MiB,
    chunk_bytes: int = 64 * 1024,
) -> Flood:
    """Stream up to ``total_bytes`` of chunked JSON-ish bytes to ``path``, stop as soon as
    the server answers, and sample the server process's RSS after every chunk."""
    server = psutil.Process(server_pid)
    baseline = peak = server.memory_info().rss
    chunk = b" " * chunk_bytes
    frame = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Transfer-Encoding: chunked"]
    head += [f"{name}: {value}" for name, value in headers]
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        while sent < total_bytes:
            readable, writable, _ = select.select([sock], [sock], [], REQUEST_TIMEOUT_S)
            if readable:
                break  # the server answered before the body ended
            assert writable, f"the server neither read nor answered after {sent} bytes"
            try:
                sock.sendall(frame)
            except OSError:
                break  # it closed its side; its answer is already on the way
            sent += chunk_bytes
            peak = max(peak, server.memory_info().rss)
        if sent >= total_bytes:
            sock.sendall(b"0\r\n\r\n")
        raw = _read_until_closed(sock)
        peak = max(peak, server.memory_info().rss)
    return Flood(_parse_response(raw), sent, peak - baseline)


def _read_until_closed(sock: socket.socket) -> bytes:
    received = b""
    with contextlib.suppress(OSError):  # a reset after the answer is the expected close
        while block := sock.recv(65_536):
            received += block
    return received


def _parse_response(raw: bytes) -> Answer:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 "), f"no HTTP answer: {raw[:200]!r}"
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", len(body)))
    return Answer(int(lines[0].split()[1]), headers, body[:length])


# ------------------------------------------------------------------------ websocket


@dataclass(frozen=True)
class Handshake:
    """How a WebSocket opening went: 101 with the chosen subprotocol, or the refusal."""

    status: int
    subprotocol: str | None = None
    code: str | None = None


def ws_handshake(
    port: int,
    path: str,
    *,
    host: str | None = None,
    origin: str | None = None,
    headers: Mapping[str, str] | None = None,
    subprotocols: Sequence[str] | None = None,
) -> Handshake:
    """Open ``path`` on ``127.0.0.1:port`` and close it again; a refused handshake reports
    its status and code. ``host`` is the name the client believes it dialled (it becomes
    the ``Host`` header), as a page on a rebinding domain would send."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S)
    try:
        with connect(
            f"ws://{host or f'127.0.0.1:{port}'}{path}",
            sock=sock,
            origin=Origin(origin) if origin is not None else None,
            additional_headers=dict(headers or {}),
            subprotocols=[Subprotocol(p) for p in subprotocols] if subprotocols else None,
            open_timeout=REQUEST_TIMEOUT_S,
            close_timeout=5,
        ) as opened:
            return Handshake(101, subprotocol=opened.subprotocol)
    except InvalidStatus as refused:
        response = refused.response
        answer = Answer(response.status_code, {}, bytes(response.body or b""))
        return Handshake(response.status_code, code=answer.code)
    finally:
        sock.close()


#: Requests to a wildcard-bound server: ``Host`` (given the port), extra headers, and the
#: refusal code (``None``: the request must pass).
WILDCARD_ROWS = [
    pytest.param("evil.example:{port}", (), "HOST_NOT_ALLOWED", id="rebinding-host"),
    pytest.param("0.0.0.0:{port}", (), "HOST_NOT_ALLOWED", id="wildcard-as-host"),
    pytest.param(
        "127.0.0.1:{port}",
        (("Origin", "http://evil.example"),),
        "ORIGIN_NOT_ALLOWED",
        id="foreign-origin",
    ),
    pytest.param("localhost:{port}", (), None, id="loopback-host-passes"),
]
