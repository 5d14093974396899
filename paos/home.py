"""Where PAOS keeps its state: the task store, evidence bytes and (later) installed skills.

The home is ``$DORAFORGE_PAOS_HOME`` when set (read by entry points only), else
``$XDG_DATA_HOME/doraforge/paos`` (``~/.local/share/doraforge/paos``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from paos.tasks import TaskService


@dataclass(frozen=True)
class PaosHome:
    """The directory layout of one PAOS home."""

    root: Path

    @property
    def store_path(self) -> Path:
        """The SQLite AgentTask store."""
        return self.root / "paos.db"

    @property
    def workspace(self) -> Path:
        """The root that evidence paths are relative to."""
        return self.root / "workspace"

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> PaosHome:
        """The configured home, or the per-user default."""
        env = os.environ if environ is None else environ
        explicit = env.get("DORAFORGE_PAOS_HOME")
        if explicit:
            return cls(Path(explicit).expanduser())
        data = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
        return cls(data / "doraforge" / "paos")


def open_service(home: PaosHome, *, timeout_s: float = 10.0) -> TaskService:
    """A :class:`~paos.tasks.TaskService` on ``home`` talking to Gateways over HTTP."""
    from paos.client import ForgeToolClient
    from paos.store import AgentTaskStore
    from paos.tasks import TaskService

    home.workspace.mkdir(parents=True, exist_ok=True)
    return TaskService(
        AgentTaskStore(home.store_path),
        lambda url: ForgeToolClient(url, timeout_s=timeout_s),
        workspace=home.workspace,
    )
