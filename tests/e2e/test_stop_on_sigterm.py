"""A demo or a benchmark killed by SIGTERM (``timeout``, a CI runner) stops the dataflow it
started: nothing below it outlives it. ``dora run`` sits in a session of its own, so
without this it would keep running after its parent is gone."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from doraforge.skill_runtime.dora_run import dora_environment
from tests.paths import PROJECT_ROOT
from tests.support.processes import descendants
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

START_TIMEOUT_S = 120.0
EXIT_TIMEOUT_S = 30.0


def _dora_runs(root: psutil.Process) -> list[psutil.Process]:
    found = []
    for child in descendants(root):
        with contextlib.suppress(psutil.NoSuchProcess):
            if "run" in child.cmdline() and any("dora" in word for word in child.cmdline()):
                found.append(child)
    return found


def _sigterm_once_dora_runs(tmp_path: Path, command: list[str]) -> tuple[int, str]:
    """Start ``command``, SIGTERM it once a ``dora run`` runs below it; the exit status and
    output, after asserting that every process below it is gone."""
    log = tmp_path / "out.log"
    env = dora_environment(
        {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    )
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    root = psutil.Process(process.pid)
    below: list[psutil.Process] = []
    try:
        eventually(
            lambda: _dora_runs(root) or process.poll() is not None,
            within=START_TIMEOUT_S,
            what="a dora run below the command",
            detail=lambda: log.read_text(errors="replace")[-2000:],
        )
        below = descendants(root)
        assert _dora_runs(root), log.read_text(errors="replace")[-2000:]
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=EXIT_TIMEOUT_S)
        _, alive = psutil.wait_procs(below, timeout=5)
        assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
        return code, log.read_text(errors="replace")
    finally:
        process.kill()
        for child in below:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        process.wait(timeout=10)


def test_the_mock_demo_killed_by_sigterm_stops_its_dataflow(tmp_path: Path) -> None:
    code, text = _sigterm_once_dora_runs(
        tmp_path, [sys.executable, "-m", "doraforge.cli", "demo", "--mock"]
    )
    assert code == 130, text[-2000:]
    assert text.strip().splitlines()[-1] == "doraforge: INTERRUPTED: stopped by Ctrl-C or SIGTERM"


def test_a_benchmark_killed_by_sigterm_stops_its_dataflow(tmp_path: Path) -> None:
    command = [sys.executable, "bench/gateway_query.py", "--requests", "200", "--actions", "1"]
    code, text = _sigterm_once_dora_runs(tmp_path, command)
    assert code == 1, text[-2000:]
    assert text.strip().splitlines()[-1] == "interrupted; the benchmark stopped what it started"
    assert "Traceback" not in text
