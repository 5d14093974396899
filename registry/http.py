"""The registry's HTTP edge: catalog, calls and retained results under ``/api/tools``.

Authority is derived here, never from a body: every HTTP caller is the ``ui`` principal with
the server's grants. Every route runs behind the shared transport guard
(``doraforge.wire.guard``): Host and Origin, the bearer token when one is configured, JSON
bodies read with a streamed limit and parsed strictly. Errors
map to the wire in one place (:func:`error_response`) as
``{"ok": false, "error": {code, message, retryable, details}}``.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from doraforge.registry.errors import RegistryError
from doraforge.registry.model import Principal
from doraforge.registry.settings import ServerSettings
from doraforge.wire.errors import WireError
from doraforge.wire.guard import (
    NO_BODY,
    TransportGuard,
    TransportPolicy,
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


def error_response(error: RegistryError, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one mapping of a registry error onto HTTP."""
    return JSONResponse({"ok": False, "error": error.to_payload()}, error.status, headers=headers)


def is_authenticated(settings: ServerSettings) -> bool:
    """Whether a request that reached a route presented the bearer token: the transport
    guard refuses every request without it whenever one is configured."""
    return settings.token is not None


def server_principal(
    service: RegistryService, settings: ServerSettings, *, scope: str, authenticated: bool
) -> Principal:
    """The principal of a caller on this server: its scope plus the server's grants."""
    approvals = settings.approvals
    if "*" in approvals:
        approvals = frozenset(entry.name for entry in service.entries())
    return Principal(
        id=f"doraforge-{scope}",
        scope=scope,
        grants=settings.grants,
        approvals=approvals,
        authenticated=authenticated,
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
        raise RegistryError(
            "INVALID_QUERY",
            f"unknown query parameter {unknown[0]!r}",
            details={"allowed": sorted(_CATALOG_PARAMS)},
        )
    for key in _CATALOG_PARAMS:
        if len(params.getlist(key)) > 1:
            raise RegistryError("INVALID_QUERY", f"query parameter {key!r} given twice")
    scope = params.get("scope", "all")
    fmt = params.get("format", "portos")
    if scope not in SCOPES:
        raise RegistryError("INVALID_QUERY", "unknown scope", details={"allowed": list(SCOPES)})
    if fmt not in FORMATS:
        raise RegistryError("INVALID_QUERY", "unknown format", details={"allowed": list(FORMATS)})
    intent = (params.get("intent") or "").strip()
    if len(intent) > MAX_INTENT:
        raise RegistryError("INVALID_QUERY", f"intent exceeds {MAX_INTENT} characters")
    return (None if scope == "all" else scope), (intent or None), fmt


def _etag_matches(header: str | None, etag: str) -> bool:
    if header is None:
        return False
    candidates = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return "*" in candidates or etag in candidates


def create_app(service: RegistryService, settings: ServerSettings) -> FastAPI:
    """The registry HTTP app: ``/api/tools`` routes over ``service`` with ``settings``."""
    app = FastAPI(title="doraforge registry", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    app.state.settings = settings
    # Every route, MCP and the API-tools routes included, is behind the one guard.
    app.add_middleware(TransportGuard, policy=registry_policy(settings), render=render_refusal)

    @app.exception_handler(RegistryError)
    async def _registry_error(_request: Request, exc: RegistryError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
        error = RegistryError(code, str(exc.detail), status=exc.status_code)
        return error_response(error, dict(exc.headers or {}))

    @app.get("/api/tools")
    async def catalog(request: Request) -> Response:
        scope, intent, fmt = _catalog_query(request)
        body, etag = service.catalog(scope=scope, intent=intent, fmt=fmt)
        headers = {"ETag": etag, "Cache-Control": "private, no-cache"}
        if _etag_matches(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers=headers)
        return JSONResponse(body, headers=headers)

    @app.post("/api/tools/call")
    async def call(request: Request) -> JSONResponse:
        authenticated = is_authenticated(settings)
        body = read_json_body(request)
        if not isinstance(body, dict):
            raise RegistryError("INVALID_CALL", "the body must be a portos_tool_call object")
        principal = server_principal(service, settings, scope="ui", authenticated=authenticated)
        key = request.headers.get("idempotency-key")
        result = await service.call(body, principal, idempotency_key=key)
        return JSONResponse(result, 403 if result.get("state") == "denied" else 200)

    @app.get("/api/tools/calls/{request_id}")
    async def retained(request_id: str) -> JSONResponse:
        if not _REQUEST_ID.fullmatch(request_id):
            raise RegistryError("TOOL_CALL_NOT_FOUND", "no such call", status=404)
        return JSONResponse(service.get_call(request_id))

    return app
