"""The ``mcp_servers`` section of the serve config: one strict model per server.

``ServerSettings.mcp_servers`` holds the raw mapping (``{name: {...}}``); this module is
the one place it is validated, so a refusal names the server and the field. Environment
values are either literal non-secret strings or ``{credential: NAME}``: a secret is named,
never written into the config, and resolved from the credential store when the server
starts.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from doraforge.registry.errors import Unprocessable

#: A server name: it becomes the middle of ``mcp__<server>__<tool>``, so no double
#: underscore (the name would be ambiguous) and nothing a grant name cannot hold.
SERVER_NAME = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"
MAX_SERVER_NAME = 32
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_GRANT = r"^[a-z][A-Za-z0-9_.-]{0,63}$"
_HOST = r"^[a-z0-9.:\[\]-]{1,253}$"
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)
EnvName = Annotated[str, Field(pattern=_ENV_NAME)]


class CredentialRef(BaseModel):
    """An environment value taken from the credential store by name, at start."""

    model_config = _STRICT
    credential: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,100}$")]


type EnvValue = Annotated[str, Field(max_length=4096)] | CredentialRef


#: Where the uid and gid a root registry gives a server by default lie: far above any
#: account, one pair for each server name (``1000000000`` up to ``1999999999``).
SERVER_ID_BASE = 1_000_000_000
SERVER_ID_SPAN = 1_000_000_000


def server_run_as(name: str) -> str:
    """The default ``run_as`` of the server ``name``: a ``uid:gid`` of its own, the same on
    every start (its work and scratch directories stay its own)."""
    number = SERVER_ID_BASE + zlib.crc32(name.encode()) % SERVER_ID_SPAN
    return f"{number}:{number}"


class LimitsConfig(BaseModel):
    """Resource limits of the server's process (passed to its execution tier)."""

    model_config = _STRICT
    memory_mb: Annotated[int, Field(ge=16, le=65_536)] = 512
    cpu_s: Annotated[int, Field(ge=1, le=86_400)] = 60
    open_files: Annotated[int, Field(ge=16, le=65_536)] = 256
    processes: Annotated[int, Field(ge=1, le=4096)] = 64
    #: The uid:gid a root registry runs the server as (never 0; a non-root registry keeps
    #: its own); by default one of the server's own (:func:`server_run_as`), so no server
    #: reads another's environment (its credentials), traces or signals it.
    run_as: Annotated[str, Field(pattern=r"^[1-9][0-9]{0,9}:[1-9][0-9]{0,9}$")] | None = None


class McpServerConfig(BaseModel):
    """One third-party MCP server: how to start it and how its tools are governed.

    ``grants``: the capabilities a caller must hold to see and call its tools (default
    ``["mcp.<name>"]``: nobody reaches a third-party server's tools until the operator
    grants that capability). ``risk``: the risk of its tools (default ``high``: approval
    needed); a tool without MCP annotations is always high. ``egressHosts``: hosts it may
    reach (tier 2 opens the network only for them; the egress gate checks them on every
    call). ``timeoutMs``: each call's deadline; past it the server is restarted.
    """

    model_config = _STRICT
    command: Annotated[str, Field(min_length=1, max_length=4096)]
    args: Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=64)] = []
    env: Annotated[dict[EnvName, EnvValue], Field(max_length=64)] = {}
    tier: Literal[1, 2] = 1
    grants: list[Annotated[str, Field(pattern=_GRANT)]] | None = None
    risk: Literal["low", "medium", "high", "critical"] = "high"
    confirmation: Literal["none", "required"] = "none"
    egressHosts: Annotated[list[Annotated[str, Field(pattern=_HOST)]], Field(max_length=32)] = []
    timeoutMs: Annotated[int, Field(ge=100, le=600_000)] = 30_000
    startupTimeoutMs: Annotated[int, Field(ge=500, le=300_000)] = 30_000
    limits: LimitsConfig = LimitsConfig()

    def required_grants(self, name: str) -> list[str]:
        """The grants its tools require: the configured ones, else ``mcp.<name>``."""
        return list(self.grants) if self.grants is not None else [f"mcp.{name}"]

    def credentials(self) -> list[str]:
        """The credential names its environment needs."""
        return sorted({v.credential for v in self.env.values() if isinstance(v, CredentialRef)})


def check_name(name: str) -> None:
    """Refuse a server name that cannot form ``mcp__<name>__<tool>`` unambiguously."""
    import re

    if len(name) > MAX_SERVER_NAME or not re.fullmatch(SERVER_NAME, name):
        raise Unprocessable(
            "MCP_SOURCE_INVALID",
            f"name: {name!r} is not a server name (lower-case letters and digits, single "
            f"underscores between words, at most {MAX_SERVER_NAME} characters); rename it",
            details={"field": "name"},
        )


def parse_server(name: str, raw: Any) -> McpServerConfig:
    """``raw`` as a server config; :class:`Unprocessable` ``MCP_SOURCE_INVALID`` naming the
    server and the first bad field."""
    check_name(name)
    if not isinstance(raw, Mapping):
        raise Unprocessable("MCP_SOURCE_INVALID", f"mcp_servers.{name}: must be a mapping")
    try:
        # Lists arrive as lists from JSON/YAML; strict mode would refuse a tuple, never a list.
        return McpServerConfig.model_validate(dict(raw))
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"]) or "(root)"
        raise Unprocessable(
            "MCP_SOURCE_INVALID",
            f"mcp_servers.{name}.{field}: {error['msg']}",
            details={"server": name, "field": field},
        ) from exc


def parse_servers(raw: Mapping[str, Any]) -> dict[str, McpServerConfig]:
    """Every configured server, validated (the first bad one refuses them all)."""
    return {name: parse_server(name, value) for name, value in raw.items()}
