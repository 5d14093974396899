"""Tool sources beyond doraforge's own tools: third-party MCP servers behind execution tiers,
registered into the same catalog and gates.

``attach(app, service, settings, sources_dir)`` validates ``settings.mcp_servers``, makes
one :class:`McpSources` (``app.state.mcp_sources``), serves its operator routes
(``registry.sources.routes``) and adds its start and stop coroutines to
``app.state.on_start`` / ``app.state.on_stop``. ``<sources_dir>/<server>/`` holds each
server's working directory, scratch directory and bounded stderr log;
``<sources_dir>/servers.json`` the operator's added, replaced and removed servers
(``registry.sources.saved``), laid over the config's at start, so they survive a restart.
Each server's row says its ``origin``: ``config`` (the serve config) or ``operator``.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import mcp.types as types

from doraforge.registry.egress import egress_host
from doraforge.registry.errors import NotFound, RegistryError, Unprocessable
from doraforge.registry.sources.config import McpServerConfig, parse_servers
from doraforge.registry.sources.mcp_servers import (
    Credentials,
    McpSource,
    Runtime,
    names,
    tool_entry,
)
from doraforge.registry.sources.saved import FILE_NAME, SavedServers, file_invalid

if TYPE_CHECKING:
    from fastapi import FastAPI

    from doraforge.registry.service import RegistryService
    from doraforge.registry.settings import ServerSettings

logger = logging.getLogger(__name__)
#: How long the app's start waits for each configured server's first tools/list.
START_WAIT_S = 30.0

type Origin = Literal["config", "operator"]


def source_id(name: str) -> str:
    """The id a server's egress hosts are declared (and retracted) under."""
    return f"mcp:{name}"


class McpSources:
    """Every MCP server of one registry: started, listed, registered, replaced, removed.

    A server's tools are registered when it is first listed and stay registered while it
    restarts (they answer ``MCP_SOURCE_UNAVAILABLE`` meanwhile); a re-list replaces the
    set only when it changed, so the catalog ETag moves exactly when the tools did.

    With ``saved`` the operator's changes (:meth:`put`, :meth:`delete`) are kept in its file
    before they are made live; ``configured`` names the servers the serve config declares
    (deleting one of them leaves a tombstone there)."""

    def __init__(
        self,
        service: RegistryService,
        home: Path,
        *,
        runtime: Runtime,
        credentials: Credentials,
        saved: SavedServers | None = None,
        configured: frozenset[str] = frozenset(),
    ) -> None:
        self.service, self.home = service, home
        self._runtime, self._credentials = runtime, credentials
        self.saved, self.configured = saved, configured
        self.sources: dict[str, McpSource] = {}
        self.origins: dict[str, Origin] = {}
        self._listed: dict[str, list[dict[str, Any]]] = {}
        # One operator change at a time: a PUT waits for its server's first list.
        self._writes = asyncio.Lock()
        self.running = False

    def rows(self) -> list[dict[str, Any]]:
        """Each server's state, for ``GET /api/sources/mcp``."""
        return [self.row(self.sources[name]) for name in sorted(self.sources)]

    def row(self, source: McpSource) -> dict[str, Any]:
        """``source``'s state and where it came from (``config`` or ``operator``)."""
        return {**source.status(), "origin": self.origins.get(source.name, "config")}

    def removed(self) -> list[str]:
        """The config-declared servers the operator removed (tombstones in the file)."""
        return sorted(self.saved.removed) if self.saved is not None else []

    def missing_credentials(self, config: McpServerConfig) -> list[str]:
        """The credential names ``config`` needs that the store does not hold."""
        return [name for name in config.credentials() if self._credentials.get(name) is None]

    def add(self, name: str, config: McpServerConfig, origin: Origin = "config") -> McpSource:
        """Add ``name`` (not yet running: :meth:`start_all` or :meth:`put` starts it)."""
        check_hosts(name, config)
        source = McpSource(
            name,
            config,
            runtime=self._runtime,
            credentials=self._credentials,
            home=self.home / name,
            on_tools=self._install,
        )
        # Declared while the server is configured: removing it retracts them.
        self.service.egress.declare(source_id(name), config.egressHosts)
        self.sources[name] = source
        self.origins[name] = origin
        return source

    async def put(self, name: str, config: McpServerConfig) -> tuple[McpSource, bool]:
        """Add or replace ``name`` live as the operator's (kept in the file first) and wait
        (bounded) for its first tool list; whether it is new."""
        async with self._writes:
            check_hosts(name, config)
            if self.saved is not None:
                self.saved.put(name, config)
            created = name not in self.sources
            if not created:
                await self.remove(name)
            source = self.add(name, config, "operator")
            if self.running:
                source.start()
                await source.wait_ready(config.startupTimeoutMs / 1000 + 1)
            return source, created

    async def delete(self, name: str) -> dict[str, Any]:
        """The operator's removal of ``name``: forgotten in the file (a config-declared one
        tombstoned there), then :meth:`remove`; its last row with the tools it took."""
        async with self._writes:
            if name not in self.sources:
                raise NotFound(
                    "MCP_SOURCE_NOT_FOUND",
                    f"no MCP server {name!r}; GET /api/sources/mcp lists them",
                    details={"server": name},
                )
            if self.saved is not None:
                self.saved.delete(name, configured=name in self.configured)
            row = self.row(self.sources[name])
            removed = sorted(self.sources[name].tools)
            source = await self.remove(name)
            return {**row, **source.status(), "removedTools": removed}

    async def remove(self, name: str) -> McpSource:
        """Stop ``name``, unregister its tools and retract its egress hosts."""
        source = self.sources.pop(name)
        self.origins.pop(name, None)
        await source.stop()
        for canonical in list(source.tools):
            self._unregister(canonical)
        source.tools.clear()
        self._listed.pop(name, None)
        self.service.egress.retract(source_id(name))
        return source

    async def start_all(self) -> None:
        """The app's start: every server in the background, then a bounded wait for each
        first list (a server that is slow or down never holds the registry up longer)."""
        self.running = True
        for source in self.sources.values():
            source.start()
        await asyncio.gather(*(s.wait_ready(START_WAIT_S) for s in self.sources.values()))

    async def stop_all(self) -> None:
        """The app's stop: every session closed and every process group killed."""
        self.running = False
        for name in list(self.sources):
            await self.sources[name].stop()

    def _install(self, source: McpSource, tools: list[types.Tool]) -> None:
        """(Re)register ``source``'s listed tools; unchanged lists change nothing."""
        entries: dict[str, tuple[dict[str, Any], str]] = {}
        for tool in tools:
            try:
                entry = tool_entry(source.name, source.config, tool)
            except ValueError as exc:
                logger.warning("MCP server %s: tool %r skipped: %s", source.name, tool.name, exc)
                continue
            if entry["name"] in entries:
                logger.warning("MCP server %s: duplicate tool name %r", source.name, tool.name)
                continue
            entries[entry["name"]] = (entry, tool.name)
        listed = [entries[name][0] for name in sorted(entries)]
        if self._listed.get(source.name) == listed and source.tools.keys() == entries.keys():
            return
        for canonical in list(source.tools):
            self._unregister(canonical)
        source.tools.clear()
        for canonical, (entry, remote) in sorted(entries.items()):
            if self._register(source, entry, remote):
                source.tools[canonical] = remote
        self._listed[source.name] = listed

    def _register(self, source: McpSource, entry: dict[str, Any], remote: str) -> bool:
        write = entry["policy"]["sideEffect"] == "write"

        async def adapter(arguments: dict[str, Any]) -> Any:
            return await source.call(remote, arguments, write=write)

        try:
            self.service.register(entry, adapter, admit=source.admit, source=source_id(source.name))
        except RegistryError as exc:
            logger.warning("MCP server %s: tool %r not registered: %s", source.name, remote, exc)
            return False
        return True

    def _unregister(self, canonical: str) -> None:
        if self.service.resolve(canonical) is not None:
            self.service.unregister(canonical)


