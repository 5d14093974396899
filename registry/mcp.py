"""Agent Tools over MCP: ``POST /mcp``, stateless Streamable HTTP with JSON responses.

Transport rules run before any JSON-RPC: the shared transport guard (Host, Origin, bearer
token, JSON body limits), then loopback socket callers only (never judged by headers),
an ``Accept`` that allows both
``application/json`` and ``text/event-stream``, a supported ``MCP-Protocol-Version``.
Tool failures and bad arguments come back as ``isError`` results; protocol faults as
JSON-RPC errors; a registry refusal becomes one or the other in one place,
:func:`refusal_result`, through :data:`MCP_FAULT_FOR_ERROR`. Every semantic call runs
through :meth:`RegistryService.call` as the principal of the credential presented
(``registry.http.caller_principal``: the agent token is ``agent``) with the server's grants;
the five read-only context tools answer from a :class:`ContextService` (audited the same
way). A JSON-RPC batch is answered only where the negotiated version has batches
(:data:`BATCH_VERSIONS`), and a result carrying an image becomes an MCP image block.
"""

from __future__ import annotations

import ipaddress
import re
import time
import uuid
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

import mcp.types as types
from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.routing import BaseRoute

from doraforge.registry.context.budgets import MAX_BATCH_MESSAGES, MAX_IMAGE_DATA_CHARS, dumps
from doraforge.registry.context.service import ContextArgumentError, ContextService
from doraforge.registry.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    RegistryError,
    Unprocessable,
)
from doraforge.registry.http import (
    CLIENT_CLOSED,
    ClientGone,
    ServerStopping,
    caller_principal,
    read_json_body,
    server_principal,
    service_of,
    settings_of,
    unless_client_leaves,
)
from doraforge.registry.mcp_results import tool_error, tool_result
from doraforge.registry.model import Principal
from doraforge.registry.settings import ServerSettings

if TYPE_CHECKING:
    from doraforge.registry.context.source import ContextSource, Scope
    from doraforge.registry.service import RegistryService

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST = PROTOCOL_VERSIONS[0]
#: The versions whose transport carries JSON-RPC batches (2025-06-18 removed them). A
#: request without ``MCP-Protocol-Version`` is 2025-03-26, as the MCP spec tells servers
#: to assume.
BATCH_VERSIONS = ("2025-03-26",)
SERVER_NAME = "doraforge"
SERVER_VERSION = "0.1.0"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,200}$")


class _Fault(Exception):
    """A JSON-RPC protocol fault answered as an error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


_STOPPING = _Fault(
    -32000,
    "the registry stopped before this call answered; a call that waited for an approval "
    "did not run (its approval is withdrawn): call again once serve is back",
    {"code": "REGISTRY_STOPPING", "retryable": False},
)


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` (a socket address) is an IPv4 or IPv6 loopback address."""
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _accepts(header: str) -> bool:
    kinds = {part.split(";", 1)[0].strip().lower() for part in header.split(",")}
    json_ok = bool(kinds & {"application/json", "application/*", "*/*"})
    sse_ok = bool(kinds & {"text/event-stream", "text/*", "*/*"})
    return json_ok and sse_ok


def _http_fault(
    status: int,
    code: str,
    message: str,
    details: Mapping[str, Any] | None = None,
    **headers: str,
) -> JSONResponse:
    data = {"code": code, "retryable": False, "details": dict(details or {})}
    error = {"code": -32600, "message": message, "data": data}
    body = {"jsonrpc": "2.0", "id": None, "error": error}
    return JSONResponse(body, status, headers=headers or None)


def guard_caller(request: Request) -> JSONResponse | None:
    """403 unless the socket peer is loopback (Host, Origin and the token were checked by
    the transport guard before this route ran)."""
    if not is_loopback_host(request.client.host if request.client else None):
        return _http_fault(403, "MCP_NOT_LOOPBACK", "only loopback callers are accepted")
    return None


