"""The caller-facing HTTP Tool API.

This module is the one place where Gateway errors become HTTP statuses
(:data:`STATUS_FOR_ERROR`). The routes are a table (:data:`ROUTES`) of module-level
handlers that read the Gateway from ``app.state``. Path components are matched on the raw
(still percent-encoded) path and decoded afterwards, so callers can quote ``/`` and ``:``
inside tool and endpoint ids.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from doraforge.gateway.admission import InvokeBody
from doraforge.gateway.config import GatewayConfig
from doraforge.gateway.core import Gateway, tool_context
from doraforge.gateway.errors import (
    Conflict,
    GatewayError,
    Gone,
    InvalidRequest,
    JournalUnavailable,
    NotFound,
    ProviderProtocolError,
    QueryTimeout,
    Unavailable,
    Unprocessable,
)
from doraforge.gateway.http_observations import OBSERVATION_ROUTES, Observations
from doraforge.gateway.invocation import Invocation
from doraforge.gateway.openapi import (
    EMPTY_BODY,
    EVENT_RESUME,
    INVOKE_BODY,
    AdmissionEnvelope,
    ControlEnvelope,
    Envelope,
    ListingEnvelope,
    ResultEnvelope,
    allowed_methods,
    event_stream,
    post_responses,
    request_body,
    responses,
    success,
)
from doraforge.gateway.openapi import install as install_openapi
from doraforge.wire.errors import StructuredError, WireError
from doraforge.wire.guard import (
    NO_BODY,
    TransportGuard,
    TransportPolicy,
    json_body,
    policy_for_bind,
)

#: The single mapping from domain errors to HTTP statuses.
STATUS_FOR_ERROR: dict[type[GatewayError], int] = {
    InvalidRequest: 400,
    NotFound: 404,
    Conflict: 409,
    Gone: 410,
    Unprocessable: 422,
    ProviderProtocolError: 502,
    JournalUnavailable: 503,  # retryable, Retry-After: the admission was never dispatched
    Unavailable: 503,
    QueryTimeout: 504,
}
_INVOKE_FIELDS = frozenset({"arguments", "caller_id", "timeout_ms"})
_CONTROL_STATUS = {"accepted": 202, "requested": 202, "terminal": 200}
_SSE_KEEPALIVE_S = 15.0
_EVENT_ID = re.compile(r"[0-9]{1,16}")
_CONTROL_RESPONSES = {
    200: success(ControlEnvelope, "The invocation was already terminal"),
    202: success(ControlEnvelope, "Accepted or requested; not yet stopped (read phase)"),
}


def _dumps(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    """Serialise once, without FastAPI's encoder, as compact UTF-8 JSON."""
    return Response(
        _dumps(payload), status_code=status, media_type="application/json", headers=headers
    )


def ok(data: Any, status: int = 200) -> Response:
    """The success envelope ``{"ok": true, "data": …}``."""
    return json_response(status, {"ok": True, "data": data})


def error_envelope(error: StructuredError) -> dict[str, Any]:
    """The error envelope ``{"ok": false, "msg", "error": {code, message, retryable, details}}``."""
    return {"ok": False, "msg": error.message, "error": error.to_payload()}


def error_response(error: GatewayError) -> Response:
    """A domain error in :func:`error_envelope`, with its status from :data:`STATUS_FOR_ERROR`."""
    status = next((code for cls, code in STATUS_FOR_ERROR.items() if isinstance(error, cls)), 500)
    headers = {"Retry-After": "1"} if status == 503 else None
    return json_response(status, error_envelope(error), headers)


