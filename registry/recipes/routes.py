"""The operator's recipe routes under ``/api/recipes``.

Every route is the operator's (``registry.http.OPERATOR_ONLY``), reads included: a
definition's literals and bindings are not for agents, who see a recipe only as a catalog
tool. All of them sit behind the registry's transport guard (Host, Origin, token, JSON
bodies with a streamed limit, strict JSON). Each write is audited (who, which recipe,
outcome, never the definition). Refusals are registry errors mapped by the HTTP edge's one
table: a definition that may not be saved is 422 with its ``RECIPE_*`` code, a body that
is not a JSON object 400, an unknown recipe 404, a name taken or a revision not in the
history 409.

``attach`` opens the library in ``store_dir`` (``<home>/recipes`` under ``doraforge
serve``) and registers its active recipes as ``app.state.recipes``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from doraforge.registry.errors import InvalidRequest
from doraforge.registry.http import OPERATOR_ONLY, audited_write, read_json_body
from doraforge.registry.recipes.library import RecipeLibrary

if TYPE_CHECKING:
    from fastapi import FastAPI

    from doraforge.registry.service import RegistryService


def library_of(request: Request) -> RecipeLibrary:
    """The recipe library of the app serving ``request`` (``app.state.recipes``)."""
    library: RecipeLibrary = request.app.state.recipes
    return library


async def list_recipes(request: Request) -> Any:
    library = library_of(request)
    rows = [library.summary(record) for _, record in sorted(library.records.items())]
    return {"ok": True, "recipes": rows, "skipped": library.skipped_files()}


async def show_recipe(name: str, request: Request) -> Any:
    return {"ok": True, "recipe": library_of(request).detail(name)}


async def save_recipe(request: Request) -> Any:
    body = read_json_body(request)
    if not isinstance(body, dict):
        raise InvalidRequest(
            "RECIPE_BODY_INVALID", "the body must be a recipe definition (a JSON object)"
        )
    name = body.get("name") if isinstance(body.get("name"), str) else None
    with audited_write(request, f"recipes save {name or '(unnamed)'}"):
        summary, added = library_of(request).save(body)
    return JSONResponse({"ok": True, "recipe": summary, "added": added}, 201 if added else 200)


async def archive_recipe(name: str, request: Request) -> Any:
    _no_body(request)
    with audited_write(request, f"recipes archive {name}"):
        summary = library_of(request).archive(name)
    return {"ok": True, "recipe": summary}


async def restore_recipe(name: str, request: Request) -> Any:
    revision = _revision(read_json_body(request))
    with audited_write(request, f"recipes restore {name}"):
        summary = library_of(request).restore(name, revision)
    return {"ok": True, "recipe": summary}


def _no_body(request: Request) -> None:
    body = read_json_body(request)
    if body not in (None, {}):
        raise InvalidRequest("RECIPE_BODY_INVALID", "archive takes no body (or {})")


def _revision(body: Any) -> int | None:
    if body is None or body == {}:
        return None
    revision = body.get("revision") if isinstance(body, dict) else None
    if set(body if isinstance(body, dict) else ()) != {"revision"} or not _positive(revision):
        raise InvalidRequest(
            "RECIPE_BODY_INVALID", 'restore takes no body, {} or {"revision": N} (N ≥ 1)'
        )
    assert isinstance(revision, int)
    return revision


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _route(path: str, endpoint: Any, method: str, summary: str) -> APIRoute:
    return APIRoute(path, endpoint, methods=[method], summary=summary, dependencies=OPERATOR_ONLY)


#: Routes under ``/api/recipes``; they read ``app.state.recipes``.
ROUTES: list[BaseRoute] = [
    _route("/api/recipes", list_recipes, "GET", "Saved recipes with their status"),
    _route("/api/recipes", save_recipe, "POST", "Save a recipe (a new active revision)"),
    _route("/api/recipes/{name}", show_recipe, "GET", "A recipe's definition and revisions"),
    _route("/api/recipes/{name}/archive", archive_recipe, "POST", "Archive a recipe"),
    _route("/api/recipes/{name}/restore", restore_recipe, "POST", "Restore a recipe"),
]


def attach(app: FastAPI, service: RegistryService, store_dir: Path) -> None:
    """Open the recipe library in ``store_dir`` and register its active recipes."""
    app.state.recipes = RecipeLibrary(store_dir, service)
