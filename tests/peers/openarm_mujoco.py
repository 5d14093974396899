"""OpenArm's MuJoCo Dora node ``dora-openarm-mujoco`` from the package index, as a peer.

It requires ``opencv-python``, which cannot share one environment with doraforge's
``opencv-python-headless``, so it gets its own virtual environment under ``.peers/``, built
once by this module and reused while its stamp names the same version (as
:mod:`tests.peers.phyagentos` does). Dora runs its console script as a node's ``path``: a
node may be another interpreter's program. Its ``dora-rs`` must be the one doraforge's
Dora daemon speaks, so a different resolution is replaced by doraforge's own version.
"""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

from tests.peers.venvs import peer_venv

VERSION = "0.5.1"
REQUIREMENT = f"dora-openarm-mujoco=={VERSION}"
INSTALL_TIMEOUT_S = 900.0
CHECK_TIMEOUT_S = 60.0


def venv() -> Path:
    """The peer's virtual environment, built on first use (bounded), with doraforge's
    ``dora-rs`` version."""
    root = peer_venv(f"dora-openarm-mujoco-{VERSION}", REQUIREMENT, timeout_s=INSTALL_TIMEOUT_S)
    python = str(root / "bin" / "python")
    ours = version("dora-rs")
    probe = "import importlib.metadata as m; print(m.version('dora-rs'))"
    theirs = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, check=True, timeout=CHECK_TIMEOUT_S
    ).stdout.strip()
    if theirs != ours:
        install = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*install, f"dora-rs=={ours}"], check=True, timeout=INSTALL_TIMEOUT_S)
    return root


def command() -> Path:
    """The node's console script (``path:`` of its dataflow stanza)."""
    return venv() / "bin" / "dora-openarm-mujoco"