class RawPathRouting:
    """Route on the percent-encoded path so an encoded ``/`` stays inside one id."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw:
            path = raw.split(b"?", 1)[0].decode("latin-1")
            if path.startswith(("/tools/", "/invocations/")):
                scope = dict(scope, path=path)
        await self.app(scope, receive, send)


def _decoded(value: str, name: str) -> str:
    try:
        decoded = unquote(value, errors="strict")
    except UnicodeDecodeError as exc:  # e.g. %FF: percent-encoded bytes that are not UTF-8
        raise InvalidRequest("FORGE_TOOL_INVALID_PATH", f"invalid {name} in path") from exc
    if not decoded or len(decoded) > 512 or any(ord(c) < 0x20 for c in decoded):
        raise InvalidRequest("FORGE_TOOL_INVALID_PATH", f"invalid {name} in path")
    return decoded


def read_json_object(request: Request, *, allow_empty: bool) -> dict[str, Any]:
    """The body the transport guard read and parsed (bounded, strict JSON), as an object."""
    value = json_body(request)
    if value is NO_BODY:
        if allow_empty:
            return {}
        raise InvalidRequest("FORGE_TOOL_INVALID_BODY", "a JSON object body is required")
    if not isinstance(value, dict):
        raise InvalidRequest("FORGE_TOOL_INVALID_BODY", "the body must be a JSON object")
    return value


def render_refusal(error: WireError, _scope: Scope) -> tuple[int, dict[str, str], bytes]:
    """A transport-guard refusal in the Gateway's error envelope."""
    return error.status, error.headers, _dumps(error_envelope(error))


def gateway_policy(config: GatewayConfig, token: str | None) -> TransportPolicy:
    """The transport policy of a Gateway with ``config`` and ``token``; raises
    ``BindRefused`` for a non-loopback bind with no token unless ``security.insecure``."""
    return policy_for_bind(
        config.host,
        token=token,
        server_names=config.security.server_names,
        allowed_origins=config.security.allowed_origins,
        insecure=config.security.insecure,
        max_body_bytes=config.max_body_bytes,
        code_prefix="FORGE_TOOL_",
    )


def parse_invoke_body(value: dict[str, Any]) -> InvokeBody:
    """Validate ``{arguments, caller_id?, timeout_ms?}`` strictly."""
    unknown = sorted(set(value) - _INVOKE_FIELDS)
    if unknown:
        raise InvalidRequest(
            "FORGE_TOOL_UNKNOWN_FIELD",
            f"unknown field(s): {', '.join(unknown)}",
            details={"fields": unknown},
        )
    arguments = value.get("arguments", {})
    if not isinstance(arguments, dict):
        raise InvalidRequest(
            "FORGE_TOOL_INVALID_BODY",
            "arguments must be a JSON object",
            details={"path": "arguments"},
        )
    caller_id = value.get("caller_id")
    if caller_id is not None and (
        not isinstance(caller_id, str) or not caller_id.strip() or len(caller_id) > 256
    ):
        raise InvalidRequest(
            "FORGE_TOOL_INVALID_BODY",
            "caller_id must be a non-empty string of at most 256 characters",
            details={"path": "caller_id"},
        )
    timeout_ms = value.get("timeout_ms")
    if timeout_ms is not None and (
        isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 1
    ):
        raise InvalidRequest(
            "FORGE_TOOL_INVALID_BODY",
            "timeout_ms must be a positive integer",
            details={"path": "timeout_ms"},
        )
    return InvokeBody(arguments=arguments, caller_id=caller_id, timeout_ms=timeout_ms)


def gateway_of(request: Request) -> Gateway:
    """The Gateway the app serving ``request`` was built over (``app.state.gateway``)."""
    gateway: Gateway = request.app.state.gateway
    return gateway


async def on_gateway_error(_request: Request, exc: GatewayError) -> Response:
    """A domain error raised by any route, answered through :data:`STATUS_FOR_ERROR`."""
    return error_response(exc)


async def on_http_error(request: Request, exc: StarletteHTTPException) -> Response:
    """The router's own 404 and 405 (with ``Allow``) in the error envelope."""
    code = {404: "FORGE_TOOL_ROUTE_NOT_FOUND", 405: "FORGE_TOOL_METHOD_NOT_ALLOWED"}.get(
        exc.status_code, "FORGE_TOOL_HTTP_ERROR"
    )
    headers = dict(exc.headers or {})
    if exc.status_code == 405:  # every method of every route on this path (RFC 9110)
        headers["Allow"] = ", ".join(allowed_methods(request.app.router.routes, request.scope))
    envelope = error_envelope(StructuredError(code, str(exc.detail)))
    return json_response(exc.status_code, envelope, headers or None)


