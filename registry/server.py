"""The registry server behind ``doraforge serve``: one app, one service, one uvicorn.

:func:`build_app` assembles one route table: the HTTP catalog and call routes, the MCP
endpoint, the agent manifest, and (given a bundle directory) the declarative API-tools
routes, over a single :class:`RegistryService`. :func:`serve` runs it on the configured
loopback address.
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from doraforge.registry.builtins import register_builtins
from doraforge.registry.builtins.routes import ROUTES as BUILTIN_ROUTES
from doraforge.registry.egress_routes import ROUTES as EGRESS_ROUTES
from doraforge.registry.http import OPERATOR_ONLY, create_app, settle_in_flight
from doraforge.registry.http import ROUTES as CALL_ROUTES
from doraforge.registry.inventory import ROUTES as INVENTORY_ROUTES
from doraforge.registry.mcp import ROUTES as MCP_ROUTES
from doraforge.registry.mcp import McpEndpoint
from doraforge.registry.robot_tools import RobotTools, register_robot_tools
from doraforge.registry.settings import ServerSettings
from doraforge.wire.errors import StructuredError

if TYPE_CHECKING:
    from doraforge.registry.api_tools.routes import ApiTools
    from doraforge.registry.context.source import ContextSource, Scope
    from doraforge.registry.credentials import CredentialStore
    from doraforge.registry.service import RegistryService

type Say = Callable[[str], None]

log = logging.getLogger("doraforge.registry.server")
#: How long a stop waits for open requests before cancelling them: a call waiting for an
#: operator would otherwise hold the process until its approval expires.
GRACEFUL_SHUTDOWN_S = 2
#: How long the app's shutdown then waits for those cancelled calls to send their answer.
SETTLE_S = 0.5


def new_service(settings: ServerSettings) -> RegistryService:
    """A service whose writes need authentication exactly when a token is configured."""
    from doraforge.registry.service import RegistryService

    return RegistryService(require_auth_for_writes=settings.token is not None)


def _api_tools(
    service: RegistryService, settings: ServerSettings, store_dir: Path, credentials: Path
) -> tuple[ApiTools, CredentialStore]:
    """The API tools over ``store_dir`` with their management tools registered, and the
    credential store in ``credentials`` their secrets resolve from first (then the config's
    ``secret_env`` values)."""
    from doraforge.registry.api_tools.manage import register_management_tools
    from doraforge.registry.api_tools.outbound import OutboundPolicy
    from doraforge.registry.api_tools.routes import ApiTools
    from doraforge.registry.credentials import CredentialStore, SecretView

    policy = OutboundPolicy.model_validate(settings.outbound)
    store = CredentialStore(credentials)
    api_tools = ApiTools(store_dir, service, policy, SecretView(store, settings.secrets))
    register_management_tools(service, api_tools)
    return api_tools, store


def build_app(
    service: RegistryService,
    settings: ServerSettings,
    *,
    robot: RobotTools | None = None,
    api_tools_dir: Path | None = None,
    recipes_dir: Path | None = None,
    context_sources: Mapping[Scope, ContextSource] | None = None,
    sources_dir: Path | None = None,
    credentials_path: Path | None = None,
    egress_file: Path | None = None,
) -> FastAPI:
    """The whole server app; ``robot`` tools (when given) are registered and closed with it;
    API-tool bundles persisted in ``api_tools_dir`` (when given) are registered and their
    routes served under ``/api/api-tools``, with the operator's credential routes under
    ``/api/credentials`` over ``credentials_path`` (default: ``credentials.json`` beside
    ``api_tools_dir``, i.e. in the home).

    One route table: the catalog and calls, MCP and the agent manifest, the API tools.
    Saving or probing a bundle opens outbound reach; with a token configured the transport
    guard requires it on those routes as on every other."""
    if robot is not None:
        register_robot_tools(service, robot)
    # The egress and built-in switches are the operator's.
    routes = [*CALL_ROUTES, *MCP_ROUTES, *INVENTORY_ROUTES, *EGRESS_ROUTES, *BUILTIN_ROUTES]
    if api_tools_dir is not None:
        from doraforge.registry.api_tools.routes import ROUTES as API_TOOLS_ROUTES
        from doraforge.registry.credentials_routes import ROUTES as CREDENTIAL_ROUTES

        routes += [_operator_writes(route) for route in API_TOOLS_ROUTES]
        routes += CREDENTIAL_ROUTES  # every one the operator's, reads included
    if recipes_dir is not None:
        from doraforge.registry.recipes.routes import ROUTES as RECIPE_ROUTES

        routes += [_operator_writes(route) for route in RECIPE_ROUTES]
    app = create_app(service, settings, routes=routes)
    # The egress policy starts from the config (or the operator's saved changes beside it).
    saved = egress_file or (api_tools_dir.parent / "egress.json" if api_tools_dir else None)
    service.egress.configure(settings.egress, path=saved)
    app.state.mcp = McpEndpoint(service, settings, context_sources=context_sources or {})
    if api_tools_dir is not None:
        credentials = credentials_path or api_tools_dir.parent / "credentials.json"
        app.state.api_tools, app.state.credentials = _api_tools(
            service, settings, api_tools_dir, credentials
        )
    # calculator, http_fetch, web_search per the ``builtins`` section (all by default); a
    # search provider's API key resolves from the home's credential store when there is one.
    app.state.builtins = register_builtins(
        service, settings, getattr(app.state, "credentials", None)
    )
    if recipes_dir is not None:
        from doraforge.registry.recipes.routes import attach

        attach(app, service, recipes_dir)
    # Started with the app and stopped with it (MCP servers as tool sources, say): each
    # adds its coroutine functions here while the app is built.
    app.state.on_start = []
    app.state.on_stop = []
    if sources_dir is not None:
        from doraforge.registry.sources import attach as attach_sources

        attach_sources(app, service, settings, sources_dir)
    app.router.lifespan_context = _closing(robot)
    return app


def _operator_writes(route: BaseRoute) -> BaseRoute:
    """An API-tools route, made the operator's when it writes (saving a bundle, probing an
    upstream open outbound reach): the same endpoint, with :data:`OPERATOR_ONLY`."""
    methods = set(route.methods or ()) if isinstance(route, APIRoute) else set()
    if not isinstance(route, APIRoute) or methods <= {"GET", "HEAD"}:
        return route
    if all(dependency in route.dependencies for dependency in OPERATOR_ONLY):
        return route  # already the operator's
    # Rebuilt with everything its OpenAPI operation says (summary, responses, extras).
    return APIRoute(
        route.path,
        route.endpoint,
        methods=sorted(methods),
        dependencies=[*route.dependencies, *OPERATOR_ONLY],
        summary=route.summary,
        description=route.description,
        response_description=route.response_description,
        responses=route.responses,
        status_code=route.status_code,
        tags=route.tags,
        name=route.name,
        operation_id=route.operation_id,
        include_in_schema=route.include_in_schema,
        openapi_extra=route.openapi_extra,
    )


def _closing(robot: RobotTools | None) -> Callable[[FastAPI], Any]:
    """The app's lifespan: the robot tools (when given) start first (ending stale agent
    tasks); on shutdown the cancelled waiting calls answer first, then the robot tools
    close (ending the tasks this registry owns)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if robot is not None:
            await robot.start()
        for start in app.state.on_start:
            await start()
        try:
            yield
        finally:
            await settle_in_flight(app, SETTLE_S)
            for stop in reversed(app.state.on_stop):
                await stop()
            if robot is not None:
                await robot.aclose()

    return lifespan