def _transport_fault(request: Request, settings: ServerSettings) -> JSONResponse | None:
    denied = guard_caller(request)
    if denied is not None:
        return denied
    if not settings.mcp_enabled:
        return _http_fault(403, "MCP_DISABLED", "the MCP endpoint is disabled")
    if not _accepts(request.headers.get("accept", "")):
        return _http_fault(
            406, "MCP_NOT_ACCEPTABLE", "Accept must allow application/json and text/event-stream"
        )
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "application/json":
        return _http_fault(415, "MCP_UNSUPPORTED_MEDIA", "Content-Type must be application/json")
    version = request.headers.get("mcp-protocol-version")
    if version is not None and version not in PROTOCOL_VERSIONS:
        return _http_fault(
            400,
            "MCP_UNSUPPORTED_VERSION",
            f"unsupported MCP-Protocol-Version {version!r}; send one of "
            f"{', '.join(PROTOCOL_VERSIONS)}",
            {"version": version, "supported": list(PROTOCOL_VERSIONS)},
        )
    return None


def _error(message_id: Any, fault: _Fault) -> dict[str, Any]:
    # Hand-built: JSON-RPC answers an unreadable request id with null, which the SDK's
    # JSONRPCError model does not allow.
    error = types.ErrorData(code=fault.code, message=fault.message, data=fault.data)
    if not isinstance(message_id, str | int) or isinstance(message_id, bool):
        message_id = None
    return {"jsonrpc": "2.0", "id": message_id, "error": error.model_dump(exclude_none=True)}


def _result(message_id: Any, result: types.Result | dict[str, Any]) -> dict[str, Any]:
    if isinstance(result, types.Result):
        result = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {"jsonrpc": "2.0", "id": message_id, "result": result}


