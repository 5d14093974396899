"""The operator's switch for the built-in tools, under ``/api/builtins``: a built-in joins
or leaves the catalog live, without a restart (the catalog's ETag moves with it).

``GET /api/builtins`` lists each built-in and whether it is in the catalog;
``PUT /api/builtins/{name}`` puts it in, ``DELETE /api/builtins/{name}`` takes it out.
Every route is the operator's; each write is audited by the built-in's name.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from doraforge.registry.builtins import NAMES, Builtins
from doraforge.registry.errors import NotFound
from doraforge.registry.http import OPERATOR_ONLY, audited_write


def builtins_of(request: Request) -> Builtins:
    """The built-ins of the app serving ``request`` (``app.state.builtins``)."""
    builtins: Builtins = request.app.state.builtins
    return builtins


def _known(name: str) -> str:
    if name not in NAMES:
        raise NotFound(
            "BUILTIN_NOT_FOUND",
            f"no built-in tool {name!r}; the built-ins are {', '.join(NAMES)}",
            details={"name": name, "builtins": list(NAMES)},
        )
    return name


async def list_builtins(request: Request) -> Any:
    return {"ok": True, "builtins": builtins_of(request).states()}


async def enable_builtin(name: str, request: Request) -> Any:
    builtins = builtins_of(request)
    with audited_write(request, f"builtins enable {_known(name)}"):
        tool = builtins.enable(name)
    return {"ok": True, "enabled": name, "tool": tool}


async def disable_builtin(name: str, request: Request) -> Any:
    builtins = builtins_of(request)
    with audited_write(request, f"builtins disable {_known(name)}"):
        was = builtins.disable(name)
    return {"ok": True, "disabled": name, "wasEnabled": was}


def _route(path: str, endpoint: Any, method: str, summary: str) -> APIRoute:
    return APIRoute(path, endpoint, methods=[method], summary=summary, dependencies=OPERATOR_ONLY)


#: Routes under ``/api/builtins``; every one the operator's.
ROUTES: list[BaseRoute] = [
    _route("/api/builtins", list_builtins, "GET", "The built-in tools and which are on"),
    _route("/api/builtins/{name}", enable_builtin, "PUT", "Put a built-in in the catalog"),
    _route("/api/builtins/{name}", disable_builtin, "DELETE", "Take a built-in out"),
]
