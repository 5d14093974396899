"""Inventory documents of the running registry app, served under ``/api/api-docs``.

Nothing is checked in to regenerate: each document is derived from the app itself on first
read and kept on it (``app.state.inventory``, see :func:`inventory_of`) for as long as the
route table (for ``tools.min.json``, the tool catalog) is the one it was built from, so a
route mounted or a tool registered before a read is always in it.

- ``internal/openapi.json``: OpenAPI 3 of every route of the app. FastAPI's own document
  (``app.openapi()``) is the base; a route FastAPI does not describe (a Starlette route or
  mount, the ``/openapi.json`` route itself, paths a middleware serves) gets a *generated*
  operation with its path parameters and a default response. Every operation carries
  ``x-doraforge-access``, ``x-doraforge-side-effect`` and ``x-doraforge-contract``.
- ``openapi.json``: the same for only the routes meant for outside callers (:data:`ACCESS`
  ``public`` and ``agent``), with only the components those operations use.
- ``catalog.json``: one record per operation (method, path, operationId, domain, access,
  operator-only, side effect, modeled or generated) and counts.
- ``tools.min.json``: every registered tool as a minimized provider-neutral record (input
  schema, side effect, risk, grants, its HTTP binding, declared failure codes).

A route is *modeled* when it declares its responses, *generated* otherwise (FastAPI's
generic 200 or an inventory default): a generated operation is an inventory entry, not a
contract to build a client on. The internal document and the catalog are the operator's
(:data:`~doraforge.registry.http.OPERATOR_ONLY`); the public ones need only what every
route needs, the transport guard.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fastapi import FastAPI, Request, Response
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute

from doraforge.registry.errors import InvalidRequest
from doraforge.registry.http import (
    ERROR_SCHEMA,
    OPERATOR_ONLY,
    json_response_doc,
    require_operator,
)
from doraforge.registry.inventory_tools import tools_min
from doraforge.registry.model import ToolEntry

if TYPE_CHECKING:
    from doraforge.registry.service import RegistryService

type Access = Literal["public", "agent", "operator"]
type Document = dict[str, Any]

API_DOCS = "/api/api-docs"
#: Who each route is meant for, by path prefix (first match, whole segments). A route no
#: entry names is the operator's: nothing reaches the public document unless listed here.
ACCESS: tuple[tuple[str, Access], ...] = (
    (f"{API_DOCS}/openapi.json", "public"),
    (f"{API_DOCS}/tools.min.json", "public"),
    (API_DOCS, "operator"),
    ("/api/tools", "public"),
    ("/mcp", "agent"),
    ("/api/agent-context", "agent"),
    ("/api/approvals", "operator"),
    ("/api/api-tools", "operator"),
    ("/api/recipes", "operator"),
    ("/console", "operator"),
)
PUBLIC_ACCESS: frozenset[Access] = frozenset({"public", "agent"})
#: Methods that change nothing. Every other method is classed ``write``, including POST
#: routes that only sometimes write (``/mcp``, ``/api/tools/call``): a caller deciding
#: whether a route is safe to retry or to expose needs the worst case.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_PARAMETER = re.compile(r"{([^}:]+)(?::[^}]*)?}")
_ERROR_REF = {"$ref": "#/components/schemas/Error"}
_DEFAULT = {
    "description": "a structured error",
    "content": {"application/json": {"schema": _ERROR_REF}},
}


@dataclass(frozen=True)
class Declared:
    """One (method, path) the app serves: the route object (``None`` for a path a
    middleware serves) and a summary for a generated operation."""

    method: str
    path: str
    route: BaseRoute | None
    summary: str


def access_of(path: str) -> Access:
    """The :data:`ACCESS` class of ``path`` (``operator`` when no entry names it)."""
    for prefix, access in ACCESS:
        if path == prefix or path.startswith(f"{prefix.rstrip('/')}/"):
            return access
    return "operator"


def domain_of(path: str) -> str:
    """The first segment that names the area (``/api/tools/call`` → ``tools``)."""
    segments = [s for s in path.split("/") if s]
    if not segments:
        return "root"
    if segments[0] == "api" and len(segments) > 1:
        return segments[1]
    return "api-docs" if segments[0] == "openapi.json" else segments[0]


def _methods(route: BaseRoute) -> list[str]:
    declared = getattr(route, "methods", None)
    # A Starlette route with no methods answers any; the inventory names its GET.
    methods = set(declared) if declared else {"GET"}
    if "GET" in methods:
        methods.discard("HEAD")  # implied by GET, as FastAPI's document treats it
    return sorted(methods)


def declared_routes(app: FastAPI) -> list[Declared]:
    """Every (method, path) of the app's route table, mounts walked, plus the paths a
    middleware declares it serves (its class's ``inventory_routes``: ``(method, path,
    summary)`` triples; the console's static shell is such a middleware)."""
    found = list(_walk(app.routes, ""))
    for middleware in app.user_middleware:
        for method, path, summary in getattr(middleware.cls, "inventory_routes", ()):
            found.append(Declared(method.upper(), path, None, summary))
    return found


