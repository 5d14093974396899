"""Test-only copies of a shipped skill, packed the way a user packs one.

The shipped pick-place skill fixes its Gateway at 127.0.0.1:9201, in ``skill.yaml``'s
``gateway_url`` (the address a skill runtime polls and its agents call) and in each
profile's ``gateway.yml`` (where the Gateway binds). A test that starts the real skill
packs a copy with both moved to a free port, so a concurrent run, ``doraforge demo`` or
anything else on 9201 cannot collide with it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

SHIPPED_PORT = 9201


def skill_on_port(
    source: Path, destination: Path, port: int, *, shipped_port: int = SHIPPED_PORT
) -> Path:
    """Copy the skill folder ``source`` to ``destination`` with its Gateway moved from
    ``shipped_port`` to ``port``; fails if the copy still names ``shipped_port``."""
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns("__pycache__"))
    edits = {
        f"127.0.0.1:{shipped_port}": f"127.0.0.1:{port}",
        f"\nport: {shipped_port}\n": f"\nport: {port}\n",
    }
    for path in (destination / "skill.yaml", *destination.glob("profiles/*/gateway.yml")):
        text = path.read_text(encoding="utf-8")
        for fixed, free in edits.items():
            text = text.replace(fixed, free)
        assert str(shipped_port) not in text, f"{path} still names port {shipped_port}"
        path.write_text(text, encoding="utf-8")
    return destination


def doraforge_pack(source: Path, output: Path) -> dict[str, Any]:
    """``doraforge --json skill pack SOURCE --output OUTPUT``, as a user runs it; returns
    its JSON answer (``path``, ``sha256``, ``size``)."""
    doraforge = shutil.which("doraforge", path=str(Path(sys.executable).parent))
    assert doraforge is not None, "the doraforge command is not installed in this venv"
    done = subprocess.run(
        [doraforge, "--json", "skill", "pack", str(source), "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    packed: dict[str, Any] = json.loads(done.stdout)
    return packed
