"""A real PhyAgentOS 1.1.1 beside doraforge, for the tests that use it as a peer.

PhyAgentOS pins dependencies doraforge does not share (``websockets<17``, litellm, …), so
it gets its own virtual environment, built once from the package index by the project's
own files (this module) under ``.peers/`` in the checkout and reused while its stamp says
the same version. Tests run PhyAgentOS code in that interpreter as a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.paths import PROJECT_ROOT

VERSION = "1.1.1"
REQUIREMENT = f"phyagentos-ai=={VERSION}"
INSTALL_TIMEOUT_S = 900.0


def peer_root() -> Path:
    """Where the peer environment lives (``DORAFORGE_PEERS_DIR`` moves it)."""
    return Path(os.environ.get("DORAFORGE_PEERS_DIR") or PROJECT_ROOT / ".peers")


def python() -> Path:
    """The interpreter of a PhyAgentOS environment, built on first use (bounded)."""
    venv = peer_root() / f"phyagentos-{VERSION}"
    interpreter = venv / "bin" / "python"
    stamp = venv / ".doraforge-installed"
    if stamp.exists() and interpreter.exists():
        return interpreter
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
    subprocess.run(
        [
            str(interpreter),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            REQUIREMENT,
        ],
        check=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    stamp.write_text(REQUIREMENT + "\n")
    return interpreter


def run(script: str, *, cwd: Path | None = None, timeout: float = 300.0, **env: str) -> Any:
    """Run ``script`` (Python source) in the PhyAgentOS interpreter; it must print one JSON
    document as its last line, which is returned. A non-zero exit fails with its output."""
    done = subprocess.run(
        [str(python()), "-c", textwrap.dedent(script)],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"PhyAgentOS script exited {done.returncode}:\n{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return json.loads(lines[-1])