def _walk(routes: Sequence[BaseRoute], prefix: str) -> Iterator[Declared]:
    for route in routes:
        if isinstance(route, Mount):
            children = route.routes
            if children:
                yield from _walk(children, prefix + route.path)
            else:
                path = f"{prefix}{route.path}/{{path}}"
                yield Declared("GET", path, route, f"{route.name or 'mount'} (mounted app)")
        elif isinstance(route, Route | WebSocketRoute):
            summary = route.name + (" (WebSocket)" if isinstance(route, WebSocketRoute) else "")
            for method in _methods(route) if isinstance(route, Route) else ["GET"]:
                yield Declared(method, prefix + route.path_format, route, summary)


def _operator_only(route: BaseRoute | None) -> bool:
    if not isinstance(route, APIRoute):
        return False
    return any(getattr(d, "dependency", None) is require_operator for d in route.dependencies)


def _modeled(route: BaseRoute | None, described: bool) -> bool:
    if not described or not isinstance(route, APIRoute):
        return False
    extra = route.openapi_extra or {}
    return bool(route.responses or route.response_model or "requestBody" in extra)


def _operation_id(declared: Declared, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", declared.path.strip("/")) or "root"
    candidate = f"{base}_{declared.method.lower()}"
    suffix = 2
    while candidate in taken:
        candidate, suffix = f"{base}_{declared.method.lower()}_{suffix}", suffix + 1
    return candidate


def _generated(declared: Declared, taken: set[str]) -> Document:
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PARAMETER.findall(declared.path)
    ]
    operation: Document = {
        "summary": declared.summary,
        "operationId": _operation_id(declared, taken),
        "responses": {"default": copy.deepcopy(_DEFAULT)},
    }
    if parameters:
        operation["parameters"] = parameters
    return operation


def internal_openapi(app: FastAPI, declared: Sequence[Declared]) -> Document:
    """FastAPI's document of ``app`` with every ``declared`` route in it (see the module
    text); a fresh copy, so the app's own ``/openapi.json`` is never changed."""
    document = copy.deepcopy(app.openapi())
    paths: dict[str, dict[str, Document]] = document.setdefault("paths", {})
    taken = {op["operationId"] for item in paths.values() for op in item.values()}
    for entry in declared:
        item = paths.setdefault(entry.path, {})
        described = entry.method.lower() in item
        if not described:
            item[entry.method.lower()] = _generated(entry, taken)
        operation = item[entry.method.lower()]
        taken.add(operation["operationId"])
        operation.setdefault("responses", {}).setdefault("default", copy.deepcopy(_DEFAULT))
        operation["x-doraforge-access"] = access_of(entry.path)
        operation["x-doraforge-operator-only"] = _operator_only(entry.route)
        operation["x-doraforge-side-effect"] = side_effect_of(entry.method)
        modeled = _modeled(entry.route, described)
        operation["x-doraforge-contract"] = "modeled" if modeled else "generated"
    document["paths"] = _declared_only(paths)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = copy.deepcopy(ERROR_SCHEMA)
    return document


