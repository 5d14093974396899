"""Peers from the npm registry (the MCP TypeScript SDK client, the MCP Inspector CLI).

Each lives in a folder of ``tests/peers/`` holding a ``package.json`` that pins it to one
exact version and the ``package-lock.json`` that pins the rest. :func:`npm_peer` copies the
two under ``.peers/`` (``DORAFORGE_PEERS_DIR`` moves it) and runs ``npm ci`` there, once,
bounded and under the peers' file lock so concurrent test processes never install over
each other; a stamp with the two files' digest says the install is complete and current.
A clean clone needs only ``node``/``npm`` on PATH and the npm registry.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.peers.venvs import locked, peer_root

INSTALL_TIMEOUT_S = 300.0
NPM_CI = ("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
_MANIFESTS = ("package.json", "package-lock.json")


def pinned(source: Path, package: str) -> str:
    """The exact version of ``package`` that ``source``'s ``package.json`` pins."""
    manifest = json.loads((source / "package.json").read_text(encoding="utf-8"))
    version: str = manifest["dependencies"][package]
    return version


def npm_peer(
    source: Path,
    folder: str,
    *,
    label: str,
    npm_flags: Sequence[str] = (),
    scripts: Sequence[str] = (),
) -> Path:
    """The installed peer ``<peers>/<folder>`` built from ``source``; installed on first
    use. ``scripts`` (files of ``source``) are copied on every call, under the lock: they
    may change without the lock file changing. ``label`` names the peer in the one-line
    failures (``<LABEL>_NODE_MISSING``, ``<LABEL>_INSTALL_FAILED``), which are test
    failures saying what to do."""
    target = peer_root() / folder
    target.mkdir(parents=True, exist_ok=True)
    with locked(target / ".install.lock"):
        stamp, digest = target / ".doraforge-installed", _digest(source)
        if not (stamp.exists() and stamp.read_text() == digest):
            _install(source, target, label, npm_flags)
            stamp.write_text(digest)
        for name in scripts:
            shutil.copyfile(source / name, target / name)
    return target


def _install(source: Path, target: Path, label: str, npm_flags: Sequence[str]) -> None:
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise AssertionError(
            f"{label}_NODE_MISSING: this peer needs node (>= 20) and npm on PATH; install "
            "them (Debian: apt-get install nodejs npm) and run the tests again"
        )
    for name in _MANIFESTS:
        shutil.copyfile(source / name, target / name)
    try:
        subprocess.run(
            [*NPM_CI, *npm_flags],
            cwd=target,
            check=True,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except subprocess.CalledProcessError as failed:
        raise AssertionError(
            f"{label}_INSTALL_FAILED: `npm ci` in {target} exited {failed.returncode}; check "
            f"access to the npm registry:\n{failed.stderr[-3000:]}"
        ) from failed
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"{label}_INSTALL_FAILED: `npm ci` in {target} took over {INSTALL_TIMEOUT_S:g} s; "
            "check access to the npm registry and run the tests again"
        ) from None


def _digest(source: Path) -> str:
    """What an install is current for: the two files ``npm ci`` reads."""
    hashed = hashlib.sha256()
    for name in _MANIFESTS:
        hashed.update((source / name).read_bytes())
    return hashed.hexdigest()
