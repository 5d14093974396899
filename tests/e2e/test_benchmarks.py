"""Every benchmark still runs end to end, in a tiny size: it exits 0 and its last line is
the one JSON object ``make bench`` promises (raw figures plus a ``targets`` map). The
figures themselves are not judged here: timings belong to ``make bench``, never to tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import PROJECT_ROOT

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
    "sim.py": ["--seconds", "1", "--frames", "5"],
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
