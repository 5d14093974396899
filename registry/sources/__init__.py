"""Tool sources beyond doraforge's own tools (skeleton: implemented by the issue-14 work):
third-party MCP servers behind execution tiers, registered into the same catalog and gates.

``attach(app, service, settings, sources_dir)`` reads ``settings.mcp_servers``, registers
their tools and adds its start and stop coroutines to ``app.state.on_start`` /
``app.state.on_stop``; ``sources_dir`` (``<home>/sources``) holds each server's working
directory and bounded stderr log.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from doraforge.registry.service import RegistryService
    from doraforge.registry.settings import ServerSettings


def attach(
    app: FastAPI, service: RegistryService, settings: ServerSettings, sources_dir: Path
) -> None:
    """Register the configured MCP servers' tools (none yet in this skeleton)."""