class McpEndpoint:
    """The JSON-RPC dispatch of one server: initialize, ping, tools/list, tools/call, one
    message or (protocol 2025-03-26) a batch per POST.

    The five context tools answer from :attr:`context` (a :class:`ContextService` over
    ``context_sources`` with the settings' profile, scopes and grants); every other tool
    is a registry call. Both pass the same transport rules, and both are audited.
    """

    def __init__(
        self,
        service: RegistryService,
        settings: ServerSettings,
        *,
        context_sources: Mapping[Scope, ContextSource] | None = None,
    ) -> None:
        self.service = service
        self.settings = settings
        self.context_sources = dict(context_sources or {})
        self.context = ContextService(
            self.context_sources,
            profile=settings.context_profile,
            scopes=settings.context_scopes,
            grants=settings.grants,
        )

    async def handle(self, request: Request) -> Response:
        fault = _transport_fault(request, self.settings)
        if fault is not None:
            return fault
        body = read_json_body(request)
        if isinstance(body, list):
            return await self._batch(body, request)
        if not isinstance(body, dict) or "method" not in body:
            if isinstance(body, dict) and ("result" in body or "error" in body):
                return Response(status_code=202)  # a client's response: nothing to answer
            return JSONResponse(_error(None, _Fault(-32600, "not a JSON-RPC request")), 400)
        if "id" not in body:
            return Response(status_code=202)  # notifications are accepted, never answered
        return await self._answered(request, self._dispatch(body, request), body.get("id"))

    async def _answered(
        self,
        request: Request,
        work: Coroutine[Any, Any, dict[str, Any] | list[dict[str, Any]]],
        message_id: Any = None,
    ) -> Response:
        try:
            # A tools/call may wait for an operator: an agent that disconnects meanwhile
            # withdraws its approval request instead of leaving it pending.
            answer = await unless_client_leaves(request, work)
        except ServerStopping:
            # Still connected: the agent learns the call did not run, as an HTTP caller does.
            return JSONResponse(_error(message_id, _STOPPING), 503)
        except ClientGone:
            return Response(status_code=CLIENT_CLOSED)
        if answer == []:
            return Response(status_code=202)  # a batch of notifications only
        return JSONResponse(answer)

    async def _batch(self, messages: list[Any], request: Request) -> Response:
        """A JSON-RPC batch: refused unless the protocol version has batches, empty, or
        over :data:`MAX_BATCH_MESSAGES`; else every request answered in order."""
        refused = _batch_refusal(messages, request)
        if refused is not None:
            return refused
        return await self._answered(request, self._dispatch_all(messages, request))

    async def _dispatch_all(self, messages: list[Any], request: Request) -> list[dict[str, Any]]:
        # In order, one after another: a batch of writes runs as the agent wrote it.
        answers = [await self._dispatch_member(message, request) for message in messages]
        return [answer for answer in answers if answer is not None]

    async def _dispatch_member(self, message: Any, request: Request) -> dict[str, Any] | None:
        """One batch member's answer; ``None`` for a notification or a client's response."""
        if not isinstance(message, dict) or "method" not in message:
            if isinstance(message, dict) and ("result" in message or "error" in message):
                return None
            return _error(None, _Fault(-32600, "not a JSON-RPC request"))
        if "id" not in message:
            return None
        if message.get("method") == "initialize":
            fault = _Fault(-32600, "initialize must not be part of a batch; send it alone first")
            return _error(message.get("id"), fault)
        return await self._dispatch(message, request)

    async def _dispatch(self, message: dict[str, Any], request: Request) -> dict[str, Any]:
        try:
            parsed = types.JSONRPCRequest.model_validate(message)
        except ValidationError:
            return _error(message.get("id"), _Fault(-32600, "invalid JSON-RPC request"))
        params = parsed.params or {}
        try:
            if parsed.method == "initialize":
                return _result(parsed.id, self._initialize(params))
            if parsed.method == "ping":
                return _result(parsed.id, types.EmptyResult())
            if parsed.method == "tools/list":
                return _result(parsed.id, {"tools": self.tools()})
            if parsed.method == "tools/call":
                return _result(parsed.id, await self._call_tool(params, request))
            raise _Fault(-32601, f"method {parsed.method!r} is not supported")
        except _Fault as fault:
            return _error(parsed.id, fault)

    def tools(self) -> list[dict[str, Any]]:
        """What ``tools/list`` answers: the context tools (while a scope is available)
        and every semantic tool the server's grants allow."""
        context = self.context.tool_definitions() if self.context_active else []
        return [*context, *advertised_tools(self.service, self.settings)]

    @property
    def context_active(self) -> bool:
        """Whether the context tools are offered: some enabled scope has a source."""
        return bool(self.context.available)

    def _initialize(self, params: dict[str, Any]) -> types.InitializeResult:
        try:
            request = types.InitializeRequestParams.model_validate(params)
        except ValidationError as exc:
            raise _Fault(-32602, "invalid initialize parameters", _problems(exc)) from exc
        asked = str(request.protocolVersion)
        return types.InitializeResult(
            protocolVersion=asked if asked in PROTOCOL_VERSIONS else LATEST,
            capabilities=types.ServerCapabilities(tools=types.ToolsCapability(listChanged=False)),
            serverInfo=types.Implementation(name=SERVER_NAME, version=SERVER_VERSION),
            instructions="doraforge semantic tools; robot grants are set by the server. "
            "Call context_profile, then search_context and get_context, to orient yourself.",
        )

    async def _call_tool(self, params: dict[str, Any], http: Request) -> dict[str, Any]:
        key = http.headers.get("idempotency-key")
        # Who calls follows the credential presented, as on /api/tools (the agent token is
        # the agent principal); only a tokenless server falls back to this edge's agent.
        principal = caller_principal(http, tokenless="agent")
        try:
            request = types.CallToolRequestParams.model_validate(params)
        except ValidationError as exc:
            raise _Fault(-32602, "invalid tools/call parameters", _problems(exc)) from exc
        if key is not None and not _REQUEST_ID.fullmatch(key.strip()):
            raise _Fault(-32602, "Idempotency-Key must be 1-200 of [A-Za-z0-9._:-]")
        request_id = key.strip() if key is not None else f"mcp-{uuid.uuid4().hex}"
        arguments = request.arguments or {}
        if request.name in self.context.names and self.context_active:
            return await self._call_context(request.name, arguments, request_id, principal)
        body = {
            "type": "portos_tool_call",
            "requestId": request_id,
            "name": request.name,
            "arguments": arguments,
        }
        try:
            outcome = await self.service.call(body, principal, idempotency_key=request_id)
        except RegistryError as exc:
            return refusal_result(exc, request_id)
        entry = self.service.resolve(request.name)
        if entry is None:  # unregistered while it ran: no schema to hold the cut to
            return tool_result(outcome, self.settings, name=request.name)
        schema = entry.output_schema if entry.output_schema.get("type") == "object" else None
        return tool_result(outcome, self.settings, schema, name=entry.listed_name)

    async def _call_context(
        self, name: str, arguments: dict[str, Any], request_id: str, principal: Principal
    ) -> dict[str, Any]:
        """A context tool's answer as a ``CallToolResult``; a refusal or a source failure
        is an ``isError`` result. Recorded in the registry's audit log like any call."""
        started = time.monotonic()
        try:
            structured = await self.context.call(name, arguments)
        except ContextArgumentError as exc:
            self._audit(request_id, name, arguments, started, principal, error_code=exc.code)
            return tool_error(exc.to_payload(), request_id)
        self._audit(request_id, name, arguments, started, principal)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=dumps(structured))],
            structuredContent=structured,
            isError=False,
            _meta={
                "doraforge/requestId": request_id,
                "doraforge/truncated": bool(structured.get("truncated")),
            },
        ).model_dump(by_alias=True, exclude_none=True, mode="json")

    def _audit(
        self,
        request_id: str,
        name: str,
        arguments: Mapping[str, Any],
        started: float,
        principal: Principal,
        *,
        error_code: str | None = None,
    ) -> None:
        self.service.audit.record(
            request_id=request_id,
            name=name,
            principal_id=principal.id,
            scope=principal.scope,
            state="completed" if error_code is None else "failed",
            error_code=error_code,
            duration_s=time.monotonic() - started,
            argument_keys=[str(key) for key in arguments],
        )