def _declared_only(paths: dict[str, dict[str, Document]]) -> dict[str, dict[str, Document]]:
    """The operations the route table declares (FastAPI keeps its document until its own
    route counter moves, so a route removed by hand could linger there)."""
    kept = {
        path: {method: op for method, op in item.items() if "x-doraforge-access" in op}
        for path, item in paths.items()
    }
    return {path: item for path, item in kept.items() if item}


def side_effect_of(method: str) -> Literal["read", "write"]:
    """``read`` for :data:`READ_METHODS`, ``write`` for every other method."""
    return "read" if method.upper() in READ_METHODS else "write"


def public_openapi(internal: Document) -> Document:
    """``internal`` cut to the operations of :data:`PUBLIC_ACCESS` and the components
    they reference (so no operator schema leaks through an unused component)."""
    document = copy.deepcopy(internal)
    document["info"] = {**document["info"], "title": f"{document['info']['title']} (public)"}
    paths = {}
    for path, item in document["paths"].items():
        kept = {m: op for m, op in item.items() if op["x-doraforge-access"] in PUBLIC_ACCESS}
        if kept:
            paths[path] = kept
    document["paths"] = paths
    schemas = document.get("components", {}).get("schemas", {})
    used = _referenced(paths, schemas)
    document["components"]["schemas"] = {k: v for k, v in schemas.items() if k in used}
    return document


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            yield ref.removeprefix("#/components/schemas/")
        for member in value.values():
            yield from _refs(member)
    elif isinstance(value, list):
        for member in value:
            yield from _refs(member)


def _referenced(paths: Document, schemas: Document) -> set[str]:
    """The schema names ``paths`` reference, directly or through other schemas."""
    used: set[str] = set()
    pending = list(_refs(paths))
    while pending:
        name = pending.pop()
        if name not in used and name in schemas:
            used.add(name)
            pending.extend(_refs(schemas[name]))
    return used


def route_catalog(internal: Document, routes: int) -> Document:
    """One record per operation of ``internal`` and the counts; ``routes`` is how many
    (method, path) declarations the app's table and middleware hold."""
    operations = [
        {
            "method": method.upper(),
            "path": path,
            "operationId": operation["operationId"],
            "domain": domain_of(path),
            "access": operation["x-doraforge-access"],
            "operatorOnly": operation["x-doraforge-operator-only"],
            "sideEffect": operation["x-doraforge-side-effect"],
            "contract": operation["x-doraforge-contract"],
            "summary": operation.get("summary", ""),
        }
        for path, item in sorted(internal["paths"].items())
        for method, operation in sorted(item.items())
    ]

    def count(key: str) -> dict[str, int]:
        return dict(sorted(Counter(str(op[key]) for op in operations).items()))

    stats = {
        "operations": len(operations),
        "declarations": routes,
        "paths": len(internal["paths"]),
        **{
            f"by{key[0].upper()}{key[1:]}": count(key)
            for key in ("access", "sideEffect", "contract", "domain")
        },
    }
    return {"operations": operations, "stats": stats}


def _same(held: Sequence[object], now: Sequence[object]) -> bool:
    """Whether ``now`` holds the very objects ``held`` does (identity, not equality: a
    re-registered tool or a replaced route is another object)."""
    return len(held) == len(now) and all(a is b for a, b in zip(held, now, strict=True))


