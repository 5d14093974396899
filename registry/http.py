"""The registry's HTTP edge: catalog, calls and retained results under ``/api/tools``, and the
operator's approvals of waiting high-risk calls under ``/api/approvals``.

Authority is derived here, never from a body: a caller's principal follows the credential it
presented (:func:`caller_principal`, for every edge: the agent token is ``agent``, the operator
token ``ui``), with the server's grants. With an operator token configured, the routes only an
operator may use (deciding approvals here, the console's routes and the API-tools writes beside)
depend on :func:`require_operator`: the agent token there is refused 403 ``OPERATOR_REQUIRED``,
audited, after the guard's Host, Origin, token and body checks. Every route runs behind the shared
transport guard (``doraforge.wire.guard``): Host and Origin, the bearer token when one is
configured, JSON bodies read with a streamed limit and parsed strictly. Errors map to the wire in
one place: :data:`STATUS_FOR_ERROR` picks the status of every registry error class and
:func:`error_response` answers ``{"ok": false, "error": {code, message, retryable, details}}``. The
routes are a table (:data:`ROUTES`); their handlers read the service and settings from
``app.state``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute
from starlette.types import Scope

from doraforge.registry.approvals import STATES, ApprovalStore, State, reason_of
from doraforge.registry.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    RegistryError,
    ToolFailure,
    Unprocessable,
)
from doraforge.registry.model import Principal
from doraforge.registry.settings import ServerSettings
from doraforge.wire.errors import StructuredError, WireError
from doraforge.wire.guard import (
    NO_BODY,
    TransportGuard,
    TransportPolicy,
    credential,
    default_render,
    json_body,
    policy_for_bind,
)

if TYPE_CHECKING:
    from doraforge.registry.service import RegistryService

FORMATS = ("portos", "openai", "anthropic", "mcp")
SCOPES = ("all", "agent", "mind", "ui", "voice")
MAX_INTENT = 500
_CATALOG_PARAMS = frozenset({"scope", "intent", "format"})
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,200}$")
_APPROVAL_ID = re.compile(r"^apr_[0-9a-f]{24}$")
#: Answered to a client that disconnected while its call waited (it is never read).
CLIENT_CLOSED = 499


type ExceptionHandler = Callable[[Request, Any], Coroutine[Any, Any, Response]]

#: The single mapping from registry errors to HTTP statuses. A class answers with the
#: status of the entry it derives from (``Expired`` as a ``Conflict``, ``Denied`` as
#: ``Forbidden``); the base ``RegistryError`` is never raised, so none is left unmapped.
STATUS_FOR_ERROR: dict[type[StructuredError], int] = {
    InvalidRequest: 400,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Unprocessable: 422,
    # An adapter's failure that escapes outside a call (probing or saving an API bundle):
    # the request was understood and could not be carried out.
    ToolFailure: 422,
}


def status_for(error: StructuredError) -> int:
    """The HTTP status of ``error`` from :data:`STATUS_FOR_ERROR` (500 only for a class
    outside the registry's tree, which no route raises)."""
    return next((code for cls, code in STATUS_FOR_ERROR.items() if isinstance(error, cls)), 500)


def _envelope(error: dict[str, Any], status: int, headers: dict[str, str] | None) -> JSONResponse:
    return JSONResponse({"ok": False, "error": error}, status, headers=headers)


def error_response(
    error: RegistryError | ToolFailure, headers: dict[str, str] | None = None
) -> JSONResponse:
    """The one mapping of a registry error onto HTTP: its table status and envelope."""
    return _envelope(error.to_payload(), status_for(error), headers)


async def on_registry_error(_request: Request, exc: RegistryError | ToolFailure) -> Response:
    """A registry error raised by any route, answered through :data:`STATUS_FOR_ERROR`."""
    return error_response(exc)


async def on_http_error(_request: Request, exc: StarletteHTTPException) -> Response:
    """The router's own 404 and 405 (its ``Allow`` kept) in the registry envelope."""
    code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
    error = {"code": code, "message": str(exc.detail), "retryable": False, "details": {}}
    return _envelope(error, exc.status_code, dict(exc.headers or {}))


#: Passed to every registry app: domain errors through the table, routing errors as is.
EXCEPTION_HANDLERS: dict[int | type[Exception], ExceptionHandler] = {
    RegistryError: on_registry_error,
    ToolFailure: on_registry_error,
    StarletteHTTPException: on_http_error,
}


def service_of(request: HTTPConnection) -> RegistryService:
    """The service of the app serving ``request`` (``app.state.service``)."""
    service: RegistryService = request.app.state.service
    return service


def settings_of(request: HTTPConnection) -> ServerSettings:
    """The settings of the app serving ``request`` (``app.state.settings``)."""
    settings: ServerSettings = request.app.state.settings
    return settings


def is_authenticated(settings: ServerSettings) -> bool:
    """Whether a request that reached a route presented the bearer token: the transport
    guard refuses every request without it whenever one is configured."""
    return settings.token is not None


def server_principal(
    service: RegistryService, settings: ServerSettings, *, scope: str, authenticated: bool
) -> Principal:
    """The principal of a caller on this server: its scope plus the server's grants and
    the permissions the settings grant that scope (``permissions: {agent: [network:*]}``)."""
    approvals = settings.approvals
    if "*" in approvals:
        approvals = frozenset(entry.name for entry in service.entries())
    return Principal(
        id=f"doraforge-{scope}",
        scope=scope,
        grants=settings.grants,
        permissions=settings.permissions_of(scope),
        approvals=approvals,
        authenticated=authenticated,
    )


#: A credential's principal scope (``wire.guard.credential``): the operator token is the
#: operator's session, the ``ui`` principal; the agent token (the only token when no
#: operator token is configured) is the ``agent`` principal, on every edge alike.
_SCOPE_OF_CREDENTIAL = {"operator": "ui", "agent": "agent"}


def caller_scope(request: HTTPConnection, *, tokenless: str) -> str:
    """The scope of the caller of ``request``, from the credential it presented and never
    from the edge it came through. ``tokenless`` is the scope on a server without a token
    (loopback only), where no credential says who calls: the edge's own (``ui`` for
    ``/api/tools``, ``agent`` for ``/mcp``)."""
    presented = credential(request.scope)
    return tokenless if presented is None else _SCOPE_OF_CREDENTIAL[presented]


def caller_principal(request: HTTPConnection, *, tokenless: str) -> Principal:
    """The principal of the caller of ``request`` (:func:`caller_scope`) with the server's
    grants, the permissions of its scope and the server's standing approvals. The one
    place every edge (HTTP calls, MCP) derives who calls."""
    settings = settings_of(request)
    scope = caller_scope(request, tokenless=tokenless)
    return server_principal(
        service_of(request), settings, scope=scope, authenticated=is_authenticated(settings)
    )


def read_json_body(request: Request) -> Any:
    """The body the transport guard read (bounded) and parsed (strict JSON); ``None`` when
    empty (no route of the registry takes a JSON ``null``)."""
    value = json_body(request)
    return None if value is NO_BODY else value


def registry_policy(settings: ServerSettings) -> TransportPolicy:
    """The transport policy of a registry with ``settings``; raises ``BindRefused`` for a
    non-loopback bind without a token unless ``insecure``."""
    return policy_for_bind(
        settings.host,
        token=settings.token,
        server_names=settings.server_names,
        allowed_origins=settings.allowed_origins,
        insecure=settings.insecure,
        max_body_bytes=settings.max_body_bytes,
        operator_token=settings.operator_token,
    )


OPERATOR = "doraforge-operator"


def actor(request: HTTPConnection) -> str:
    """Who acts on an operator route, for the audit: the operator when its token was
    presented, else the principal of the credential presented (an agent token refused
    there is recorded as the agent)."""
    if is_operator(request):
        return OPERATOR
    return f"doraforge-{caller_scope(request, tokenless='ui')}"


def is_operator(request: HTTPConnection) -> bool:
    """Whether ``request`` presented the operator token (always false without one)."""
    return credential(request.scope) == "operator"


def require_operator(request: Request) -> None:
    """A route dependency: with an operator token configured, only it passes; the agent
    token gets 403 ``OPERATOR_REQUIRED`` and the refusal is audited. Without one, every
    caller the guard admitted passes (as before operator tokens existed)."""
    if settings_of(request).operator_token is None or is_operator(request):
        return
    route = request.scope.get("route")
    path = getattr(route, "path", request.url.path)
    service_of(request).audit.record(
        request_id=None,
        name=f"{request.method} {path}",
        principal_id=actor(request),
        scope=caller_scope(request, tokenless="ui"),
        state="denied",
        error_code="OPERATOR_REQUIRED",
        duration_s=0.0,
    )
    raise Forbidden(
        "OPERATOR_REQUIRED",
        "this route needs the operator token; present the value of serve's "
        "--operator-token-env or --operator-token-file, not the agent token",
        details={"method": request.method, "path": path},
    )


#: Give a route this to make it the operator's (see :func:`require_operator`).
OPERATOR_ONLY = [Depends(require_operator)]


@contextmanager
def audited_write(request: Request, label: str, *, completed: bool = True) -> Iterator[None]:
    """Audit the operator write the ``with`` block makes (sync or awaited inside), by
    ``label`` (what and which: ``"credentials set API_KEY"``), never a body or a value.

    A structured refusal is recorded ``rejected`` with its code and re-raised (the edge
    answers it through :data:`STATUS_FOR_ERROR`); anything else (a crash, a cancellation)
    ``unknown`` with ``INTERNAL_ERROR``, since whether the write happened is not known; a
    write that returns ``completed``, unless ``completed=False`` (a store that audits its
    own changes, with what changed, as the egress policy does)."""
    started = time.perf_counter()
    try:
        yield
    except StructuredError as exc:
        _record_write(request, label, "rejected", exc.code, started)
        raise
    except BaseException:
        _record_write(request, label, "unknown", "INTERNAL_ERROR", started)
        raise
    if completed:
        _record_write(request, label, "completed", None, started)


def _record_write(
    request: Request, label: str, state: str, error_code: str | None, started: float
) -> None:
    service_of(request).audit.record(
        request_id=None,
        name=label[:200],
        principal_id=actor(request),
        scope=caller_scope(request, tokenless="ui"),
        state=state,
        error_code=error_code,
        duration_s=time.perf_counter() - started,
    )


def render_refusal(error: WireError, scope: Scope) -> tuple[int, dict[str, str], bytes]:
    """A transport-guard refusal: JSON-RPC shaped on ``/mcp``, the registry envelope else."""
    if scope.get("path") != "/mcp":
        return default_render(error, scope)
    code = -32700 if error.code.startswith(("INVALID_JSON", "JSON_")) else -32600
    message = {"code": code, "message": error.message, "data": {"code": error.code}}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": message}, separators=(",", ":"))
    return error.status, error.headers, body.encode()


def _catalog_query(request: Request) -> tuple[str | None, str | None, str]:
    params = request.query_params
    unknown = sorted(set(params.keys()) - _CATALOG_PARAMS)
    if unknown:
        raise InvalidRequest(
            "INVALID_QUERY",
            f"unknown query parameter {unknown[0]!r}",
            details={"allowed": sorted(_CATALOG_PARAMS)},
        )
    for key in _CATALOG_PARAMS:
        if len(params.getlist(key)) > 1:
            raise InvalidRequest("INVALID_QUERY", f"query parameter {key!r} given twice")
    scope = params.get("scope", "all")
    fmt = params.get("format", "portos")
    if scope not in SCOPES:
        raise InvalidRequest("INVALID_QUERY", "unknown scope", details={"allowed": list(SCOPES)})
    if fmt not in FORMATS:
        raise InvalidRequest("INVALID_QUERY", "unknown format", details={"allowed": list(FORMATS)})
    intent = (params.get("intent") or "").strip()
    if len(intent) > MAX_INTENT:
        raise InvalidRequest("INVALID_QUERY", f"intent exceeds {MAX_INTENT} characters")
    return (None if scope == "all" else scope), (intent or None), fmt


def _etag_matches(header: str | None, etag: str) -> bool:
    if header is None:
        return False
    candidates = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return "*" in candidates or etag in candidates


async def catalog(request: Request) -> Response:
    scope, intent, fmt = _catalog_query(request)
    body, etag = service_of(request).catalog(scope=scope, intent=intent, fmt=fmt)
    headers = {"ETag": etag, "Cache-Control": "private, no-cache"}
    if _etag_matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    return JSONResponse(body, headers=headers)


class ClientGone(Exception):
    """The client disconnected before its answer was ready; nobody reads a response."""


class ServerStopping(ClientGone):
    """The server stops while the call waits (uvicorn cancels handlers once its graceful
    shutdown timeout passes): the work was cancelled (a waiting approval is withdrawn); the
    caller may still be connected, so an edge that can answers it, else it is gone."""


async def _disconnected(request: Request) -> None:
    """Return once the client has gone (after the body, ``receive`` waits for that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_client_leaves[T](request: Request, work: Coroutine[Any, Any, T]) -> T:
    """``work``'s result; if the client disconnects first, ``work`` is cancelled (a call
    waiting for an operator then withdraws its approval request) and :class:`ClientGone` is
    raised. A call that finishes without suspending never starts a watcher."""
    task = asyncio.eager_task_factory(asyncio.get_running_loop(), work)
    if task.done():
        return task.result()
    _track(request)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        # Only the server cancels a handler (on shutdown). Consume it here: the work's own
        # cleanup still runs below, and the edge answers instead of logging a traceback.
        _uncancel()
        stopping = True
    else:
        stopping = False
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()  # the client left (or the server stops): nobody awaits the answer
    if stopping or task.cancelled() or not task.done():
        await asyncio.wait({task})  # let its cleanup (the withdrawal) run before answering
        raise ServerStopping if stopping else ClientGone
    return task.result()


def _uncancel() -> None:
    current = asyncio.current_task()
    if current is not None:
        current.uncancel()


def _track(request: Request) -> None:
    """Count this request's task (the server's, answering it) as in flight until it has
    answered, so a stopping server can let it answer (:func:`settle_in_flight`)."""
    in_flight: set[asyncio.Task[Any]] | None = getattr(request.app.state, "in_flight", None)
    current = asyncio.current_task()
    if in_flight is None or current is None or current in in_flight:
        return
    in_flight.add(current)
    current.add_done_callback(in_flight.discard)


async def settle_in_flight(app: FastAPI, within_s: float) -> None:
    """Wait at most ``within_s`` for the waiting calls the server just cancelled to answer
    (``REGISTRY_STOPPING``) before the app shuts down: the event loop ends right after and
    would cancel them again mid-answer."""
    in_flight: set[asyncio.Task[Any]] = getattr(app.state, "in_flight", set())
    if in_flight:
        await asyncio.wait(set(in_flight), timeout=within_s)


async def call(request: Request) -> Response:
    service = service_of(request)
    body = read_json_body(request)
    if not isinstance(body, dict):
        raise InvalidRequest("INVALID_CALL", "the body must be a portos_tool_call object")
    principal = caller_principal(request, tokenless="ui")
    key = request.headers.get("idempotency-key")
    try:
        result = await unless_client_leaves(
            request, service.call(body, principal, idempotency_key=key)
        )
    except ServerStopping:
        return _stopping()
    except ClientGone:
        return Response(status_code=CLIENT_CLOSED)
    # A denied result answers as the gates' refusal class does (Denied is a Forbidden).
    denied = STATUS_FOR_ERROR[Forbidden]
    return JSONResponse(result, denied if result.get("state") == "denied" else 200)


def _stopping() -> JSONResponse:
    error = {
        "code": "REGISTRY_STOPPING",
        "message": "the registry stopped before this call answered: one that waited for "
        "an approval did not run (the approval is withdrawn); call again once serve is back",
        "retryable": False,  # a call already running when serve stopped has an unknown outcome
        "details": {},
    }
    return _envelope(error, 503, {"Retry-After": "5"})


async def retained(request_id: str, request: Request) -> JSONResponse:
    if not _REQUEST_ID.fullmatch(request_id):
        raise NotFound("TOOL_CALL_NOT_FOUND", "no such call")
    return JSONResponse(service_of(request).get_call(request_id))


def _approval_store(request: Request) -> ApprovalStore:
    store = service_of(request).approvals
    if store is None:  # this server asks nobody: no approval was ever created
        raise NotFound("APPROVAL_NOT_FOUND", "this registry does not hold approvals")
    return store


def _approval_id(approval_id: str) -> str:
    if not _APPROVAL_ID.fullmatch(approval_id):
        raise NotFound("APPROVAL_NOT_FOUND", f"no approval {approval_id[:64]!r}")
    return approval_id


def _state_query(request: Request) -> State | None:
    params = request.query_params
    unknown = sorted(set(params.keys()) - {"state"})
    if unknown:
        message = f"unknown query parameter {unknown[0]!r}"
        raise InvalidRequest("INVALID_QUERY", message, details={"allowed": ["state"]})
    states = params.getlist("state")
    if len(states) > 1:
        raise InvalidRequest("INVALID_QUERY", "query parameter 'state' given twice")
    if not states:
        return None
    known = next((state for state in STATES if state == states[0]), None)
    if known is None:
        raise InvalidRequest(
            "INVALID_QUERY", "unknown approval state", details={"allowed": list(STATES)}
        )
    return known


async def list_approvals(request: Request) -> JSONResponse:
    state = _state_query(request)
    store = service_of(request).approvals
    records = [] if store is None else store.approvals(state)
    return JSONResponse({"approvals": records})


async def get_approval(approval_id: str, request: Request) -> JSONResponse:
    return JSONResponse(_approval_store(request).get(_approval_id(approval_id)))


async def approve(approval_id: str, request: Request) -> JSONResponse:
    reason = reason_of(read_json_body(request))
    store = _approval_store(request)
    return JSONResponse(store.approve(_approval_id(approval_id), reason, by=actor(request)))


async def deny(approval_id: str, request: Request) -> JSONResponse:
    reason = reason_of(read_json_body(request))
    store = _approval_store(request)
    return JSONResponse(store.deny(_approval_id(approval_id), reason, by=actor(request)))


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["ok", "error"],
    "properties": {
        "ok": {"const": False},
        "error": {
            "type": "object",
            "required": ["code", "message", "retryable", "details"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "retryable": {"type": "boolean"},
                "details": {"type": "object"},
            },
        },
    },
}
_TIME = {"type": "string", "format": "date-time", "description": "ISO-8601 UTC"}
_APPROVAL_PROPERTIES: dict[str, Any] = {
    "id": {"type": "string", "pattern": _APPROVAL_ID.pattern},
    "tool": {"type": "string"},
    "version": {"type": "integer"},
    "arguments": {"type": "object", "description": "credential-looking values masked"},
    "fingerprint": {"type": "string", "description": "SHA-256 of the bound call"},
    "caller": {"type": "string"},
    "risk": {"enum": ["low", "medium", "high", "critical"]},
    "requested_at": _TIME,
    "expires_at": _TIME,
    "state": {"enum": list(STATES)},
    "reason": {"type": ["string", "null"]},
    "decided_at": {"anyOf": [_TIME, {"type": "null"}]},
}
#: Present only when the call concerns one cell of a fleet (a skill's runtime).
_APPROVAL_CELL = {
    "type": "object",
    "description": "the cell the call concerns: skill, runtime instance, robot",
    "properties": {
        "skill": {"type": "string"},
        "runtimeInstanceId": {"type": ["string", "null"]},
        "robot": {"type": ["string", "null"]},
    },
}
_APPROVAL_SCHEMA = {
    "type": "object",
    "required": list(_APPROVAL_PROPERTIES),
    "properties": {**_APPROVAL_PROPERTIES, "cell": _APPROVAL_CELL},
}


def json_response_doc(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI response object: ``description`` and a JSON body of ``schema``."""
    return {"description": description, "content": {"application/json": {"schema": schema}}}