def uvicorn_config(app: FastAPI, host: str, port: int) -> uvicorn.Config:
    """The uvicorn config; forwarding headers are never trusted, since the MCP loopback
    check must judge the socket peer (uvicorn would otherwise rewrite the client address
    from ``X-Forwarded-For`` sent by a local proxy). A stop cancels requests still open
    after :data:`GRACEFUL_SHUTDOWN_S` (a call waiting for an approval withdraws it)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        ws="none",
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )


class PortBusy(StructuredError, OSError):
    """``REGISTRY_PORT_BUSY``: something already listens on the address; nothing started.
    An ``OSError`` too, so a caller catching the bind failure still does."""


def serve(
    app: FastAPI,
    settings: ServerSettings,
    *,
    say: Say = print,
    listening: Callable[[str, int], None] | None = None,
) -> None:
    """Run ``app`` under uvicorn until interrupted; says the address it really listens on
    (port 0 picks a free port) and hands it to ``listening`` (host, port) before serving.
    Raises :class:`PortBusy` naming the port and the option when the address is taken."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        if exc.errno != errno.EADDRINUSE:
            raise
        raise PortBusy(
            "REGISTRY_PORT_BUSY",
            f"port {settings.port} on {settings.host} is in use; pass --port N "
            "(0 picks a free one) or stop what holds it",
            details={"host": settings.host, "port": settings.port},
        ) from exc
    # Listen before saying so: a client that dials the printed address at once is queued
    # until uvicorn accepts, never refused.
    sock.listen(uvicorn_config(app, settings.host, settings.port).backlog)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    grants = ", ".join(sorted(settings.grants)) or "none"
    mcp = "on" if settings.mcp_enabled else "off"
    # The console (mounted by the CLI) is named by its path, so the operator finds it.
    console = " · console /console/" if getattr(app.state, "console", None) else ""
    if settings.token is not None and settings.operator_token is None:
        log.warning(
            "WARNING: no operator token: any agent holding the registry token can approve its own "
            "high-risk calls and drive the console; give the operator another token with "
            "--operator-token-env VAR or --operator-token-file PATH"
        )
    if listening is not None:
        listening(host, port)
    say(f"registry listening on http://{shown}:{port} · MCP /mcp {mcp} · grants: {grants}{console}")
    uvicorn.Server(uvicorn_config(app, host, port)).run(sockets=[sock])
