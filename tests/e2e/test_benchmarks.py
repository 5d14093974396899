"""Every benchmark still runs end to end, in a tiny size: it exits 0 and its last line is
the one JSON object ``make bench`` promises (raw figures plus a ``targets`` map). The
figures themselves are not judged here: timings belong to ``make bench``, never to tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.paths import PROJECT_ROOT
from tests.support.processes import descendants
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

TINY = {
    "gateway_query.py": ["--requests", "30", "--actions", "300"],
    "registry.py": ["--calls", "200", "--rounds", "2"],
    "context.py": ["--calls", "10", "--rounds", "2"],
    "paos_store.py": [
        "--actions",
        "50",
        "--rounds",
        "1",
        "--records",
        "20",
        "--finalize-reps",
        "1",
        "--captures",
        "5",
    ],
    "sim.py": ["--robot", "sim_arm", "--rounds", "2", "--seconds", "1", "--frames", "5"],
    "install.py": [
        "--rounds",
        "1",
        "--small-files",
        "50",
        "--large-mib",
        "1",
        "--runtime-rounds",
        "1",
    ],
}


@pytest.mark.parametrize("script", sorted(TINY))
def test_the_benchmark_runs_and_ends_with_its_json_line(script: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "bench" / script), *TINY[script]],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    last = json.loads(done.stdout.strip().splitlines()[-1])
    assert last["targets"], last
    for name, target in last["targets"].items():
        assert set(target) == {"value", "limit", "better"}, name
        assert target["better"] in ("lower", "higher"), name


def _tree(process: psutil.Process) -> list[psutil.Process]:
    return descendants(process)


def _has_dataflow(process: psutil.Process) -> list[psutil.Process]:
    """The benchmark's descendants once a Dora dataflow (its `dora run`) is among them."""
    found = _tree(process)
    commands = []
    for child in found:
        with contextlib.suppress(psutil.Error):
            commands.append([Path(part).name for part in child.cmdline()[:3]])
    # `dora` is a Python console script: `python .../dora run ...`.
    dora_run = any("dora run" in " ".join(c) for c in commands)
    return found if dora_run else []


def test_a_benchmark_stopped_by_sigterm_leaves_no_process(tmp_path: Path) -> None:
    """SIGTERM mid-run: the benchmark exits and every process below it ends with it."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
    }
    bench = subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "bench" / "gateway_query.py"), "--requests", "100000"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    parent = psutil.Process(bench.pid)
    try:
        children = eventually(
            lambda: _has_dataflow(parent), within=120, what="the benchmark's dataflow"
        )
        bench.send_signal(signal.SIGTERM)
        bench.wait(timeout=60)
        gone, alive = psutil.wait_procs(children, timeout=30)
        assert not alive, [" ".join(p.cmdline()) for p in alive]
        assert gone
    finally:
        if bench.poll() is None:
            bench.kill()
        for child in _tree(parent):
            child.kill()