type Responses = dict[int | str, dict[str, Any]]

_REFUSED: Responses = {
    "401": json_response_doc("no or a wrong bearer token (when one is configured)", ERROR_SCHEMA),
    "404": json_response_doc("APPROVAL_NOT_FOUND: no such approval", ERROR_SCHEMA),
}
_DECISION = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["reason"],
                    "properties": {"reason": {"type": "string", "minLength": 1, "maxLength": 500}},
                }
            }
        },
    }
}
_OPERATOR_REFUSED: Responses = {
    "403": json_response_doc(
        "OPERATOR_REQUIRED: the agent token was presented where an operator token is "
        "configured; or the guard refused Host/Origin",
        ERROR_SCHEMA,
    )
}
_DECIDED: Responses = {
    "200": json_response_doc("the updated approval", _APPROVAL_SCHEMA),
    "400": json_response_doc("APPROVAL_REASON_REQUIRED or APPROVAL_DECISION_INVALID", ERROR_SCHEMA),
    **_REFUSED,
    **_OPERATOR_REFUSED,
    "409": json_response_doc(
        "APPROVAL_NOT_PENDING: already decided, expired or withdrawn", ERROR_SCHEMA
    ),
}
_STATE_PARAMETER = {
    "name": "state",
    "in": "query",
    "required": False,
    "schema": {"enum": list(STATES)},
}

