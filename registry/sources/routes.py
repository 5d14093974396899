"""Operator routes of the MCP sources: list them, add or replace one live, remove one live.

``GET /api/sources/mcp`` lists every server with its state; ``PUT /api/sources/mcp/{name}``
takes a server config (the ``mcp_servers.<name>`` shape of the serve config), starts it and
answers once its tools are listed (or its start failed: the row says why);
``DELETE /api/sources/mcp/{name}`` stops it, unregisters its tools and retracts its egress
hosts. A PUT or DELETE is kept in ``<sources_dir>/servers.json`` before it is made live, so
it survives a restart: a deleted server the serve config declares stays removed (a
tombstone, listed under ``removed``) until it is PUT again. Each row's ``origin`` is
``config`` or ``operator``. Each PUT and DELETE is audited by the server's name and its
outcome (``registry.http.audited_write``), never its config. All three are the operator's
(:data:`registry.http.OPERATOR_ONLY`); errors map through the registry's one table (422
``MCP_SOURCE_INVALID``, 404 ``MCP_SOURCE_NOT_FOUND``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from doraforge.registry.errors import InvalidRequest, Unprocessable
from doraforge.registry.http import (
    ERROR_SCHEMA,
    OPERATOR_ONLY,
    audited_write,
    json_response_doc,
    read_json_body,
)
from doraforge.registry.sources.config import McpServerConfig, check_name, parse_server

if TYPE_CHECKING:
    from doraforge.registry.sources import McpSources


def _sources(request: Request) -> McpSources:
    sources: McpSources = request.app.state.mcp_sources
    return sources


async def list_sources(request: Request) -> Any:
    sources = _sources(request)
    return {"ok": True, "servers": sources.rows(), "removed": sources.removed()}


async def put_source(name: str, request: Request) -> Any:
    check_name(name)
    sources = _sources(request)
    with audited_write(request, f"sources put {name}"):
        config = _config(name, read_json_body(request))
        missing = sources.missing_credentials(config)
        if missing:
            raise Unprocessable(
                "MCP_SOURCE_CREDENTIAL_MISSING",
                f"mcp_servers.{name}.env: credential(s) {', '.join(missing)} not in the "
                "credential store; add them first",
                details={"server": name, "credentials": missing},
            )
        source, created = await sources.put(name, config)
    return JSONResponse(
        {"ok": True, "server": sources.row(source)}, status_code=201 if created else 200
    )


def _config(name: str, body: Any) -> McpServerConfig:
    if not isinstance(body, dict):
        raise InvalidRequest("MCP_SOURCE_BODY_INVALID", "the body must be a server config object")
    return parse_server(name, body)


async def delete_source(name: str, request: Request) -> Any:
    with audited_write(request, f"sources delete {name}"):
        row = await _sources(request).delete(name)
    return {"ok": True, "server": row}


def _doc(description: str) -> dict[str, Any]:
    return json_response_doc(description, ERROR_SCHEMA)


_REFUSED: dict[int | str, dict[str, Any]] = {
    "401": _doc("no or a wrong bearer token (when one is configured)"),
    "403": _doc("OPERATOR_REQUIRED: the agent token on an operator route"),
}
_SERVER = {"type": "object", "properties": {"ok": {"const": True}, "server": {"type": "object"}}}

#: The operator's routes over ``app.state.mcp_sources``.
ROUTES: list[BaseRoute] = [
    APIRoute(
        "/api/sources/mcp",
        list_sources,
        methods=["GET"],
        dependencies=OPERATOR_ONLY,
        summary="List the MCP servers that are tool sources, with their state",
        responses={"200": json_response_doc("every server's row", _SERVER), **_REFUSED},
    ),
    APIRoute(
        "/api/sources/mcp/{name}",
        put_source,
        methods=["PUT"],
        dependencies=OPERATOR_ONLY,
        summary="Add or replace an MCP server live; answers once its tools are listed",
        responses={
            "200": json_response_doc("replaced", _SERVER),
            "201": json_response_doc("added", _SERVER),
            "400": _doc("MCP_SOURCE_BODY_INVALID or a strict-JSON refusal of the body"),
            "422": _doc("MCP_SOURCE_INVALID or MCP_SOURCE_CREDENTIAL_MISSING"),
            **_REFUSED,
        },
    ),
    APIRoute(
        "/api/sources/mcp/{name}",
        delete_source,
        methods=["DELETE"],
        dependencies=OPERATOR_ONLY,
        summary="Remove an MCP server live: its tools and egress hosts go with it",
        responses={
            "200": json_response_doc("removed", _SERVER),
            "404": _doc("MCP_SOURCE_NOT_FOUND"),
            **_REFUSED,
        },
    ),
]
