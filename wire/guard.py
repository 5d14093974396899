"""The transport guard every doraforge HTTP and WebSocket edge runs behind.

One ASGI middleware, configured once per server by a :class:`TransportPolicy`, applies in
this order (the first failure answers; nothing behind the guard runs):

1. ``Host`` must name this server: a configured server name, the concrete bound address,
   or a loopback name when the bind is loopback or a wildcard. A rebinding ``Host`` is 403.
2. ``Origin``, when sent, must be the server's own origin (a permitted host on the port the
   socket serves) or listed in ``allowed_origins``; ``null`` never is. A browser fetch that
   says ``Sec-Fetch-Site: cross-site`` without such an ``Origin`` is 403 too.
3. With a token configured, every request needs ``Authorization: Bearer <token>`` (reads
   and WebSockets included; a browser WebSocket may offer the subprotocol
   ``doraforge.bearer.<token>`` instead). Compared in constant time. 401 otherwise. A
   policy may name a second credential, the ``operator_token``: it is accepted wherever
   the token is, and :func:`credential` tells the app which of the two a request
   presented, so routes an agent must not reach (deciding its own approvals) can demand
   the operator's. The guard itself never refuses a valid token for its role.
4. ``POST``/``PUT``/``PATCH`` bodies are ``application/json`` (else 415; only an empty
   body may come without a ``Content-Type``, as Forge clients send cancel), read as a stream
   that stops at ``max_body_bytes`` (413, for declared and chunked lengths alike), then
   parsed once by the strict JSON reader (400 with the rule's code). The parsed value is
   handed to the app as :func:`json_body`; the app never reads the raw body again.

Refusals are rendered by the edge's own ``render`` callable, so each edge keeps its
envelope (the Gateway's ``{ok, msg, error}``, the registry's ``{ok, error}``, JSON-RPC for
MCP). A refused WebSocket handshake gets the same JSON body where the server supports the
denial-response extension, else a bare close (HTTP 403).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from doraforge.wire import strict_json
from doraforge.wire.errors import WireError

log = logging.getLogger("doraforge.wire.guard")

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
WS_SUBPROTOCOL = "doraforge.v1"
WS_TOKEN_PREFIX = "doraforge.bearer."
MIN_TOKEN_LENGTH = 16
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_JSON_KEY = "doraforge.json_body"
_CREDENTIAL_KEY = "doraforge.credential"

type Render = Callable[[WireError, Scope], tuple[int, dict[str, str], bytes]]


class BindRefused(ValueError):
    """A server configuration that must not start (for example off loopback, no token)."""


@dataclass(frozen=True)
class TransportPolicy:
    """What one server accepts. Build it with :func:`policy_for_bind`."""

    allowed_hosts: frozenset[str]
    allowed_origins: frozenset[str] = frozenset()
    cors_origins: tuple[str, ...] = ()
    token: str | None = field(default=None, repr=False)
    #: Only consulted when ``token`` is set: a policy without a token authenticates nobody.
    operator_token: str | None = field(default=None, repr=False)
    max_body_bytes: int = 1_048_576
    max_json_depth: int = strict_json.MAX_DEPTH
    code_prefix: str = ""

    def code(self, name: str) -> str:
        """An error code in this edge's namespace (``FORGE_TOOL_`` for the Gateway)."""
        return self.code_prefix + name


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) can only mean this machine's loopback."""
    name = _bare(host)
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def policy_for_bind(
    bind: str,
    *,
    token: str | None,
    server_names: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    insecure: bool = False,
    max_body_bytes: int = 1_048_576,
    code_prefix: str = "",
    operator_token: str | None = None,
) -> TransportPolicy:
    """The policy of a server bound to ``bind``.

    Raises :class:`BindRefused` for a non-loopback bind without a token unless
    ``insecure`` (which is then logged loudly), for a token shorter than 16 characters, and
    for an ``operator_token`` without a token or equal to it (it would separate nothing).
    """
    for value in (token, operator_token):
        if value is not None and len(value) < MIN_TOKEN_LENGTH:
            raise BindRefused(f"a bearer token must be at least {MIN_TOKEN_LENGTH} characters")
    _check_operator_token(token, operator_token)
    if token is None and not is_loopback(bind):
        if not insecure:
            raise BindRefused(
                f"binding {bind or '*'} (not loopback) needs a bearer token: configure one "
                "(token_env or token_file), or bind 127.0.0.1"
            )
        log.warning(
            "INSECURE: serving %s without authentication; anyone on the network can "
            "drive this server",
            bind or "*",
        )
    origins = list(allowed_origins)
    hosts = {_bare(name) for name in server_names}
    if is_loopback(bind) or _bare(bind) in WILDCARD_BINDS:
        hosts |= LOOPBACK_NAMES
    if _bare(bind) not in WILDCARD_BINDS:
        hosts.add(_bare(bind))
    return TransportPolicy(
        allowed_hosts=frozenset(hosts),
        allowed_origins=frozenset(_origin_key(origin) for origin in origins),
        cors_origins=tuple(origin.rstrip("/") for origin in origins),
        token=token,
        operator_token=operator_token,
        max_body_bytes=max_body_bytes,
        code_prefix=code_prefix,
    )


