"""A real third-party MCP server from the package index, for the MCP-source tests.

``mcp-server-time`` (the MCP project's reference time server: ``get_current_time`` and
``convert_time``, no network) pins dependencies of its own, so it gets its own virtual
environment under ``.peers/``, built once from the package index by this module and reused
while its stamp names the same version (as :mod:`tests.peers.phyagentos` does).
"""

from __future__ import annotations

from pathlib import Path

from tests.peers.venvs import peer_venv

VERSION = "2026.10.19"
REQUIREMENT = f"mcp-server-time=={VERSION}"
INSTALL_TIMEOUT_S = 600.0


def venv() -> Path:
    """The peer's virtual environment, built on first use (bounded)."""
    return peer_venv(f"mcp-server-time-{VERSION}", REQUIREMENT, timeout_s=INSTALL_TIMEOUT_S)


def command() -> tuple[str, list[str]]:
    """How to start the server over stdio: its interpreter and arguments (UTC as the
    local zone, so its answers do not depend on the machine's)."""
    return str(venv() / "bin" / "python"), ["-m", "mcp_server_time", "--local-timezone", "UTC"]
