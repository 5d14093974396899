"""``bench/fleet.py --quick`` runs end to end: four skill-started sim cells behind a real
``doraforge serve``, then a one-daemon cell beside the cell split over two loopback Dora
daemons. Its last line is the one JSON object the benchmarks promise, with every figure and
every target present; whether the targets are met is for ``make bench``, never for tests.
SIGTERM mid-run stops everything the benchmark started.
"""

from __future__ import annotations

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
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

SCRIPT = PROJECT_ROOT / "bench" / "fleet.py"
TARGETS = {
    "fleet.qps_2_cells_over_1",
    "fleet.qps_4_cells_over_1",
    "cross_daemon.query_p50_over_single",
    "cross_daemon.frame_transit_p50_over_single",
    "cross_daemon.frames_dropped",
}
SUMMARY = {"n", "p50_ms", "p99_ms", "mean_ms"}


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),  # the benchmark's private folder, swept below
    }


def test_the_quick_fleet_benchmark_reports_every_figure_and_target(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        cwd=PROJECT_ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["benchmark"] == "fleet"
    assert set(report["targets"]) == TARGETS
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
        assert set(figures["latency"]) == SUMMARY
    daemons = report["across_daemons"]
    for side in ("single_daemon", "cross_daemon"):
        assert set(daemons["queries"][side]) == SUMMARY
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


def test_sigterm_mid_run_stops_every_process_it_started(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--quick"],
        cwd=PROJECT_ROOT,
        env=_env(tmp_path),
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
