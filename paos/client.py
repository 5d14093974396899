"""The Forge Tool API client: every caller route of the Gateway, over async httpx.

Contract (``spec/forge-tool-api.md`` sections 2-5):

* A call succeeds only when the HTTP status is the one the route promises, the body is
  ``{"ok": true, "data": {...}}`` and ``data`` is an object.
* The Gateway's error envelope becomes :class:`ForgeHttpError` with its ``code``,
  ``retryable``, ``details`` and the whole payload; any other answer is a
  :class:`ForgeProtocolError`.
* A timeout is :class:`ForgeTimeout` and a broken connection :class:`ForgeTransportError`;
  both say the remote state is unknown.
* The client never retries and never sends anything on its own (no cancel after a
  timeout): recovery is the caller's, by reading.
* With a token, every request (observations included) carries ``Authorization: Bearer``;
  the token is never logged and never part of the client's ``repr``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import quote

import httpx

from doraforge.paos.errors import (
    ForgeHttpError,
    ForgeProtocolError,
    ForgeTimeout,
    ForgeTransportError,
)
from doraforge.paos.gateway_auth import bearer
from doraforge.wire import strict_json
from doraforge.wire.canonical import sha256_hex

type JsonObject = dict[str, Any]
#: A Provider Wire payload nests at most 64 levels; the Caller envelope around a result
#: (``ok``/``data``/``result``/``outputs``) adds a few more.
MAX_RESPONSE_DEPTH = strict_json.MAX_DEPTH + 8
type ImageFormat = Literal["png", "jpeg"]
#: The token to present, asked for on every request (a skill restart changes it).
type TokenSource = Callable[[], str | None]
#: Which token to present to a Gateway URL (``None``: send none).
type TokenLookup = Callable[[str], str | None]

DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
#: Extra read time beyond a Query's own ``timeout_ms`` so the Gateway's 504 arrives first.
QUERY_TIMEOUT_GRACE_S = 2.0


@dataclass(frozen=True)
class ImageBytes:
    """One camera frame as the Gateway served it.

    ``stamp_ns`` is the capture time, ``received_ns`` when the Gateway received the frame
    (both Unix ns, from the frame headers); ``fetched_ns`` is this client's clock when the
    body had arrived.
    """

    data: bytes
    content_type: str
    seq: int
    stamp_ns: int
    received_ns: int
    fetched_ns: int


@dataclass(frozen=True)
class _Reply:
    """A fully read (and size-bounded) HTTP answer."""

    status_code: int
    headers: httpx.Headers
    content: bytes


def spec_sha256(document: Any) -> str:
    """The SHA-256 (hex) of a ToolSpec's canonical JSON: the context's ``spec_sha256``."""
    return sha256_hex(document)


def path_segment(value: str) -> str:
    """Percent-encode one path component completely (``/`` and ``:`` included)."""
    if not isinstance(value, str) or not value:
        raise ValueError("a path component must be a non-empty string")
    return quote(value, safe="")


class ForgeToolClient:
    """An async client of one Gateway's HTTP Tool API.

    Every method raises :class:`ForgeHttpError` (the Gateway refused),
    :class:`ForgeProtocolError` (the answer broke the contract), :class:`ForgeTimeout` or
    :class:`ForgeTransportError` (remote state unknown). Use as ``async with`` or call
    :meth:`aclose`.

    ``token`` is the Gateway's bearer token, or a callable asked before every request
    (so one long-lived client follows a restarted skill's new token); ``None`` sends none.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        token: str | TokenSource | None = None,
    ) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._token = token
        self._http = httpx.AsyncClient(
            base_url=base_url,
            timeout=timeout_s,
            # Retries are off: a re-sent POST could admit a second physical Action.
            transport=transport or httpx.AsyncHTTPTransport(retries=0),
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        # Never the token itself: clients end up in logs, tracebacks and error details.
        return f"ForgeToolClient({self.base_url!r}, token={'set' if self._token else None})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    # ------------------------------------------------------------ discovery

    async def list_tools(self) -> JsonObject:
        """``GET /tools``: ``{gateway_identity, gateway_id, instance_id, gateway, revision,
        catalog_revision, tools}`` (``gateway`` is the identity document)."""
        _, data = await self._call("GET", "/tools", {200})
        return data

    async def tool_spec(self, tool_id: str) -> tuple[JsonObject, str]:
        """``GET /tools/{id}``: the ToolSpec and the SHA-256 of its canonical JSON.

        The hash is computed from the document; when the Gateway sends ``X-Spec-SHA256``
        it must agree, else :class:`ForgeProtocolError` ``FORGE_CLIENT_SPEC_HASH_MISMATCH``.
        """
        response, document = await self._call("GET", f"/tools/{path_segment(tool_id)}", {200})
        digest = spec_sha256(document)
        announced = response.headers.get("x-spec-sha256")
        if announced is not None and announced.lower() != digest:
            raise ForgeProtocolError(
                "FORGE_CLIENT_SPEC_HASH_MISMATCH",
                f"ToolSpec {tool_id!r} hashes to {digest}, the Gateway announced {announced}",
                status_code=response.status_code,
                payload=document,
            )
        return document, digest

    async def context(self, tool_id: str) -> JsonObject:
        """``GET /tools/{id}/context``: live readiness, binding and ``spec_sha256``."""
        _, data = await self._call("GET", f"/tools/{path_segment(tool_id)}/context", {200})
        return data

    # ------------------------------------------------------------ calls

    async def query(
        self,
        endpoint_id: str,
        operation: str,
        arguments: Mapping[str, Any],
        *,
        caller_id: str,
        timeout_ms: int | None = None,
    ) -> JsonObject:
        """``POST /tools/{endpoint}/{operation}:invoke``: a Query's 200 data.

        With ``timeout_ms`` the read timeout is stretched past it, so the Gateway's own
        504 (a known Query timeout) wins over a client timeout.
        """
        path = f"/tools/{path_segment(endpoint_id)}/{path_segment(operation)}:invoke"
        timeout = self.timeout_s
        if timeout_ms is not None:
            timeout = max(timeout, timeout_ms / 1000 + QUERY_TIMEOUT_GRACE_S)
        body = _invoke_body(arguments, caller_id, timeout_ms)
        _, data = await self._call("POST", path, {200}, json_body=body, timeout_s=timeout)
        return data

    async def invoke(
        self,
        tool_id: str,
        arguments: Mapping[str, Any],
        *,
        caller_id: str,
        timeout_ms: int | None = None,
    ) -> JsonObject:
        """``POST /tools/{id}:invoke``: admit an Action or Session (202).

        The data always holds string ``invocation_id`` and ``attempt_id``. A timeout or
        transport error here means the Action may have been admitted: look it up by
        ``caller_id``, never POST again.
        """
        body = _invoke_body(arguments, caller_id, timeout_ms)
        path = f"/tools/{path_segment(tool_id)}:invoke"
        response, data = await self._call("POST", path, {202}, json_body=body)
        for key in ("invocation_id", "attempt_id"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise _bad_data(response, data, f"admission has no {key}")
        return data

    async def invocation(self, invocation_id: str) -> JsonObject:
        """``GET /invocations/{id}``: phase, cancel status, timestamps, result when terminal."""
        _, data = await self._call("GET", f"/invocations/{path_segment(invocation_id)}", {200})
        return data

    async def result(self, invocation_id: str) -> JsonObject | None:
        """``GET /invocations/{id}/result``: ``None`` while pending (202), else the 200 data
        ``{"status": "available", "phase", "result"}``."""
        path = f"/invocations/{path_segment(invocation_id)}/result"
        response, data = await self._call("GET", path, {200, 202})
        expected = "pending" if response.status_code == 202 else "available"
        if data.get("status") != expected:
            raise _bad_data(response, data, f"HTTP {response.status_code} must be {expected}")
        return None if expected == "pending" else data

    async def cancel(self, invocation_id: str) -> JsonObject:
        """``POST /invocations/{id}/cancel``: 202 accepted or 200 already terminal.

        Acceptance does not mean stopped; read the phase until it is terminal.
        """
        return await self._control(invocation_id, "cancel")

    async def stop(self, invocation_id: str) -> JsonObject:
        """``POST /invocations/{id}/stop`` for a Session; same answers as :meth:`cancel`."""
        return await self._control(invocation_id, "stop")

    async def lookup_caller(self, caller_id: str) -> list[JsonObject]:
        """``GET /invocations?caller_id=``: the invocations admitted for ``caller_id``.

        Read-only; this is how a caller recovers an invocation id it never received.
        """
        response, data = await self._call(
            "GET", "/invocations", {200}, params={"caller_id": caller_id}
        )
        return _object_list(response, data, "invocations")

    # ------------------------------------------------------------ observations

    async def image_sources(self) -> list[JsonObject]:
        """``GET /observations/images``: each source and its latest frame's metadata."""
        response, data = await self._call("GET", "/observations/images", {200})
        return _object_list(response, data, "sources")

    async def latest_image(self, source: str, *, fmt: ImageFormat = "png") -> ImageBytes:
        """``GET /observations/images/{source}/latest``: the newest frame's bytes.

        A source without a frame yet is a retryable :class:`ForgeHttpError` (503).
        """
        path = f"/observations/images/{path_segment(source)}/latest"
        response = await self._send("GET", path, params={"format": fmt})
        fetched_ns = time.time_ns()
        if response.status_code != 200:
            _raise_for_envelope(response, _parse_json(response))
            raise _unexpected_status(response, None, {200})
        return ImageBytes(
            data=response.content,
            content_type=response.headers.get("content-type", "").split(";")[0].strip().lower(),
            seq=_int_header(response, "x-frame-seq"),
            stamp_ns=_int_header(response, "x-frame-timestamp-ns"),
            received_ns=_int_header(response, "x-frame-received-ns"),
            fetched_ns=fetched_ns,
        )

    # ------------------------------------------------------------ plumbing

    async def _control(self, invocation_id: str, command: str) -> JsonObject:
        path = f"/invocations/{path_segment(invocation_id)}/{command}"
        _, data = await self._call("POST", path, {200, 202}, json_body={})
        return data

    async def _call(
        self,
        method: str,
        path: str,
        expected: set[int],
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[_Reply, JsonObject]:
        """One exchange; return the response and its ``data`` object or raise."""
        response = await self._send(
            method, path, json_body=json_body, params=params, timeout_s=timeout_s
        )
        return response, _envelope_data(response, expected)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> _Reply:
        """Send exactly once and read a bounded body; translate httpx failures."""
        request = self._http.build_request(
            method,
            path,
            json=json_body,
            params=params,
            headers=self._auth_headers(),
            timeout=timeout_s if timeout_s is not None else self.timeout_s,
        )
        where = {"method": method, "path": path}
        try:
            response = await self._http.send(request, stream=True)
            try:
                content = await self._read_bounded(response, where)
            finally:
                await response.aclose()
        except httpx.TimeoutException as exc:
            raise ForgeTimeout(
                "FORGE_CLIENT_TIMEOUT",
                f"{method} {path} timed out; the remote state is unknown",
                details={**where, "timeout": type(exc).__name__},
            ) from exc
        except httpx.DecodingError as exc:
            raise ForgeProtocolError(
                "FORGE_CLIENT_UNDECODABLE", f"{method} {path}: {exc}", details=where
            ) from exc
        except httpx.RequestError as exc:
            raise ForgeTransportError(
                "FORGE_CLIENT_TRANSPORT",
                f"{method} {path} failed ({type(exc).__name__}: {exc}); "
                "the remote state is unknown",
                details=where,
            ) from exc
        return _Reply(response.status_code, response.headers, content)

    def _auth_headers(self) -> dict[str, str]:
        return bearer(self._token() if callable(self._token) else self._token)

    async def _read_bounded(self, response: httpx.Response, where: dict[str, str]) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_response_bytes:
                raise ForgeProtocolError(
                    "FORGE_CLIENT_RESPONSE_TOO_LARGE",
                    f"response exceeds {self.max_response_bytes} bytes",
                    status_code=response.status_code,
                    details=where,
                )
            chunks.append(chunk)
        return b"".join(chunks)


def _invoke_body(
    arguments: Mapping[str, Any], caller_id: str, timeout_ms: int | None
) -> JsonObject:
    if not isinstance(caller_id, str) or not caller_id.strip():
        raise ValueError("caller_id must be a non-empty string")
    body: JsonObject = {"arguments": dict(arguments), "caller_id": caller_id}
    if timeout_ms is not None:
        body["timeout_ms"] = timeout_ms
    return body


def _parse_json(response: _Reply) -> Any:
    """The body under the wire's strict JSON rules, or ForgeProtocolError.

    ``details["rule"]`` is the wire rule that refused it (``JSON_UNSAFE_INTEGER``, ...).
    """
    try:
        return strict_json.loads(response.content, max_depth=MAX_RESPONSE_DEPTH)
    except strict_json.JSONRefused as exc:
        raise ForgeProtocolError(
            "FORGE_CLIENT_INVALID_JSON",
            f"HTTP {response.status_code} body is not valid JSON: {exc.message}",
            status_code=response.status_code,
            details={
                "rule": exc.code,
                "body_prefix": response.content[:200].decode("utf-8", "replace"),
            },
        ) from exc


def _envelope_data(response: _Reply, expected: set[int]) -> JsonObject:
    """``data`` of a success envelope with an expected status, or the fitting error."""
    body = _parse_json(response)
    _raise_for_envelope(response, body)
    if not isinstance(body, dict) or body.get("ok") is not True:
        raise ForgeProtocolError(
            "FORGE_CLIENT_BAD_ENVELOPE",
            f"HTTP {response.status_code} body is not an ok envelope",
            status_code=response.status_code,
            payload=body,
        )
    if response.status_code not in expected:
        raise _unexpected_status(response, body, expected)
    data = body.get("data")
    if not isinstance(data, dict):
        raise _bad_data(response, body, "data is not a JSON object")
    return data


def _raise_for_envelope(response: _Reply, body: Any) -> None:
    """Raise ForgeHttpError for a well-formed Gateway error envelope."""
    if not isinstance(body, dict) or body.get("ok") is not False:
        return
    error = body.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        raise ForgeProtocolError(
            "FORGE_CLIENT_BAD_ENVELOPE",
            f"HTTP {response.status_code} error envelope has no error code",
            status_code=response.status_code,
            payload=body,
        )
    details = error.get("details")
    raise ForgeHttpError(
        error["code"],
        str(error.get("message") or body.get("msg") or error["code"]),
        status_code=response.status_code,
        payload=body,
        retryable=error.get("retryable") is True,
        details=details if isinstance(details, dict) else None,
    )


def _unexpected_status(response: _Reply, body: Any, expected: set[int]) -> ForgeProtocolError:
    return ForgeProtocolError(
        "FORGE_CLIENT_UNEXPECTED_STATUS",
        f"HTTP {response.status_code}, expected {' or '.join(map(str, sorted(expected)))}",
        status_code=response.status_code,
        payload=body,
    )


def _bad_data(response: _Reply, payload: Any, why: str) -> ForgeProtocolError:
    return ForgeProtocolError(
        "FORGE_CLIENT_BAD_DATA", why, status_code=response.status_code, payload=payload
    )


def _object_list(response: _Reply, data: JsonObject, key: str) -> list[JsonObject]:
    items = data.get(key)
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise _bad_data(response, data, f"{key} is not a list of objects")
    return items


def _int_header(response: _Reply, name: str) -> int:
    raw = response.headers.get(name, "")
    if not raw.isdigit():
        raise ForgeProtocolError(
            "FORGE_CLIENT_BAD_HEADER",
            f"header {name} is missing or not a non-negative integer",
            status_code=response.status_code,
        )
    return int(raw)
