"""REST edge for API-tool bundles: upload (PUT), list/download (GET), delete, probe and
OpenAPI import (POST).

The routes are a table (:data:`ROUTES`) whose handlers read the app's :class:`ApiTools`
(``app.state.api_tools``). They raise registry errors and let the registry's HTTP edge map
them (``registry.http.STATUS_FOR_ERROR``): a bundle that fails validation is 422, a name
taken, a host the outbound policy will never dial or a credential not set is 409, an
unknown service 404. The import answers a draft and saves nothing.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from doraforge.registry.api_tools.bundle import parse_bundle
from doraforge.registry.api_tools.errors import InvalidRequest, Unprocessable
from doraforge.registry.api_tools.library import ApiTools, check_service_name
from doraforge.registry.api_tools.openapi import import_openapi
from doraforge.registry.api_tools.tools import probe, tool_name
from doraforge.wire.guard import NO_BODY, json_body

__all__ = ["ROUTES", "ApiTools", "api_tools_of"]


def _json_body(request: Request) -> Any:
    """The body the transport guard read with the server's streamed limit and parsed as
    strict JSON (duplicate keys, huge integers and deep nesting are refused there)."""
    body = json_body(request)
    if body is NO_BODY:
        raise InvalidRequest("API_BODY_INVALID", "a JSON body is required")
    return body


def api_tools_of(request: Request) -> ApiTools:
    """The API tools of the app serving ``request`` (``app.state.api_tools``)."""
    api_tools: ApiTools = request.app.state.api_tools
    return api_tools


async def list_services(request: Request) -> Any:
    rows = [
        {"name": b.name, "baseUrl": b.baseUrl, "tools": [tool_name(b, t) for t in b.tools]}
        for b in api_tools_of(request).bundles.values()
    ]
    return {"ok": True, "services": rows}


async def download(name: str, request: Request) -> Any:
    bundle = api_tools_of(request).get(name)
    return {"ok": True, "bundle": bundle.model_dump(by_alias=True, exclude_none=True)}


async def upload(name: str, request: Request) -> Any:
    check_service_name(name)
    bundle = parse_bundle(_json_body(request))
    if bundle.name != name:
        raise Unprocessable(
            "API_BUNDLE_INVALID",
            f"name: bundle name {bundle.name!r} does not match the URL {name!r}",
        )
    created = api_tools_of(request).save(bundle)
    body = {"ok": True, "service": name, "tools": [tool_name(bundle, t) for t in bundle.tools]}
    return JSONResponse(body, status_code=201 if created else 200)


async def probe_route(name: str, request: Request) -> Any:
    api_tools = api_tools_of(request)
    bundle = api_tools.get(name)
    body = _json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("tool"), str):
        raise InvalidRequest("API_BODY_INVALID", "tool: a tool name is required")
    arguments = body.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise InvalidRequest("API_BODY_INVALID", "arguments: must be an object")
    client = api_tools.client if body.get("live") is True else None
    secrets = api_tools.secrets
    report = await probe(bundle, body["tool"], arguments, secrets=secrets, client=client)
    return {"ok": True, **report}


async def delete_service(name: str, request: Request) -> Any:
    bundle = api_tools_of(request).delete(name)
    return {
        "ok": True,
        "deleted": bundle.name,
        "tools": [tool_name(bundle, t) for t in bundle.tools],
    }


async def import_route(request: Request) -> Any:
    body = _json_body(request)
    if not isinstance(body, dict):
        raise InvalidRequest("API_BODY_INVALID", "the body must be a JSON object")
    draft, errors = import_openapi(body)
    return {"ok": True, "bundle": draft, "valid": not errors, "errors": errors}


#: Routes under ``/api/api-tools``; they read ``app.state.api_tools``.
ROUTES: list[BaseRoute] = [
    APIRoute("/api/api-tools", list_services, methods=["GET"]),
    APIRoute("/api/api-tools/import", import_route, methods=["POST"]),
    APIRoute("/api/api-tools/{name}", download, methods=["GET"]),
    APIRoute("/api/api-tools/{name}", delete_service, methods=["DELETE"]),
    APIRoute("/api/api-tools/{name}", upload, methods=["PUT"]),
    APIRoute("/api/api-tools/{name}/probe", probe_route, methods=["POST"]),
]
