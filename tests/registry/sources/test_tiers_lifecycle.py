"""A server's whole process tree ends with it: killing the launched process group stops its
children, a ``setsid`` double fork ends with the server however the server is stopped, and
a registry that dies without stopping its servers leaves no orphan."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from doraforge.registry.sources.tiers import TIERS, Launch
from tests.registry.sources.tier_runs import SCRIPT, spec_for, with_args
from tests.support.processes import carrying, kill_carrying
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

# The server double-forks a grandchild into a session of its own (so no group kill reaches
# it), says "ready", and serves until its stdin closes.
DAEMONIZING = """
import os, sys
SLEEP = "import time; time.sleep(600)"
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execv(sys.executable, [sys.executable, "-c", SLEEP, "orphan-of", sys.argv[1]])
    os._exit(0)
os.waitpid(child, 0)
print("ready", os.getpid(), flush=True)
sys.stdin.read()
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


def _launch(tier: int, tmp_path: Path, token: str, source: str = FAMILY) -> Launch:
    spec = with_args(spec_for(tmp_path), SCRIPT, token)
    launch = TIERS[tier].launch(spec)
    (spec.workdir / SCRIPT).write_text(source, encoding="utf-8")
    return launch


def _stop_by_eof(server: subprocess.Popen[bytes]) -> None:
    assert server.stdin is not None
    server.stdin.close()


def _stop_by_sigterm(server: subprocess.Popen[bytes]) -> None:
    os.killpg(server.pid, signal.SIGTERM)


def _started(launch: Launch) -> subprocess.Popen[bytes]:
    """``launch`` spawned as the MCP SDK spawns it (a session of its own), once it is ready."""
    server = subprocess.Popen(
        [launch.command, *launch.args],
        env=launch.env,
        cwd=launch.cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert server.stdout is not None
    if not server.stdout.readline().startswith(b"ready"):
        server.kill()
        server.wait(WAIT_S)
        raise AssertionError("the launched server never said ready")
    return server


@pytest.mark.parametrize("stop", [_stop_by_eof, _stop_by_sigterm], ids=["stdin-closed", "sigterm"])
@pytest.mark.parametrize("tier", [1, 2], ids=["subprocess", "sandbox"])
def test_a_setsid_double_fork_ends_with_the_server(tier: int, stop: Any, tmp_path: Path) -> None:
    token = f"doraforge-tier-test-{secrets.token_hex(6)}"
    launch = _launch(tier, tmp_path, token, DAEMONIZING)
    try:
        with _started(launch) as server:
            orphan = eventually(
                lambda: carrying(f"orphan-of\0{token}"), within=WAIT_S, what="the orphan"
            )
            assert os.getsid(orphan[0]) != server.pid  # out of reach of a group kill

            stop(server)
            server.wait(WAIT_S)

        eventually(lambda: not carrying(token), within=WAIT_S, what="the orphan to end")
    finally:
        kill_carrying(token)


@pytest.mark.parametrize("tier", [1, 2], ids=["subprocess", "sandbox"])
def test_killing_the_launched_group_ends_the_servers_children(tier: int, tmp_path: Path) -> None:
    token = f"doraforge-tier-test-{secrets.token_hex(6)}"
    launch = _launch(tier, tmp_path, token)
    try:
        with _started(launch) as server:
            eventually(lambda: len(carrying(token)) >= 2, within=WAIT_S, what="the family")

            os.killpg(server.pid, signal.SIGKILL)
            server.wait(WAIT_S)

        eventually(lambda: not carrying(token), within=WAIT_S, what="the grandchild to end")
    finally:
        kill_carrying(token)


def _orphaned(tier: int, tmp_path: Path, token: str, source: str = FAMILY) -> int:
    """Run the family under a parent that dies at once; the server's pid (tier 1's is a host
    pid, tier 2's one inside the sandbox's namespace)."""
    launch = _launch(tier, tmp_path, token, source)
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
        eventually(lambda: server not in carrying(token), within=WAIT_S, what="the server")
    finally:
        kill_carrying(token)


def test_a_registry_that_dies_takes_the_whole_tier_2_sandbox_with_it(tmp_path: Path) -> None:
    token = f"doraforge-tier-test-{secrets.token_hex(6)}"
    try:
        _orphaned(2, tmp_path, token)

        eventually(lambda: not carrying(token), within=WAIT_S, what="the sandbox to end")
    finally:
        kill_carrying(token)


def test_a_registry_that_dies_takes_a_tier_1_servers_setsid_orphan_with_it(
    tmp_path: Path,
) -> None:
    token = f"doraforge-tier-test-{secrets.token_hex(6)}"
    try:
        _orphaned(1, tmp_path, token, DAEMONIZING)

        eventually(lambda: not carrying(token), within=WAIT_S, what="the whole family")
    finally:
        kill_carrying(token)
