"""Virtual environments of the peers nobody here wrote (PhyAgentOS, a third-party MCP
server), built once from the package index under ``.peers/`` by the project's own files and
reused while their stamp names the same requirement. ``DORAFORGE_PEERS_DIR`` moves them.

``make test`` builds them all before pytest starts (:mod:`tests.peers.install`), so no
test's own time limit ever covers an install; a test run alone builds what it needs on
first use. Builds take a file lock: concurrent test processes never install over each
other."""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.paths import PROJECT_ROOT


def peer_root() -> Path:
    """Where the peer environments live (``DORAFORGE_PEERS_DIR`` moves them)."""
    return Path(os.environ.get("DORAFORGE_PEERS_DIR") or PROJECT_ROOT / ".peers")


def peer_venv(folder: str, requirement: str, *, timeout_s: float) -> Path:
    """The venv ``<peers>/<folder>`` with ``requirement`` installed, built on first use
    (each step bounded); returns its root."""
    root = peer_root() / folder
    interpreter = root / "bin" / "python"
    stamp = root / ".doraforge-installed"
    root.parent.mkdir(parents=True, exist_ok=True)
    with locked(root.parent / f".{folder}.lock"):
        if stamp.exists() and interpreter.exists() and stamp.read_text().strip() == requirement:
            return root
        venv = [sys.executable, "-m", "venv", "--clear", str(root)]
        subprocess.run(venv, check=True, timeout=120)
        install = [str(interpreter), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*install, requirement], check=True, timeout=timeout_s)
        stamp.write_text(requirement + "\n")
    return root


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` for the block (released when the file closes)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
