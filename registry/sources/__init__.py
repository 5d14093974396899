"""Tool sources beyond doraforge's own tools: third-party MCP servers behind execution tiers,
registered into the same catalog and gates.

``attach(app, service, settings, sources_dir)`` validates ``settings.mcp_servers``, makes
one :class:`McpSources` (``app.state.mcp_sources``), serves its operator routes
(``registry.sources.routes``) and adds its start and stop coroutines to
``app.state.on_start`` / ``app.state.on_stop``. ``<sources_dir>/<server>/`` holds each
server's working directory, scratch directory and bounded stderr log.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp.types as types

from doraforge.registry.errors import RegistryError, Unprocessable
from doraforge.registry.sources.config import McpServerConfig, parse_servers
from doraforge.registry.sources.mcp_servers import (
    Credentials,
    McpSource,
    Runtime,
    names,
    tool_entry,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from doraforge.registry.service import RegistryService
    from doraforge.registry.settings import ServerSettings

logger = logging.getLogger(__name__)
#: How long the app's start waits for each configured server's first tools/list.
START_WAIT_S = 30.0


def source_id(name: str) -> str:
    """The id a server's egress hosts are declared (and retracted) under."""
    return f"mcp:{name}"


class McpSources:
    """Every MCP server of one registry: started, listed, registered, replaced, removed.

    A server's tools are registered when it is first listed and stay registered while it
    restarts (they answer ``MCP_SOURCE_UNAVAILABLE`` meanwhile); a re-list replaces the
    set only when it changed, so the catalog ETag moves exactly when the tools did."""

    def __init__(
        self,
        service: RegistryService,
        home: Path,
        *,
        runtime: Runtime,
        credentials: Credentials,
    ) -> None:
        self.service, self.home = service, home
        self._runtime, self._credentials = runtime, credentials
        self.sources: dict[str, McpSource] = {}
        self._listed: dict[str, list[dict[str, Any]]] = {}
        self.running = False

    def rows(self) -> list[dict[str, Any]]:
        """Each server's state, for ``GET /api/sources/mcp``."""
        return [self.sources[name].status() for name in sorted(self.sources)]

    def missing_credentials(self, config: McpServerConfig) -> list[str]:
        """The credential names ``config`` needs that the store does not hold."""
        return [name for name in config.credentials() if self._credentials.get(name) is None]

    def add(self, name: str, config: McpServerConfig) -> McpSource:
        """Add ``name`` (not yet running: :meth:`start_all` or :meth:`put` starts it)."""
        source = McpSource(
            name,
            config,
            runtime=self._runtime,
            credentials=self._credentials,
            home=self.home / name,
            on_tools=self._install,
        )
        try:
            # Declared while the server is configured: removing it retracts them.
            self.service.egress.declare(source_id(name), config.egressHosts)
        except ValueError as exc:
            raise Unprocessable(
                "MCP_SOURCE_INVALID",
                f"mcp_servers.{name}.egressHosts: {exc}; give bare host names",
                details={"server": name, "field": "egressHosts"},
            ) from exc
        self.sources[name] = source
        return source

    async def put(self, name: str, config: McpServerConfig) -> tuple[McpSource, bool]:
        """Add or replace ``name`` live and wait (bounded) for its first tool list;
        whether it is new."""
        created = name not in self.sources
        if not created:
            await self.remove(name)
        source = self.add(name, config)
        if self.running:
            source.start()
            await source.wait_ready(config.startupTimeoutMs / 1000 + 1)
        return source, created

    async def remove(self, name: str) -> McpSource:
        """Stop ``name``, unregister its tools and retract its egress hosts."""
        source = self.sources.pop(name)
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
            self.service.register(entry, adapter, admit=source.admit)
        except RegistryError as exc:
            logger.warning("MCP server %s: tool %r not registered: %s", source.name, remote, exc)
            return False
        return True

    def _unregister(self, canonical: str) -> None:
        if self.service.resolve(canonical) is not None:
            self.service.unregister(canonical)


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
    """Validate the configured servers (``MCP_SOURCE_INVALID`` naming the field), serve the
    operator routes and start and stop the servers with the app."""
    from doraforge.registry.sources.routes import ROUTES

    configs = parse_servers(settings.mcp_servers)
    sources = McpSources(
        service,
        sources_dir,
        runtime=runtime or default_runtime(),
        credentials=_credentials(app, settings),
    )
    for name, config in configs.items():
        sources.add(name, config)
    app.state.mcp_sources = sources
    app.router.routes.extend(ROUTES)
    app.state.on_start.append(sources.start_all)
    app.state.on_stop.append(sources.stop_all)
    return sources


__all__ = ["McpSources", "attach", "names", "source_id"]
