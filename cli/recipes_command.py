"""``doraforge recipes list|show|save|archive|restore``: the operator's saved read recipes.

The commands talk to a running ``doraforge serve`` over its operator routes
(``/api/recipes``) at ``--url``, with the operator's token found as ``doraforge
approvals`` finds it (``--token-env``/``--token-file``, else ``$DORAFORGE_OPERATOR_TOKEN``,
else ``$DORAFORGE_REGISTRY_TOKEN``): the server validates a definition against the tools
it really has, so nothing is written behind its back. ``save FILE`` sends a JSON
definition (read as strict JSON); ``restore NAME [--revision N]`` brings an archived or
older revision back. Output is one line per recipe (``--json``: the server's records);
every failure is one line with a code and exit status 1.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from doraforge.cli.context import Context
from doraforge.cli.registry_client import (
    TOKEN_HINT,
    RegistryFailure,
    connection_options,
    registry_url,
    request,
    token,
)
from doraforge.wire import strict_json

#: The largest definition file ``save`` reads (the server's body limit is 1 MiB).
MAX_FILE_BYTES = 1_048_576


class RecipesFailure(Exception):
    """A refusal, an unreadable file or an unreachable registry, as ``CODE: what to do``."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    recipes = commands.add_parser(
        "recipes",
        help="list, show, save, archive or restore saved read recipes (recipe.* tools)",
        description="Author the saved read recipes of a running `doraforge serve`.",
    )
    sub = recipes.add_subparsers(dest="recipes_command", required=True)
    listing = sub.add_parser("list", help="every recipe with its status and revision")
    listing.set_defaults(handler=_list)
    show = sub.add_parser("show", help="a recipe's active definition and its revisions")
    show.add_argument("name", help="recipe.<slug>")
    show.set_defaults(handler=_show)
    save = sub.add_parser("save", help="save a JSON definition as the recipe's new revision")
    save.add_argument("file", type=Path, help="the definition (a JSON file)")
    save.set_defaults(handler=_save)
    archive = sub.add_parser("archive", help="take a recipe out of the catalog (history kept)")
    archive.add_argument("name", help="recipe.<slug>")
    archive.set_defaults(handler=_archive)
    restore = sub.add_parser("restore", help="offer an archived recipe, or an older revision")
    restore.add_argument("name", help="recipe.<slug>")
    restore.add_argument("--revision", type=int, default=None, help="default: the last active")
    restore.set_defaults(handler=_restore)
    for parser in (listing, show, save, archive, restore):
        connection_options(parser)


def send(url: str, method: str, path: str, *, bearer: str | None, body: Any = None) -> Any:
    """One call to the recipe routes: the JSON answer, or :class:`RegistryFailure`
    naming the registry's code (or why nobody answered)."""
    return request(url, method, path, bearer=bearer, body=body, hints={403: TOKEN_HINT})


def read_definition(path: Path) -> Any:
    """The JSON document in ``path``; :class:`RecipesFailure` when unreadable or invalid."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise RecipesFailure(f"RECIPE_FILE_TOO_LARGE: {path} is over {MAX_FILE_BYTES} bytes")
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RecipesFailure(f"RECIPE_FILE_UNREADABLE: cannot read {path} ({reason})") from exc
    try:
        return strict_json.loads(data)
    except strict_json.JSONRefused as exc:
        raise RecipesFailure(f"RECIPE_FILE_INVALID: {path}: {exc.message}") from exc


def line(recipe: dict[str, Any]) -> str:
    """One recipe on one line: name, status, revision, availability and its tools."""
    availability = recipe.get("availability") or {}
    if recipe.get("status") == "archived":
        state = "archived"
    elif availability.get("available"):
        state = "available"
    else:
        state = f"unavailable {availability.get('code')}"
    tools = ",".join(recipe.get("tools") or [])
    revisions = recipe.get("revisions")
    return f"{recipe.get('name')} rev {recipe.get('activeRevision')}/{revisions} {state} {tools}"


def _path(name: str, action: str = "") -> str:
    return f"/api/recipes/{quote(name, safe='')}{action}"


def _run(ctx: Context, args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    bearer = token(ctx.environ, args.token_env, args.token_file)
    return send(registry_url(ctx.home, ctx.environ, args), method, path, bearer=bearer, body=body)


type Handler = Callable[[Context, argparse.Namespace], int]


def _guarded(work: Handler) -> Handler:
    """Run a command body; every failure is the one-line ``CODE: what to do``."""

    def handler(ctx: Context, args: argparse.Namespace) -> int:
        try:
            return work(ctx, args)
        except (RecipesFailure, RegistryFailure) as failure:
            ctx.out.fail(str(failure))
            return 1

    return handler


@_guarded
def _list(ctx: Context, args: argparse.Namespace) -> int:
    body = _run(ctx, args, "GET", "/api/recipes")
    if ctx.out.as_json:
        ctx.out.data(body)
        return 0
    recipes = body.get("recipes") or []
    if not recipes:
        ctx.out.say("no recipes saved")
    for recipe in recipes:
        print(line(recipe))
    for skipped in body.get("skipped") or []:
        print(f"skipped {skipped.get('file')}: {skipped.get('code')}: {skipped.get('message')}")
    return 0


@_guarded
def _show(ctx: Context, args: argparse.Namespace) -> int:
    recipe = _run(ctx, args, "GET", _path(args.name))["recipe"]
    if ctx.out.as_json:
        ctx.out.data(recipe)
        return 0
    print(line(recipe))
    active = next(r for r in recipe["history"] if r["revision"] == recipe["activeRevision"])
    print(json.dumps(active["definition"], indent=2, ensure_ascii=False))
    for revision in recipe["history"]:
        marker = "*" if revision["revision"] == recipe["activeRevision"] else " "
        print(f"{marker} rev {revision['revision']} saved {revision['savedAt']}")
    return 0


@_guarded
def _save(ctx: Context, args: argparse.Namespace) -> int:
    body = _run(ctx, args, "POST", "/api/recipes", read_definition(args.file))
    recipe = body["recipe"]
    if ctx.out.as_json:
        ctx.out.data(body)
    else:
        verb = "saved" if body.get("added") else "unchanged"
        print(f"{verb} {recipe['name']} rev {recipe['activeRevision']}")
    return 0


@_guarded
def _archive(ctx: Context, args: argparse.Namespace) -> int:
    recipe = _run(ctx, args, "POST", _path(args.name, "/archive"))["recipe"]
    if ctx.out.as_json:
        ctx.out.data(recipe)
    else:
        print(f"archived {recipe['name']} (its {recipe['revisions']} revisions are kept)")
    return 0


@_guarded
def _restore(ctx: Context, args: argparse.Namespace) -> int:
    body = None if args.revision is None else {"revision": args.revision}
    recipe = _run(ctx, args, "POST", _path(args.name, "/restore"), body)["recipe"]
    if ctx.out.as_json:
        ctx.out.data(recipe)
    else:
        print(f"restored {recipe['name']} at rev {recipe['activeRevision']}")
    return 0
