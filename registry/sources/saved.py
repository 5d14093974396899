"""The operator's MCP servers, kept across restarts in ``<sources_dir>/servers.json``.

``PUT /api/sources/mcp/{name}`` and ``DELETE`` change the live registry; this file makes the
change outlive ``serve``. It holds the servers the operator added or replaced (their
validated configs) and the *tombstones* of config-declared servers the operator removed:
a tombstoned name stays removed at the next start, although the serve config still
declares it, until the operator PUTs it again. At start the file overlays the config: a
tombstone drops the config's entry, an operator entry replaces a config entry of the same
name.

The file is written atomically (``doraforge.wire.files``) with mode 0600: an environment
names credentials (``{"credential": NAME}``), never their values, but which credential a
server gets is still the operator's business. It is read with the strict JSON reader and
every entry validated as a PUT body is; a file that fails is refused at start with one line
naming it (``MCP_SOURCES_FILE_INVALID``), nothing loaded.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doraforge.registry.errors import RegistryError, Unprocessable
from doraforge.registry.sources.config import McpServerConfig, parse_server
from doraforge.wire.errors import StructuredError
from doraforge.wire.files import atomic_write_text
from doraforge.wire.strict_json import JSONRefused, loads

FILE_NAME = "servers.json"
SCHEMA_VERSION = 1
_KEYS = frozenset({"schemaVersion", "servers", "removed"})


class SourcesFileError(StructuredError, OSError):
    """``MCP_SOURCES_FILE_INVALID``: the operator's servers file cannot be read; nothing was
    loaded. An ``OSError`` too, as any failure to open a state file."""


def file_invalid(path: Path, why: str) -> SourcesFileError:
    """The one-line refusal of the file at ``path``, saying ``why`` and what to do."""
    return SourcesFileError(
        "MCP_SOURCES_FILE_INVALID",
        f"{path} is not a doraforge MCP servers file ({why[:200]}); fix it or move it aside "
        "and PUT the servers again",
        details={"path": str(path)},
    )


@dataclass
class SavedServers:
    """The operator's servers (``servers``) and tombstones (``removed``) in ``path``."""

    path: Path
    servers: dict[str, McpServerConfig] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)

    @classmethod
    def open(cls, path: Path) -> SavedServers:
        """The file at ``path`` (empty when absent); :class:`SourcesFileError` if malformed."""
        if not path.exists():
            return cls(path)
        try:
            servers, removed = _parse(path.read_bytes())
        except (ValueError, RegistryError) as exc:
            why = exc.message if isinstance(exc, StructuredError) else str(exc)
            raise file_invalid(path, why) from exc
        return cls(path, servers, removed)

    def overlay(self, configured: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        """The servers to start: the config's without the tombstoned ones, then the
        operator's (replacing a config entry of the same name)."""
        kept = {name: c for name, c in configured.items() if name not in self.removed}
        return {**kept, **self.servers}

    def put(self, name: str, config: McpServerConfig) -> None:
        """Keep ``name`` as the operator's (lifting a tombstone of it)."""
        self._write({**self.servers, name: config}, self.removed - {name})

    def delete(self, name: str, *, configured: bool) -> None:
        """Forget ``name``; a ``configured`` one (the serve config declares it) is tombstoned
        so it stays removed after a restart."""
        removed = self.removed | {name} if configured else self.removed - {name}
        self._write({k: v for k, v in self.servers.items() if k != name}, removed)

    def _write(self, servers: dict[str, McpServerConfig], removed: set[str]) -> None:
        document = {
            "schemaVersion": SCHEMA_VERSION,
            "servers": {
                name: c.model_dump(mode="json", exclude_unset=True)
                for name, c in sorted(servers.items())
            },
            "removed": sorted(removed),
        }
        try:
            # The temporary file is created 0600 (mkstemp) and renamed into place.
            atomic_write_text(self.path, json.dumps(document, indent=2))
            os.chmod(self.path, 0o600)
        except OSError as exc:
            raise Unprocessable(
                "MCP_SOURCES_FILE_UNWRITABLE",
                f"could not save {self.path} ({exc.strerror or type(exc).__name__}); nothing "
                "changed; check the home's permissions and free space, then retry",
                details={"path": str(self.path)},
            ) from exc
        self.servers, self.removed = servers, removed


def _parse(data: bytes) -> tuple[dict[str, McpServerConfig], set[str]]:
    try:
        document: Any = loads(data)
    except JSONRefused as exc:
        raise ValueError(f"{exc.code}: {exc.message}") from exc
    if not isinstance(document, dict) or set(document) != _KEYS:
        raise ValueError(f"the top level must be an object with {', '.join(sorted(_KEYS))}")
    if document["schemaVersion"] != SCHEMA_VERSION:
        raise ValueError(f"schemaVersion is not {SCHEMA_VERSION}")
    servers, removed = document["servers"], document["removed"]
    if not isinstance(servers, dict):
        raise ValueError("servers must be an object of server configs")
    if not isinstance(removed, list) or not all(isinstance(name, str) for name in removed):
        raise ValueError("removed must be a list of server names")
    configs = {name: parse_server(name, raw) for name, raw in servers.items()}
    overlap = sorted(set(configs) & set(removed))
    if overlap:
        raise ValueError(f"{overlap[0]!r} is both a server and removed")
    return configs, set(removed)