def _batch_refusal(messages: list[Any], request: Request) -> JSONResponse | None:
    """Why a batch cannot be answered at all (a structured 400), or ``None``."""
    version = request.headers.get("mcp-protocol-version")
    if version is not None and version not in BATCH_VERSIONS:
        return _http_fault(
            400,
            "MCP_BATCH_UNSUPPORTED",
            f"MCP {version} has no JSON-RPC batches; send one message per POST "
            f"(batches exist in {', '.join(BATCH_VERSIONS)} only)",
            {"version": version, "batchVersions": list(BATCH_VERSIONS)},
        )
    if not messages:
        return JSONResponse(_error(None, _Fault(-32600, "an empty batch is not a request")), 400)
    if len(messages) > MAX_BATCH_MESSAGES:
        return _http_fault(
            400,
            "MCP_BATCH_TOO_LARGE",
            f"a batch holds at most {MAX_BATCH_MESSAGES} messages, this one {len(messages)}; "
            "split it",
            {"messages": len(messages), "maxMessages": MAX_BATCH_MESSAGES},
        )
    calls = sum(1 for m in messages if isinstance(m, dict) and m.get("method") == "tools/call")
    if request.headers.get("idempotency-key") is not None and calls > 1:
        return _http_fault(
            400,
            "MCP_BATCH_IDEMPOTENCY",
            "one Idempotency-Key cannot name several tools/call requests; send each keyed "
            "call in its own POST",
            {"calls": calls},
        )
    return None


#: How each registry refusal reaches an MCP client: a JSON-RPC error code for a protocol
#: fault (the requestId is spent on another call, or expired), or ``None`` for an
#: ``isError`` result the agent reads and can act on (fix the call, ask for a grant). A
#: class answers as the entry it derives from.
MCP_FAULT_FOR_ERROR: dict[type[RegistryError], int | None] = {
    InvalidRequest: None,
    Forbidden: None,
    NotFound: None,
    Conflict: -32000,
    Unprocessable: None,
}


def fault_code_for(error: RegistryError) -> int | None:
    """The JSON-RPC error code of ``error`` from :data:`MCP_FAULT_FOR_ERROR`, ``None`` when
    it is answered as an ``isError`` tool result."""
    return next((code for cls, code in MCP_FAULT_FOR_ERROR.items() if isinstance(error, cls)), None)


def refusal_result(error: RegistryError, request_id: str) -> dict[str, Any]:
    """The one place a registry refusal of ``tools/call`` becomes MCP: an ``isError``
    result, or (raised) the JSON-RPC fault its table entry names."""
    code = fault_code_for(error)
    if code is not None:
        raise _Fault(code, error.message, error.to_payload()) from error
    return tool_error(error.to_payload(), request_id)


