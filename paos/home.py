"""Where PAOS keeps its state: the task store, evidence, skills, downloads and runtimes.

The home is ``--home DIR`` or ``$DORAFORGE_HOME`` (read by entry points only), else
``~/.doraforge``. It is created (or tightened) by :meth:`PaosHome.ensure` only: the
folder 0700; the store, its ``-wal``/``-shm`` and the logs in it are 0600. Layout::

    paos.db                      AgentTask store
    workspace/evidence/<task>/   evidence bytes
    skills/<name>/current/       the installed bundle (atomically swapped)
    skills/<name>/previous/      the backup kept by the last install
    cache/sha256/<hex>[.part]    downloads keyed by digest
    artifacts/<artifact_id>/<version>/  node artifacts, each with receipt.json
    runtime/<name>.json          runtime state (strict, versioned); <name>.lock
    runtime/logs/<name>.log      runtime logs
    runtime/audit.log            forced stops (JSON lines)
    runtime/tokens/<name>.token  the running skill's Gateway bearer token (0600, per start)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from doraforge.wire.files import private_directory

if TYPE_CHECKING:
    from doraforge.paos.client import TokenLookup
    from doraforge.paos.tasks import TaskService


@dataclass(frozen=True)
class PaosHome:
    """The directory layout of one PAOS home."""

    root: Path

    def ensure(self) -> PaosHome:
        """Create the home folder with mode 0700, or take group and other permissions off
        an existing one (it holds the task store, tokens and logs); returns the home. The
        one place a home is created: every command that writes into one calls it first."""
        private_directory(self.root)
        return self

    @property
    def store_path(self) -> Path:
        """The SQLite AgentTask store."""
        return self.root / "paos.db"

    @property
    def workspace(self) -> Path:
        """The root that evidence paths are relative to."""
        return self.root / "workspace"

    @property
    def skills_dir(self) -> Path:
        """Installed skills, one folder per name."""
        return self.root / "skills"

    @property
    def cache_dir(self) -> Path:
        """Downloads keyed by SHA-256."""
        return self.root / "cache" / "sha256"

    @property
    def artifacts_dir(self) -> Path:
        """Installed node artifacts, per artifact id and version."""
        return self.root / "artifacts"

    @property
    def runtime_dir(self) -> Path:
        """Runtime state files, locks and logs."""
        return self.root / "runtime"

    @classmethod
    def from_environment(
        cls, environ: Mapping[str, str] | None = None, *, explicit: str | Path | None = None
    ) -> PaosHome:
        """``explicit`` (``--home``), else ``$DORAFORGE_HOME``, else ``~/.doraforge``."""
        env = os.environ if environ is None else environ
        chosen = explicit or env.get("DORAFORGE_HOME")
        if chosen:
            return cls(Path(chosen).expanduser())
        return cls(Path(env.get("HOME") or Path.home()) / ".doraforge")


def open_service(
    home: PaosHome, *, timeout_s: float = 10.0, token_for: TokenLookup | None = None
) -> TaskService:
    """A :class:`~paos.tasks.TaskService` on ``home`` talking to Gateways over HTTP.

    ``token_for`` names the bearer token for a Gateway URL; it is asked on every request,
    so a client kept for a URL follows a restarted skill's new token. Without it no
    token is sent (a Gateway that has one answers 401).
    """
    from doraforge.paos.client import ForgeToolClient
    from doraforge.paos.store import AgentTaskStore
    from doraforge.paos.tasks import TaskService

    def client_for(url: str) -> ForgeToolClient:
        token = None if token_for is None else (lambda: token_for(url))
        return ForgeToolClient(url, timeout_s=timeout_s, token=token)

    home.ensure().workspace.mkdir(parents=True, exist_ok=True)
    return TaskService(AgentTaskStore(home.store_path), client_for, workspace=home.workspace)
