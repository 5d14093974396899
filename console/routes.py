"""The console's JSON route table under ``/console/api`` and how it joins a registry app.

Every route here sits behind the registry app's transport guard, so with a token
configured each one needs it (reads included); with an operator token configured each one
is the operator's (``registry.http.require_operator``): the agent token gets 403
``OPERATOR_REQUIRED``, since the console starts skills, runs tools and decides approvals.
:func:`mount` adds the table, the console state and the static shell to an app built by
``registry.server.build_app``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.routing import BaseRoute

from doraforge.console import cell, skills, tasks
from doraforge.console.params import only_params, query_int
from doraforge.console.shell import ShellMiddleware
from doraforge.registry.http import OPERATOR_ONLY, registry_policy, service_of, settings_of

if TYPE_CHECKING:
    from doraforge.console.state import Console
    from doraforge.registry.service import RegistryService
    from doraforge.registry.settings import ServerSettings

API = "/console/api"
MAX_AUDIT = 1000


async def session(request: Request) -> JSONResponse:
    """What the login form checks: the token (if any) was accepted, and what is on."""
    settings = settings_of(request)
    return JSONResponse(
        {
            "ok": True,
            "token_required": settings.token is not None,
            "operator_token_required": settings.operator_token is not None,
            "mcp": settings.mcp_enabled,
            "grants": sorted(settings.grants),
            "standing_approvals": sorted(settings.approvals),
        }
    )


async def audit(request: Request) -> JSONResponse:
    """The newest registry call records first; already redacted by ``registry.audit``."""
    only_params(request, ("limit",))
    limit = query_int(request, "limit", 200, 1, MAX_AUDIT)
    service = service_of(request)
    records = [dict(r) for r in service.audit.records()[-limit:]]
    listed = _listed_names(service, {r["name"] for r in records if isinstance(r.get("name"), str)})
    for record in records:
        record["listedName"] = listed.get(record.get("name"), record.get("name"))
    return JSONResponse({"ok": True, "records": records[::-1]})


def _listed_names(service: RegistryService, names: set[str]) -> dict[str | None, str]:
    """Each catalog id's listed name (the one ``tools/list`` shows and people read), each
    looked up once however many records carry it."""
    tools = {name: service.resolve(name) for name in names}
    return {name: tool.listed_name for name, tool in tools.items() if tool is not None}


def _get(path: str, endpoint: Any) -> APIRoute:
    return APIRoute(f"{API}{path}", endpoint, methods=["GET"], dependencies=OPERATOR_ONLY)


def _post(path: str, endpoint: Any) -> APIRoute:
    return APIRoute(f"{API}{path}", endpoint, methods=["POST"], dependencies=OPERATOR_ONLY)


#: The console's JSON routes; their handlers read ``app.state.console``.
ROUTES: list[BaseRoute] = [
    _get("/session", session),
    _get("/audit", audit),
    _get("/skills", skills.skills),
    _post("/skills/{name}/start", skills.start),
    _post("/skills/{name}/stop", skills.stop),
    _get("/skills/{name}/logs", skills.logs),
    _get("/cell/{skill}/sources", cell.sources),
    _get("/cell/{skill}/frame/{source}", cell.frame),
    _get("/cell/{skill}/state", cell.state),
    _get("/cell/{skill}/tools", cell.tools),
    _post("/cell/{skill}/tools/{tool_id}/run", cell.run),
    _get("/cell/{skill}/invocations", cell.invocations),
    _get("/cell/{skill}/invocations/{invocation_id}", cell.invocation),
    _post("/cell/{skill}/invocations/{invocation_id}/cancel", cell.cancel),
    _get("/tasks", tasks.tasks),
    _get("/tasks/{task_id}", tasks.task),
    _get("/tasks/{task_id}/evidence/{artifact_id}", tasks.evidence),
    _get("/tasks/{task_id}/bundle", tasks.bundle),
]


def mount(app: FastAPI, console: Console) -> FastAPI:
    """Serve the console on ``app`` (a registry app): its routes behind the app's guard,
    the static shell in front of it, and its Gateway clients closed with the app."""
    app.router.routes.extend(ROUTES)
    app.state.console = console
    settings: ServerSettings = app.state.settings
    app.add_middleware(ShellMiddleware, policy=registry_policy(settings))
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(served: FastAPI) -> AsyncIterator[None]:
        async with inner(served):
            try:
                yield
            finally:
                await console.aclose()

    app.router.lifespan_context = lifespan
    return app
