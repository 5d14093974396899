"""A server's whole process tree ends with it: killing the launched process group stops its
children, and a registry that dies without stopping its servers leaves no orphan."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from doraforge.registry.sources.tiers import TIERS, Launch
from tests.registry.sources.tier_runs import SCRIPT, spec_for, with_args
from tests.support.waiting import eventually

WAIT_S = 15.0

# The server starts a grandchild carrying a unique token in its argv, says "ready", and waits.
FAMILY = """
import subprocess, sys
import os
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", sys.argv[1]])
print("ready", os.getpid(), flush=True)
import time
time.sleep(600)
"""

# A stand-in registry: starts the launch, reports the server is ready, then dies abruptly.
CRASHING_PARENT = """
import json, os, subprocess, sys
launch = json.loads(sys.argv[1])
server = subprocess.Popen([launch["command"], *launch["args"]], env=launch["env"],
                          cwd=launch["cwd"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, start_new_session=True)
print(server.stdout.readline().decode().strip(), flush=True)
os._exit(0)
"""


def _alive_with(token: str) -> list[int]:
    """Host pids whose command line carries ``token``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _reap(token: str) -> None:
    for pid in _alive_with(token):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def _launch(tier: int, tmp_path: Path, token: str) -> Launch:
    spec = with_args(spec_for(tmp_path), SCRIPT, token)
    launch = TIERS[tier].launch(spec)
    (spec.workdir / SCRIPT).write_text(FAMILY, encoding="utf-8")
    return launch


@pytest.mark.parametrize("tier", [1, 2], ids=["subprocess", "sandbox"])
def test_killing_the_launched_group_ends_the_servers_children(tier: int, tmp_path: Path) -> None:
    token = f"doraforge-tier-test-{secrets.token_hex(6)}"
    launch = _launch(tier, tmp_path, token)
    try:
        with subprocess.Popen(
            [launch.command, *launch.args],
            env=launch.env,
            cwd=launch.cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # as the MCP SDK spawns it
        ) as server:
            assert server.stdout is not None
            assert server.stdout.readline().startswith(b"ready")
            eventually(lambda: len(_alive_with(token)) >= 2, within=WAIT_S, what="the family")

            os.killpg(server.pid, signal.SIGKILL)
            server.wait(WAIT_S)

        eventually(lambda: not _alive_with(token), within=WAIT_S, what="the grandchild to end")
    finally:
        _reap(token)


def _orphaned(tier: int, tmp_path: Path, token: str) -> int:
    """Run the family under a parent that dies at once; the server's pid (tier 1's is a host
    pid, tier 2's one inside the sandbox's namespace)."""
    launch = _launch(tier, tmp_path, token)
    payload = {"command": launch.command, "args": launch.args, "env": launch.env}
    payload["cwd"] = str(launch.cwd)
    parent = subprocess.run(
        [sys.executable, "-c", CRASHING_PARENT, json.dumps(payload)],
        capture_output=True,
        timeout=WAIT_S,
        check=False,
    )
    word, pid = parent.stdout.split()
    assert word == b"ready", parent.stderr
    return int(pid)


def test_a_registry_that_dies_leaves_no_orphan_tier_1_server(tmp_path: Path) -> None:
    token = f"doraforge-tier-test-{secrets.token_hex(6)}"
    try:
        server = _orphaned(1, tmp_path, token)

        # The server itself dies with its parent; its own children are the manager's to end
        # (the group kill above): tier 1 has no pid namespace to take them down with it.
        eventually(lambda: server not in _alive_with(token), within=WAIT_S, what="the server")
    finally:
        _reap(token)


def test_a_registry_that_dies_takes_the_whole_tier_2_sandbox_with_it(tmp_path: Path) -> None:
    token = f"doraforge-tier-test-{secrets.token_hex(6)}"
    try:
        _orphaned(2, tmp_path, token)

        eventually(lambda: not _alive_with(token), within=WAIT_S, what="the sandbox to end")
    finally:
        _reap(token)