#: ``/api/approvals``: the waiting and decided approvals, and the operator's decisions.
APPROVAL_ROUTES: list[BaseRoute] = [
    APIRoute(
        "/api/approvals",
        list_approvals,
        methods=["GET"],
        summary="List approvals (pending first, then decided), optionally of one state",
        responses={
            "200": json_response_doc(
                "the approvals",
                {"type": "object", "properties": {"approvals": {"items": _APPROVAL_SCHEMA}}},
            ),
            "400": json_response_doc("INVALID_QUERY", ERROR_SCHEMA),
            "401": _REFUSED["401"],
        },
        openapi_extra={"parameters": [_STATE_PARAMETER]},
    ),
    APIRoute(
        "/api/approvals/{approval_id}",
        get_approval,
        methods=["GET"],
        summary="Read one approval",
        responses={"200": json_response_doc("the approval", _APPROVAL_SCHEMA), **_REFUSED},
    ),
    APIRoute(
        "/api/approvals/{approval_id}/approve",
        approve,
        methods=["POST"],
        summary="Approve the one waiting call this approval is bound to, with a reason",
        responses=_DECIDED,
        openapi_extra=_DECISION,
        dependencies=OPERATOR_ONLY,
    ),
    APIRoute(
        "/api/approvals/{approval_id}/deny",
        deny,
        methods=["POST"],
        summary="Deny the waiting call; the agent receives the reason",
        responses=_DECIDED,
        openapi_extra=_DECISION,
        dependencies=OPERATOR_ONLY,
    ),
]