async def list_tools(request: Request) -> Response:
    gateway = gateway_of(request)
    identity = gateway.identity
    return ok(
        {
            "gateway_identity": identity["instance_id"],
            "gateway_id": identity["gateway_id"],
            "instance_id": identity["instance_id"],
            "gateway": identity,
            "revision": gateway.registry.revision,
            "catalog_revision": gateway.catalog.revision(),
            "tools": [spec.document for spec in gateway.catalog.all()],
        }
    )


async def get_tool(tool_id: str, request: Request) -> Response:
    catalog = gateway_of(request).catalog
    spec = catalog.get(_decoded(tool_id, "tool_id"))
    if spec is None:
        raise catalog.not_found(_decoded(tool_id, "tool_id"))
    body = b'{"ok":true,"data":' + spec.canonical + b"}"
    return Response(
        body,
        media_type="application/json",
        headers={"X-Spec-SHA256": spec.sha256, "ETag": f'"{spec.sha256}"'},
    )


async def get_context(tool_id: str, request: Request) -> Response:
    gateway = gateway_of(request)
    context = tool_context(gateway, _decoded(tool_id, "tool_id"))
    if context is None:
        raise gateway.catalog.not_found(_decoded(tool_id, "tool_id"))
    return ok(context)


async def invoke_query(endpoint_id: str, operation: str, request: Request) -> Response:
    body = parse_invoke_body(read_json_object(request, allow_empty=False))
    data = await gateway_of(request).queries.query(
        _decoded(endpoint_id, "endpoint_id"), _decoded(operation, "operation"), body
    )
    return ok(data)


async def invoke_async(tool_id: str, request: Request) -> Response:
    body = parse_invoke_body(read_json_object(request, allow_empty=False))
    runtime = gateway_of(request).runtime
    invocation, duplicate = await runtime.start(_decoded(tool_id, "tool_id"), body)
    return ok(_admission(invocation, duplicate), status=202)


async def lookup(request: Request, caller_id: str | None = None) -> Response:
    if not caller_id:
        raise InvalidRequest("FORGE_TOOL_INVALID_QUERY", "caller_id is required")
    found = gateway_of(request).runtime.lookup_caller(caller_id)
    return ok({"caller_id": caller_id, "invocations": [inv.public() for inv in found]})


async def get_invocation(invocation_id: str, request: Request) -> Response:
    runtime = gateway_of(request).runtime
    return ok(runtime.get(_decoded(invocation_id, "invocation_id")).public())


async def get_result(invocation_id: str, request: Request) -> Response:
    invocation = gateway_of(request).runtime.get(_decoded(invocation_id, "invocation_id"))
    if not invocation.terminal:
        return ok({"status": "pending", "phase": invocation.phase}, status=202)
    return ok({"status": "available", "phase": invocation.phase, "result": invocation.result})


async def cancel(invocation_id: str, request: Request) -> Response:
    return await _control(gateway_of(request), request, invocation_id, "cancel")


async def stop(invocation_id: str, request: Request) -> Response:
    return await _control(gateway_of(request), request, invocation_id, "stop")


async def events(invocation_id: str, request: Request) -> Response:
    invocation = gateway_of(request).runtime.get(_decoded(invocation_id, "invocation_id"))
    after = _last_event_id(request)
    # Only a resume can miss events; a fresh subscriber starts at the oldest retained.
    if after is not None and invocation.events and after + 1 < invocation.events[0].seq:
        raise Gone(
            "FORGE_TOOL_EVENTS_EVICTED",
            f"events after {after} were evicted; oldest is {invocation.events[0].seq}",
        )
    return StreamingResponse(
        _sse(invocation, after or 0),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache"},
    )