class Inventory:
    """The four documents of one app, each built on first read and kept until the route
    table (for ``tools.min.json``, the tool catalog) changes."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._routes: tuple[object, ...] = ()
        self._documents: dict[str, Document] = {}
        self._entries: tuple[ToolEntry, ...] = ()
        self._tools: Document | None = None

    def _route_key(self) -> tuple[object, ...]:
        middleware = tuple(m.cls for m in self._app.user_middleware)
        return (*self._app.routes, *middleware)

    def _route_documents(self) -> dict[str, Document]:
        key = self._route_key()
        if not self._documents or not _same(self._routes, key):
            declared = declared_routes(self._app)
            internal = internal_openapi(self._app, declared)
            self._documents = {
                "internal": internal,
                "public": public_openapi(internal),
                "catalog": route_catalog(internal, len(declared)),
            }
            self._routes = key
        return self._documents

    def internal_openapi(self) -> Document:
        return self._route_documents()["internal"]

    def public_openapi(self) -> Document:
        return self._route_documents()["public"]

    def catalog(self) -> Document:
        return self._route_documents()["catalog"]

    def tools_min(self) -> Document:
        service: RegistryService = self._app.state.service
        entries = tuple(service.entries())
        if self._tools is None or not _same(self._entries, entries):
            self._tools, self._entries = tools_min(entries), entries
        return self._tools


def inventory_of(app: FastAPI) -> Inventory:
    """The app's :class:`Inventory`, created on first use."""
    inventory: Inventory | None = getattr(app.state, "inventory", None)
    if inventory is None:
        inventory = app.state.inventory = Inventory(app)
    return inventory


def _no_query(request: Request) -> None:
    if request.query_params:
        name = next(iter(request.query_params.keys()))
        raise InvalidRequest(
            "INVALID_QUERY",
            f"unknown query parameter {name!r}; the inventory documents take none",
            details={"allowed": []},
        )


def _answer(request: Request, read: Callable[[Inventory], Document]) -> Response:
    _no_query(request)
    body = json.dumps(read(inventory_of(request.app)), separators=(",", ":"))
    return Response(body, media_type="application/json")


async def internal_document(request: Request) -> Response:
    return _answer(request, Inventory.internal_openapi)


async def public_document(request: Request) -> Response:
    return _answer(request, Inventory.public_openapi)


async def catalog_document(request: Request) -> Response:
    return _answer(request, Inventory.catalog)


async def tools_document(request: Request) -> Response:
    return _answer(request, Inventory.tools_min)


_RESPONSES: dict[int | str, Document] = {
    "200": json_response_doc("the document, derived from the running app", {"type": "object"}),
    "400": json_response_doc(
        "INVALID_QUERY: these documents take no query parameters", ERROR_SCHEMA
    ),
    "401": json_response_doc("no or a wrong bearer token (when one is configured)", ERROR_SCHEMA),
    "405": json_response_doc("METHOD_NOT_ALLOWED: the documents are read with GET", ERROR_SCHEMA),
}
_OPERATOR_RESPONSES: dict[int | str, Document] = {
    **_RESPONSES,
    "403": json_response_doc(
        "OPERATOR_REQUIRED: the agent token where an operator token is set", ERROR_SCHEMA
    ),
}


def _route(
    path: str, endpoint: Callable[[Request], Any], summary: str, *, operator: bool
) -> APIRoute:
    return APIRoute(
        f"{API_DOCS}/{path}",
        endpoint,
        methods=["GET"],
        summary=summary,
        responses=_OPERATOR_RESPONSES if operator else _RESPONSES,
        dependencies=OPERATOR_ONLY if operator else None,
    )


#: The four documents; they read the app through ``request.app``.
ROUTES: list[BaseRoute] = [
    _route("internal/openapi.json", internal_document, "OpenAPI 3 of every route", operator=True),
    _route(
        "openapi.json",
        public_document,
        "OpenAPI 3 of the routes for outside callers",
        operator=False,
    ),
    _route(
        "catalog.json", catalog_document, "Every route with access and side effect", operator=True
    ),
    _route(
        "tools.min.json",
        tools_document,
        "Every tool, minimized, with its HTTP binding",
        operator=False,
    ),
]