_OBJECT = {"type": "object"}
_UNAUTHORISED = _REFUSED["401"]
_CATALOG_RESPONSES: Responses = {
    "200": json_response_doc("the catalog in the asked format (ETag for revalidation)", _OBJECT),
    "304": {"description": "If-None-Match names the current catalog"},
    "400": json_response_doc(
        "INVALID_QUERY: an unknown or repeated parameter, scope or format", ERROR_SCHEMA
    ),
    "401": _UNAUTHORISED,
}
_CALL_RESPONSES: Responses = {
    "200": json_response_doc("the portos_tool_result (ok, error or unknown)", _OBJECT),
    "400": json_response_doc("INVALID_CALL or a strict-JSON refusal of the body", ERROR_SCHEMA),
    "401": _UNAUTHORISED,
    "403": json_response_doc(
        "the portos_tool_result with state denied (a gate or an operator refused it)", _OBJECT
    ),
    "413": json_response_doc("BODY_TOO_LARGE", ERROR_SCHEMA),
    "503": json_response_doc(
        "REGISTRY_STOPPING: serve stopped while the call waited", ERROR_SCHEMA
    ),
    "415": json_response_doc(
        "UNSUPPORTED_MEDIA_TYPE: the body must be application/json", ERROR_SCHEMA
    ),
}
_RETAINED_RESPONSES: Responses = {
    "200": json_response_doc("the retained portos_tool_result of that requestId", _OBJECT),
    "401": _UNAUTHORISED,
    "404": json_response_doc("TOOL_CALL_NOT_FOUND: no such call retained", ERROR_SCHEMA),
}