def _control_route(
    command: str, endpoint: Callable[..., Awaitable[Response]], summary: str
) -> APIRoute:
    """The row of a control command: an empty (or ``{}``) body, 200 or 202."""
    return APIRoute(
        f"/invocations/{{invocation_id}}/{command}",
        endpoint,
        methods=["POST"],
        summary=summary,
        openapi_extra=request_body(EMPTY_BODY, required=False),
        responses=post_responses(_CONTROL_RESPONSES, [404, 409, 410]),
    )


_TOOL_ERRORS = [400, 404]
_INVOCATION_ERRORS = [400, 404, 410]

#: The Tool API, one row per operation: path, endpoint, method and what it documents.
ROUTES: list[BaseRoute] = [
    APIRoute(
        "/tools",
        list_tools,
        methods=["GET"],
        summary="List ToolSpecs",
        responses=responses(
            {200: success(ListingEnvelope, "The catalog and this Gateway's identity")}
        ),
    ),
    APIRoute(
        "/tools/{tool_id}",
        get_tool,
        methods=["GET"],
        summary="One ToolSpec as byte-stable canonical JSON",
        responses=responses(
            {200: success(Envelope, "The ToolSpec; ETag is its SHA-256")}, _TOOL_ERRORS
        ),
    ),
    APIRoute(
        "/tools/{tool_id}/context",
        get_context,
        methods=["GET"],
        summary="Live binding, readiness and concurrency",
        responses=responses({200: success(Envelope, "The tool's live context")}, _TOOL_ERRORS),
    ),
    APIRoute(
        "/tools/{endpoint_id}/{operation}:invoke",
        invoke_query,
        methods=["POST"],
        summary="Invoke a Query",
        openapi_extra=request_body(INVOKE_BODY, required=True),
        responses=post_responses(
            {200: success(Envelope, "The Query's terminal response")},
            [404, 409, 422, 502, 503, 504],
        ),
    ),
    APIRoute(
        "/tools/{tool_id}:invoke",
        invoke_async,
        methods=["POST"],
        status_code=202,
        summary="Admit an Action or Session",
        openapi_extra=request_body(INVOKE_BODY, required=True),
        responses=post_responses(
            {202: success(AdmissionEnvelope, "Admitted, or a replay of the same caller_id")},
            [404, 409, 422, 502, 503],
        ),
    ),
    APIRoute(
        "/invocations",
        lookup,
        methods=["GET"],
        summary="Read-only lookup by caller_id for recovery",
        responses=responses({200: success(Envelope, "Invocations admitted for caller_id")}, [400]),
    ),
    APIRoute(
        "/invocations/{invocation_id}",
        get_invocation,
        methods=["GET"],
        summary="Invocation status",
        responses=responses({200: success(Envelope, "The status document")}, _INVOCATION_ERRORS),
    ),
    APIRoute(
        "/invocations/{invocation_id}/result",
        get_result,
        methods=["GET"],
        summary="Pending or terminal result",
        responses=responses(
            {
                200: success(ResultEnvelope, "Terminal: the result is available"),
                202: success(ResultEnvelope, "Not terminal yet: pending"),
            },
            _INVOCATION_ERRORS,
        ),
    ),
    _control_route("cancel", cancel, "Request Action cancellation"),
    _control_route("stop", stop, "Request a Session stop"),
    APIRoute(
        "/invocations/{invocation_id}/events",
        events,
        methods=["GET"],
        summary="Server-sent events",
        response_class=StreamingResponse,
        openapi_extra=EVENT_RESUME,
        responses=responses(
            {200: event_stream("The invocation's events, from Last-Event-ID on")},
            _INVOCATION_ERRORS,
        ),
    ),
    *OBSERVATION_ROUTES,
]


