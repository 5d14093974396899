"""Every benchmark still runs end to end, in a tiny size: it exits 0 and its last line is
the one JSON object ``make bench`` promises (raw figures plus a ``targets`` map). The
figures themselves are not judged here: timings belong to ``make bench``, never to tests.

``bench/fleet.py --quick`` is here too: four skill-started sim cells behind a real
``doraforge serve``, then a one-daemon cell beside the cell split over two loopback Dora
daemons, with every figure and target present; SIGTERM mid-run stops everything it
started. One module, so the two pytest-xdist workers (``--dist loadscope``) never run two
benchmarks side by side: a benchmark beside the four-cell fleet starved its own cell (a
motion ended ``unknown`` when joint state stopped arriving for a second).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

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


# ------------------------------------------------------------------ bench/fleet.py

FLEET_SCRIPT = PROJECT_ROOT / "bench" / "fleet.py"
FLEET_TARGETS = {
    "fleet.qps_2_cells_over_1",
    "fleet.qps_4_cells_over_1",
    "cross_daemon.query_p50_over_single",
    "cross_daemon.frame_transit_p50_over_single",
    "cross_daemon.frames_dropped",
}
FLEET_SUMMARY = {"n", "p50_ms", "p99_ms", "mean_ms"}


def _fleet_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),  # the benchmark's private folder, swept below
    }


def test_the_quick_fleet_benchmark_reports_every_figure_and_target(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(FLEET_SCRIPT), "--quick"],
        cwd=PROJECT_ROOT,
        env=_fleet_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["benchmark"] == "fleet"
    assert set(report["targets"]) == FLEET_TARGETS
    for name, target in report["targets"].items():
        assert set(target) == {"value", "limit", "better"}, name
        assert isinstance(target["value"], int | float), name
        assert target["better"] in ("lower", "higher"), name
    # The scaling limits follow the core count: 1 + 0.8 (min(cells, cores) - 1).
    cores = report["cpu_count"]
    assert report["targets"]["fleet.qps_4_cells_over_1"]["limit"] == round(
        1 + 0.8 * (min(4, cores) - 1), 3
    )
    for cells in ("1", "2", "4"):
        figures = report["fleet"]["by_cells"][cells]
        assert figures["qps_median"] > 0, figures
        assert set(figures["latency"]) == FLEET_SUMMARY
    daemons = report["across_daemons"]
    for side in ("single_daemon", "cross_daemon"):
        assert set(daemons["queries"][side]) == FLEET_SUMMARY
        assert daemons["frames"][side]["frames_seen"] > 0, daemons["frames"]
    assert _leftovers(tmp_path) == []


def _leftovers(root: Path) -> list[str]:
    """Processes whose command line or working directory lies under ``root``."""
    found = []
    for process in psutil.process_iter(["cmdline", "cwd", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        command = " ".join(process.info["cmdline"] or [])
        if str(root) in command or (process.info["cwd"] or "").startswith(str(root)):
            found.append(command)
    return found


def test_the_fleet_benchmark_stopped_mid_run_stops_every_process_it_started(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, str(FLEET_SCRIPT), "--quick"],
        cwd=PROJECT_ROOT,
        env=_fleet_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    root = psutil.Process(process.pid)
    try:
        # Interrupted while its cells start: the hardest moment (starts under way).
        eventually(
            lambda: any("doraforge.nodes.world" in c for c in _leftovers(tmp_path)),
            within=180.0,
            what="a cell's world node to start",
        )
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode != 0
    assert "interrupted; the benchmark stopped what it started" in output, output[-2000:]
    assert not root.is_running()
    eventually(lambda: _leftovers(tmp_path) == [], within=30.0, what="nothing left running")