#: The catalog, call and retained-result routes under ``/api/tools``, and the approvals.
ROUTES: list[BaseRoute] = [
    APIRoute(
        "/api/tools",
        catalog,
        methods=["GET"],
        summary="The tool catalog (scope, intent, format)",
        responses=_CATALOG_RESPONSES,
    ),
    APIRoute(
        "/api/tools/call",
        call,
        methods=["POST"],
        summary="Call a tool with a portos_tool_call (Idempotency-Key: its requestId)",
        responses=_CALL_RESPONSES,
    ),
    APIRoute(
        "/api/tools/calls/{request_id}",
        retained,
        methods=["GET"],
        summary="The retained result of an earlier call",
        responses=_RETAINED_RESPONSES,
    ),
    *APPROVAL_ROUTES,
]


def create_app(
    service: RegistryService,
    settings: ServerSettings,
    *,
    routes: Sequence[BaseRoute] = ROUTES,
) -> FastAPI:
    """A registry app serving ``routes`` (by default :data:`ROUTES`) over ``service`` with
    ``settings``, every route behind the transport guard; raises ``BindRefused`` for a
    non-loopback bind without a token unless ``settings.insecure``. Its OpenAPI document is
    served at ``/openapi.json``, behind the same guard and token as every route."""
    guard = Middleware(TransportGuard, policy=registry_policy(settings), render=render_refusal)
    app = FastAPI(
        title="doraforge registry",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        routes=list(routes),
        exception_handlers=EXCEPTION_HANDLERS,
        # Every route, MCP and the API-tools routes included, is behind the one guard.
        middleware=[guard],
    )
    app.state.service = service
    app.state.settings = settings
    app.state.in_flight = set()
    return app