def create_app(gateway: Gateway, policy: TransportPolicy | None = None) -> FastAPI:
    """The HTTP application serving ``gateway`` through :data:`ROUTES` behind the guard.

    ``policy`` defaults to the config's with no token, which refuses to build for a
    non-loopback bind unless the config says ``security.insecure``
    (:class:`~doraforge.wire.guard.BindRefused`)."""
    guard = policy or gateway_policy(gateway.config, None)
    app = FastAPI(
        title="doraforge Gateway",
        version="1.0",
        description="Forge Tool API: Query, Action and Session over Dora ToolEndpoints.",
        docs_url=None,
        redoc_url=None,
        routes=list(ROUTES),
        exception_handlers={GatewayError: on_gateway_error, StarletteHTTPException: on_http_error},
        middleware=[
            # Outermost: nothing below runs for a request the guard refuses.
            Middleware(TransportGuard, policy=guard, render=render_refusal),
            Middleware(RawPathRouting),
        ],
    )
    app.state.gateway = gateway
    app.state.observations = Observations(gateway.observations, gateway.config.observations)
    install_openapi(app)
    return app


def _admission(invocation: Invocation, duplicate: bool) -> dict[str, Any]:
    return {
        "invocation_id": invocation.invocation_id,
        "attempt_id": invocation.attempt_id,
        "tool_id": invocation.tool_id,
        "caller_id": invocation.caller_id,
        "phase": invocation.phase,
        "deadline_ms": invocation.deadline_ms,
        "duplicate": duplicate,
    }


async def _control(
    gateway: Gateway, request: Request, invocation_id: str, command: str
) -> Response:
    body = read_json_object(request, allow_empty=True)
    if body:
        raise InvalidRequest("FORGE_TOOL_INVALID_BODY", f"{command} takes an empty body or {{}}")
    invocation, status = await gateway.runtime.control(
        _decoded(invocation_id, "invocation_id"), command
    )
    if status in ("rejected", "unsupported"):
        raise Conflict(
            f"FORGE_TOOL_CONTROL_{status.upper()}",
            f"the provider {status} the {command} request",
            details={"invocation_id": invocation.invocation_id},
        )
    return ok(_control_answer(invocation, command, status), status=_CONTROL_STATUS.get(status, 202))


def _control_answer(invocation: Invocation, command: str, status: str) -> dict[str, Any]:
    """A cancel/stop answer: ``status`` always, and ``cancel_status`` or ``stop_status``.

    The command-named field is what each command's callers read (a cancel answer's
    ``cancel_status``, a stop answer's ``stop_status``); ``status`` is the same value under
    the generic name PhyAgentOS's own control answers use. ``phase`` is the invocation's.
    """
    return {
        "invocation_id": invocation.invocation_id,
        "command": command,
        "status": status,
        f"{command}_status": status,
        "phase": invocation.phase,
    }


def _last_event_id(request: Request) -> int | None:
    """The resume point: ``Last-Event-ID``, else ``?last_event_id=``; each one sent is checked."""
    offered = [
        *request.headers.getlist("last-event-id"),
        *request.query_params.getlist("last_event_id"),
    ]
    # ASCII digits only: str.isdigit() admits "²" (int() then raises) and "١٢", and
    # int() refuses more than 4,300 digits; either was a 500. Present but empty is refused.
    if any(_EVENT_ID.fullmatch(raw) is None for raw in offered):
        raise InvalidRequest(
            "FORGE_TOOL_INVALID_EVENT_ID", "Last-Event-ID must be 1 to 16 ASCII digits"
        )
    return int(offered[0]) if offered else None


async def _sse(invocation: Invocation, after: int) -> AsyncIterator[bytes]:
    last = after
    while True:
        changed = invocation.changed
        for event in list(invocation.events):
            if event.seq > last:
                last = event.seq
                data = json.dumps(
                    {"type": event.type, "data": event.data, "at_ms": event.at_ms},
                    separators=(",", ":"),
                )
                yield f"id: {event.seq}\nevent: {event.type}\ndata: {data}\n\n".encode()
        if invocation.terminal:
            return
        try:
            await asyncio.wait_for(changed.wait(), timeout=_SSE_KEEPALIVE_S)
        except TimeoutError:
            yield b": keep-alive\n\n"
