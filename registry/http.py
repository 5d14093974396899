"""The registry's HTTP edge: catalog, calls and retained results under ``/api/tools``.

Authority is derived here, never from a body: every HTTP caller is the ``ui`` principal with
the server's grants, authenticated only when a configured bearer token was presented. Errors
map to the wire in one place (:func:`error_response`) as
``{"ok": false, "error": {code, message, retryable, details}}``.
"""

from __future__ import annotations

import hmac
import json
import re
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from registry.errors import RegistryError
from registry.model import Principal
from registry.settings import ServerSettings

if TYPE_CHECKING:
    from registry.service import RegistryService

FORMATS = ("portos", "openai", "anthropic", "mcp")
SCOPES = ("all", "agent", "mind", "ui", "voice")
MAX_INTENT = 500
_CATALOG_PARAMS = frozenset({"scope", "intent", "format"})
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,200}$")


def error_response(error: RegistryError, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one mapping of a registry error onto HTTP."""
    return JSONResponse({"ok": False, "error": error.to_dict()}, error.status, headers=headers)


def bearer_state(request: Request, settings: ServerSettings) -> bool:
    """``True`` when a configured token was presented; raises 401 for a wrong one."""
    header = request.headers.get("authorization")
    if settings.token is None or header is None:
        return False
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        presented.strip().encode(), settings.token.encode()
    ):
        raise RegistryError(
            "AUTH_INVALID_TOKEN", "the bearer token is not valid", status=401, retryable=False
        )
    return True


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


async def read_json_body(request: Request, limit: int) -> Any:
    """The request body as JSON, bounded; raises a 413 or 400 :class:`RegistryError`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RegistryError("BODY_TOO_LARGE", f"the body exceeds {limit} bytes", status=413)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RegistryError("BODY_TOO_LARGE", f"the body exceeds {limit} bytes", status=413)
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise RegistryError("INVALID_JSON", "the body is not valid JSON", status=400) from exc


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


_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


class LoopbackHostGuard:
    """ASGI guard for a loopback-bound server against DNS rebinding: a request whose
    ``Host`` is not a loopback name, or whose ``Origin`` names another host, gets 403."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _loopback_request(Headers(scope=scope)):
            error = RegistryError("HOST_REJECTED", "only loopback Host and Origin", status=403)
            await error_response(error)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _hostname(authority: str) -> str:
    if authority.startswith("["):
        return authority[: authority.find("]") + 1]
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def _loopback_request(headers: Headers) -> bool:
    host = _hostname(headers.get("host", "").strip().lower())
    if host not in _LOOPBACK_NAMES:
        return False
    origin = headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return _hostname(origin.lower().split("://", 1)[-1].split("/", 1)[0]) in _LOOPBACK_NAMES


def is_loopback_bind(host: str) -> bool:
    """Whether the server binds only a loopback address (then the Host guard applies)."""
    return host.lower() in _LOOPBACK_NAMES or host.startswith("127.")


def create_app(service: RegistryService, settings: ServerSettings) -> FastAPI:
    """The registry HTTP app: ``/api/tools`` routes over ``service`` with ``settings``."""
    app = FastAPI(title="doraforge registry", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    app.state.settings = settings
    if is_loopback_bind(settings.host):
        app.add_middleware(LoopbackHostGuard)

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
        authenticated = bearer_state(request, settings)
        body = await read_json_body(request, settings.max_body_bytes)
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