def _problems(exc: ValidationError) -> list[dict[str, Any]]:
    return [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()[:5]]


def advertised_tools(service: RegistryService, settings: ServerSettings) -> list[dict[str, Any]]:
    """The MCP projection of every agent-scope tool the server's grants allow."""
    principal = server_principal(service, settings, scope="agent", authenticated=False)
    entries = service.entries(scope="agent", principal=principal)
    return [service.project(entry, "mcp") for entry in entries]


_INACTIVE_NOTE = (
    "MCP is disabled on this server (serve --mcp enables it): no semantic tool is advertised "
    "and the context tools below are inactive; grants are shown as configured"
)


def manifest(
    service: RegistryService, settings: ServerSettings, endpoint: McpEndpoint | None = None
) -> dict[str, Any]:
    """What ``GET /api/agent-context/manifest`` reports (readable while MCP is disabled).

    Enabled, profile, scopes, grants, limits (every budget), exclusions and the advertised
    schemas. While MCP is disabled no semantic tool is advertised (``tools: []``,
    ``semanticToolsActive: false``): a saved grant must not read as a callable tool. The
    context tools' schemas stay inspectable, marked ``active: false``.
    """
    endpoint = endpoint or McpEndpoint(service, settings)
    context = endpoint.context
    enabled = settings.mcp_enabled
    profile = context.profile()
    answer: dict[str, Any] = {
        "enabled": enabled,
        "endpoint": "/mcp",
        "protocolVersions": list(PROTOCOL_VERSIONS),
        "batchProtocolVersions": list(BATCH_VERSIONS),
        "profile": profile["profile"],
        "scopes": profile["scopes"],
        "grants": sorted(settings.grants),
        "approvals": sorted(settings.approvals),
        "authentication": "bearer" if settings.token is not None else "none",
        "limits": {
            "maxResultChars": settings.max_result_chars,
            "maxResultItems": settings.max_result_items,
            "maxBodyBytes": settings.max_body_bytes,
            "maxBatchMessages": MAX_BATCH_MESSAGES,
            "maxImageDataChars": MAX_IMAGE_DATA_CHARS,
            "context": profile["limits"],
        },
        "exclusions": profile["exclusions"],
        "semanticToolsActive": enabled,
        "tools": advertised_tools(service, settings) if enabled else [],
        "contextTools": [
            {**tool, "active": enabled and endpoint.context_active}
            for tool in context.tool_definitions()
        ],
    }
    if not enabled:
        answer["note"] = _INACTIVE_NOTE
    return answer


def endpoint_of(request: Request) -> McpEndpoint:
    """The MCP endpoint of the app serving ``request`` (``app.state.mcp``)."""
    endpoint: McpEndpoint = request.app.state.mcp
    return endpoint


async def mcp_post(request: Request) -> Response:
    return await endpoint_of(request).handle(request)


async def mcp_other(request: Request) -> Response:
    denied = guard_caller(request)
    if denied is not None:
        return denied
    return _http_fault(405, "MCP_METHOD_NOT_ALLOWED", "only POST is supported", Allow="POST")


async def agent_manifest(request: Request) -> Response:
    denied = guard_caller(request)
    if denied is not None:
        return denied
    return JSONResponse(manifest(service_of(request), settings_of(request), endpoint_of(request)))


#: ``/mcp`` (POST only; GET and DELETE answered 405) and ``/api/agent-context/manifest``;
#: they read the app's :class:`McpEndpoint` (``app.state.mcp``) and the registry's state.
ROUTES: list[BaseRoute] = [
    APIRoute("/mcp", mcp_post, methods=["POST"]),
    # One route per method: each operation in the OpenAPI document needs its own id.
    APIRoute("/mcp", mcp_other, methods=["GET"], operation_id="mcp_get"),
    APIRoute("/mcp", mcp_other, methods=["DELETE"], operation_id="mcp_delete"),
    APIRoute("/api/agent-context/manifest", agent_manifest, methods=["GET"]),
]
