"""``doraforge demo`` end to end: pack, install, start on Dora, a governed task, verify;
and ``doraforge demo --mock``, the Tool API tour behind a generated token."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from doraforge.skill_runtime.dora_run import dora_environment
from tests.paths import PROJECT_ROOT
from tests.support.live_server import stop_run

pytestmark = pytest.mark.e2e


def run_demo(env: dict[str, str], *options: str, timeout_s: float) -> str:
    """``doraforge demo`` with ``options``, bounded by ``timeout_s``; it must exit 0. Its stdout.

    A demo that overruns is stopped with everything it started (its dataflow's nodes
    included), not only the CLI process, so nothing outlives the test.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "doraforge.cli", "demo", *options],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        raw_out, raw_err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_run(process, 15.0)
        raw_out, raw_err = process.communicate()
        pytest.fail(f"the demo ran past {timeout_s:g} s: {raw_out.decode()[-4000:]}")
    stdout, stderr = raw_out.decode(errors="replace"), raw_err.decode(errors="replace")
    assert process.returncode == 0, stdout[-4000:] + stderr[-4000:]
    return stdout


def test_the_demo_verifies_a_pick_and_place_and_writes_its_report(tmp_path: Path) -> None:
    out, temporary = tmp_path / "demo", tmp_path / "tmp"
    temporary.mkdir()
    env = dora_environment(
        {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(temporary)}
    )
    stdout = run_demo(env, "--out", str(out), timeout_s=300)
    assert "verdict: success · task succeeded · robot sim_arm" in stdout
    # Its temporary PAOS home is gone with the run; the report keeps the frames.
    assert f"fresh PAOS home {temporary}" in stdout
    assert list(temporary.glob("doraforge-demo-home-*")) == []
    (folder,) = out.glob("task_*")  # the report lives in the task's own folder
    report = (folder / "report.html").read_text(encoding="utf-8")
    assert "cube_in_zone" in report
    assert 'robot <b class="robot">sim_arm</b>' in report
    # Each frame is captioned with the step the agent named, not only its tool.
    for caption in ("before move above the cube", "after descend", "after lift", "after home"):
        assert caption in report
    frames = sorted((folder / "frames").glob("*.png"))
    assert len(frames) >= 10  # the before frame and one after each of the nine steps
    assert all(f"frames/{frame.name}" in report for frame in frames)
    assert frames[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len({hashlib.sha256(frame.read_bytes()).digest() for frame in frames}) > 2


def test_the_mock_demo_runs_behind_a_generated_token_and_leaves_no_token_file(
    tmp_path: Path,
) -> None:
    env = dora_environment(
        {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    )
    stdout = run_demo(env, "--mock", timeout_s=240)
    assert "Gateway authentication: bearer token generated for this run" in stdout
    assert "GET /tools without the token -> HTTP 401" in stdout
    assert "final phase: stopped" in stdout
    assert "Demo complete." in stdout
    assert list(tmp_path.glob("doraforge-token-*")) == []
