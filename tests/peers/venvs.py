"""Virtual environments of the peers nobody here wrote (PhyAgentOS, a third-party MCP
server), built once from the package index under ``.peers/`` by the project's own files and
reused while their stamp names the same requirement. ``DORAFORGE_PEERS_DIR`` moves them."""

from __future__ import annotations

import os
import subprocess
import sys
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
    if stamp.exists() and interpreter.exists() and stamp.read_text().strip() == requirement:
        return root
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True, timeout=120)
    install = [str(interpreter), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*install, requirement], check=True, timeout=timeout_s)
    stamp.write_text(requirement + "\n")
    return root