def check_hosts(name: str, config: McpServerConfig) -> None:
    """:class:`Unprocessable` ``MCP_SOURCE_INVALID`` unless every egress host of ``config``
    is one the egress policy can declare (checked before anything is saved or changed)."""
    for host in config.egressHosts:
        try:
            egress_host(host)
        except ValueError as exc:
            raise Unprocessable(
                "MCP_SOURCE_INVALID",
                f"mcp_servers.{name}.egressHosts: {exc}; give bare host names",
                details={"server": name, "field": "egressHosts"},
            ) from exc


def default_runtime() -> Runtime:
    """The installed tiers and the bounded stderr log (``registry.sources.logs``)."""
    from doraforge.registry.sources.logs import open_errlog
    from doraforge.registry.sources.tiers import TIERS

    return Runtime(tiers=TIERS, open_errlog=open_errlog)


def _credentials(app: FastAPI, settings: ServerSettings) -> Credentials:
    """Credential values by name: the home's credential store (``app.state.credentials``,
    read live, so a credential set later is seen by the next start) first, then the
    config's ``secret_env`` values."""
    from doraforge.registry.credentials import SecretView

    return SecretView(getattr(app.state, "credentials", None), settings.secrets)


def attach(
    app: FastAPI,
    service: RegistryService,
    settings: ServerSettings,
    sources_dir: Path,
    *,
    runtime: Runtime | None = None,
) -> McpSources:
    """Validate the configured servers (``MCP_SOURCE_INVALID`` naming the field), lay the
    operator's saved ones over them (``MCP_SOURCES_FILE_INVALID`` for a file that cannot be
    read), serve the operator routes and start and stop the servers with the app."""
    from doraforge.registry.sources.routes import ROUTES

    configs = parse_servers(settings.mcp_servers)
    saved = SavedServers.open(sources_dir / FILE_NAME)
    sources = McpSources(
        service,
        sources_dir,
        runtime=runtime or default_runtime(),
        credentials=_credentials(app, settings),
        saved=saved,
        configured=frozenset(configs),
    )
    for name, config in saved.overlay(configs).items():
        _add_at_start(sources, name, config)
    app.state.mcp_sources = sources
    app.router.routes.extend(ROUTES)
    app.state.on_start.append(sources.start_all)
    app.state.on_stop.append(sources.stop_all)
    return sources


def _add_at_start(sources: McpSources, name: str, config: McpServerConfig) -> None:
    """Add one server at start; a saved one that cannot be added is the file's fault."""
    saved = sources.saved
    if saved is None or name not in saved.servers:
        sources.add(name, config)
        return
    try:
        sources.add(name, config, "operator")
    except RegistryError as exc:
        raise file_invalid(saved.path, exc.message) from exc


__all__ = ["McpSources", "attach", "names", "source_id"]