def _check_operator_token(token: str | None, operator_token: str | None) -> None:
    if operator_token is None:
        return
    if token is None:
        raise BindRefused("an operator token needs the agent token too; configure both")
    if hmac.compare_digest(token.encode(), operator_token.encode()):
        raise BindRefused("the operator token must differ from the agent token")


class _NoBody:
    """The type of :data:`NO_BODY`."""

    def __repr__(self) -> str:
        return "NO_BODY"


#: What :func:`json_body` answers for an empty body (a JSON ``null`` body is ``None``).
NO_BODY: Any = _NoBody()
_MISSING: Any = object()


def json_body(request: Any) -> Any:
    """The body the guard parsed for ``request`` (a Starlette request); :data:`NO_BODY`
    when the body was empty. Raises ``LookupError`` when the route is not behind a guard."""
    value = request.scope.get(_JSON_KEY, _MISSING)
    if value is _MISSING:
        raise LookupError("this route is not behind the transport guard")
    return value


def credential(scope: Scope) -> str | None:
    """Which credential the guard accepted for this request (an ASGI scope):
    ``"operator"`` or ``"agent"``; ``None`` when the policy has no token."""
    value = scope.get(_CREDENTIAL_KEY)
    return value if isinstance(value, str) else None


class TransportGuard:
    """The ASGI middleware applying a :class:`TransportPolicy` (see the module text)."""

    def __init__(self, app: ASGIApp, *, policy: TransportPolicy, render: Render) -> None:
        self.policy = policy
        self.render = render
        self._token = None if policy.token is None else policy.token.encode()
        operator = None if policy.token is None else policy.operator_token
        self._operator = None if operator is None else operator.encode()
        # A configured cross-origin client (a console served elsewhere) needs CORS answers;
        # Starlette's middleware gives them, and only for origins the guard already allowed.
        self.app = _with_cors(app, policy.cors_origins) if policy.cors_origins else app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        try:
            self._check_peer(scope, headers)
            if scope["type"] == "websocket":
                role, send = self._authorised_socket(headers, send)
                scope = _with_credential(scope, role)
            elif _is_preflight(scope, headers):
                pass  # a CORS preflight carries no credentials by design; it runs nothing
            else:
                scope = _with_credential(scope, self._check_token(headers))
                if scope["method"] in _BODY_METHODS:
                    receive = await self._read_body(scope, headers, receive)
        except WireError as error:
            await self._refuse(scope, send, error)
            return
        await self.app(scope, receive, send)

    # ------------------------------------------------------------------ checks

    def _check_peer(self, scope: Scope, headers: Mapping[str, str]) -> None:
        host = _host_name(headers.get("host", ""))
        if host is None or host not in self.policy.allowed_hosts:
            raise WireError(
                self.policy.code("HOST_NOT_ALLOWED"),
                "the Host header does not name this server",
                status=403,
            )
        origin = headers.get("origin")
        if origin is None:
            if headers.get("sec-fetch-site") == "cross-site":
                raise self._origin_refused()
            return
        if not self._origin_allowed(origin, scope):
            raise self._origin_refused()

    def _origin_allowed(self, origin: str, scope: Scope) -> bool:
        key = _origin_key(origin)
        if key in self.policy.allowed_origins:
            return True
        parts = _split_origin(origin)
        if parts is None:
            return False
        scheme, host, port = parts
        own_scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
        server = scope.get("server") or (None, None)
        return scheme == own_scheme and host in self.policy.allowed_hosts and port == server[1]

    def _origin_refused(self) -> WireError:
        return WireError(
            self.policy.code("ORIGIN_NOT_ALLOWED"),
            "cross-origin requests are refused; add the origin to allowed_origins",
            status=403,
        )

    def _check_token(self, headers: Mapping[str, str], offered: str | None = None) -> str | None:
        """The role of the presented token (``agent``/``operator``), ``None`` without a
        configured token; raises the 401 otherwise."""
        expected = self._token
        if expected is None:
            return None
        presented = offered if offered is not None else _bearer(headers.get("authorization"))
        if presented is None:
            raise WireError(
                self.policy.code("AUTH_REQUIRED"),
                "a bearer token is required",
                status=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        raw = presented.encode()
        # Both comparisons always run, so the timing says nothing about which one matched.
        is_agent = hmac.compare_digest(raw, expected)
        is_operator = self._operator is not None and hmac.compare_digest(raw, self._operator)
        if is_operator:
            return "operator"
        if not is_agent:
            raise WireError(
                self.policy.code("AUTH_INVALID"),
                "the bearer token is not valid",
                status=401,
                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        return "agent"

    def _authorised_socket(self, headers: Mapping[str, str], send: Send) -> tuple[str | None, Send]:
        offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
        token = next(
            (p[len(WS_TOKEN_PREFIX) :] for p in offered if p.startswith(WS_TOKEN_PREFIX)), None
        )
        role = self._check_token(headers, token if headers.get("authorization") is None else None)
        if WS_SUBPROTOCOL not in offered:
            return role, send

        async def accept_with_subprotocol(message: Message) -> None:
            # A browser that offered subprotocols closes a socket that accepts none.
            if message["type"] == "websocket.accept" and not message.get("subprotocol"):
                message = {**message, "subprotocol": WS_SUBPROTOCOL}
            await send(message)

        return role, accept_with_subprotocol

    async def _read_body(
        self, scope: Scope, headers: Mapping[str, str], receive: Receive
    ) -> Receive:
        declared = headers.get("content-type")
        media = (declared or "").split(";", 1)[0].strip().lower()
        if declared is not None and media != "application/json":
            raise self._not_json(media)
        body = await self._bounded(headers, receive)
        if declared is None and body:
            # No Content-Type is fine only for an empty body (Forge clients POST cancel
            # and stop without one); any bytes must be declared JSON.
            raise self._not_json("")
        # Only zero bytes mean "no body": whitespace alone is not a JSON text.
        scope[_JSON_KEY] = self._parsed(body) if body else NO_BODY
        return _replay(body, receive)

    async def _bounded(self, headers: Mapping[str, str], receive: Receive) -> bytes:
        limit = self.policy.max_body_bytes
        declared = headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            raise self._too_large()
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise WireError(self.policy.code("CLIENT_DISCONNECTED"), "the client went away")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:  # stop reading here: the rest is never buffered
                raise self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _not_json(self, media: str) -> WireError:
        return WireError(
            self.policy.code("UNSUPPORTED_MEDIA_TYPE"),
            "the body must be application/json",
            status=415,
            details={"content_type": media[:100] or None},
        )

    def _too_large(self) -> WireError:
        limit = self.policy.max_body_bytes
        return WireError(
            self.policy.code("BODY_TOO_LARGE"),
            f"the body exceeds {limit} bytes",
            status=413,
            details={"limit_bytes": limit},
        )

    def _parsed(self, body: bytes) -> Any:
        try:
            return strict_json.loads(body, max_depth=self.policy.max_json_depth)
        except strict_json.JSONRefused as exc:
            raise WireError(self.policy.code(exc.code), exc.message, status=400) from exc

    # ----------------------------------------------------------------- answers

    async def _refuse(self, scope: Scope, send: Send, error: WireError) -> None:
        status, headers, body = self.render(error, scope)
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        raw.append((b"content-type", b"application/json"))
        raw.append((b"content-length", str(len(body)).encode()))
        if scope["type"] == "http":
            raw.append((b"connection", b"close"))
            await send({"type": "http.response.start", "status": status, "headers": raw})
            await send({"type": "http.response.body", "body": body})
            return
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": status, "headers": raw})
            await send({"type": "websocket.http.response.body", "body": body})
            return
        await send({"type": "websocket.close", "code": 1008})


def _with_credential(scope: Scope, role: str | None) -> Scope:
    """A copy of ``scope`` naming the accepted credential (the app reads it back with
    :func:`credential`); the body is later parsed into the same copy."""
    return {**scope, _CREDENTIAL_KEY: role}


def _is_preflight(scope: Scope, headers: Mapping[str, str]) -> bool:
    return (
        scope["method"] == "OPTIONS"
        and "origin" in headers
        and "access-control-request-method" in headers
    )


def _with_cors(app: ASGIApp, origins: tuple[str, ...]) -> ASGIApp:
    from starlette.middleware.cors import CORSMiddleware

    return CORSMiddleware(
        app,
        allow_origins=list(origins),
        allow_methods=["GET", "POST", "PUT", "DELETE"],
        allow_headers=["authorization", "content-type", "idempotency-key", "last-event-id"],
        max_age=600,
    )


def default_render(error: WireError, _scope: Scope) -> tuple[int, dict[str, str], bytes]:
    """``{"ok": false, "error": {code, message, retryable, details}}`` with its status."""
    body = json.dumps({"ok": False, "error": error.to_payload()}, separators=(",", ":"))
    return error.status, error.headers, body.encode()


# --------------------------------------------------------------------- parsing


def _headers(scope: Scope) -> dict[str, str]:
    # A repeated header is suspicious for every header this guard reads; the last wins
    # nowhere: the first is kept and a second Host/Origin/Authorization refuses below.
    seen: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        if name in seen and name in ("host", "origin", "authorization", "content-type"):
            seen[name] = "\x00duplicate"
            continue
        seen[name] = value
    return seen


def _bare(host: str) -> str:
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name


def _host_name(authority: str) -> str | None:
    """The hostname of a ``Host`` header value, or ``None`` when it is malformed."""
    value = authority.strip().lower()
    if not value or any(c in value for c in "\x00/\\@ \t?#"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or not _port_ok(value[end + 1 :].removeprefix(":"), value[end + 1 :]):
            return None
        return _bare(value[: end + 1])
    name, colon, port = value.partition(":")
    if colon and (not _port_ok(port, colon + port) or ":" in port):
        return None
    return _bare(name) or None


def _port_ok(port: str, raw: str) -> bool:
    if not raw:
        return True
    return raw.startswith(":") and port.isdigit() and 0 < int(port) < 65536


def _split_origin(origin: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        return None
    return parts.scheme, _bare(parts.hostname), port or (443 if parts.scheme == "https" else 80)


def _origin_key(origin: str) -> str:
    parts = _split_origin(origin)
    if parts is None:
        return "\x00invalid"
    scheme, host, port = parts
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the already-read body once, then the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


__all__ = [
    "LOOPBACK_NAMES",
    "NO_BODY",
    "WS_SUBPROTOCOL",
    "WS_TOKEN_PREFIX",
    "BindRefused",
    "Render",
    "TransportGuard",
    "TransportPolicy",
    "credential",
    "default_render",
    "is_loopback",
    "json_body",
    "policy_for_bind",
]
