"""``doraforge run``: a development dataflow whose Gateway takes the operator's token."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from doraforge.dataflows import DATAFLOWS
from doraforge.paos.gateway_auth import bearer
from doraforge.skill_runtime.dora_run import dora_environment, free_port
from tests.paths import PROJECT_ROOT
from tests.support.live_server import stop_run
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

TOKEN = "run-command-token-0123456789"


def _answers(url: str, token: str) -> bool:
    try:
        return httpx.get(url, headers=bearer(token), timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_run_hands_the_operators_token_to_the_gateway_through_a_private_file(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = dora_environment(
        {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)},
        DORAFORGE_GATEWAY_TOKEN=TOKEN,
        DORAFORGE_GATEWAY_PORT=str(port),
        DORAFORGE_GATEWAY_JOURNAL=str(tmp_path / "gateway.journal"),
    )
    tools = f"http://127.0.0.1:{port}/tools"
    command = [sys.executable, "-m", "doraforge.cli", "run", str(DATAFLOWS / "mock.yml")]
    log = tmp_path / "run.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=PROJECT_ROOT, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        eventually(lambda: _answers(tools, TOKEN), within=90.0, what="the Gateway to answer")
        assert httpx.get(tools, timeout=5).status_code == 401
        [token_file] = tmp_path.glob("doraforge-token-*/gateway.token")
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert token_file.read_text().strip() == TOKEN
    finally:
        stop_run(process, timeout_s=60.0)  # SIGINT: the CLI forwards it, Dora's graceful stop
    text = log.read_text(errors="replace")
    assert "Gateway authentication: bearer token from $DORAFORGE_GATEWAY_TOKEN" in text
    assert TOKEN not in text
    assert list(tmp_path.glob("doraforge-token-*")) == []


def _quiet_run(tmp_path: Path, dataflow: str, *flags: str) -> tuple[str, Path]:
    """``doraforge run DATAFLOW`` until its ready line (bounded), then Ctrl-C; its whole
    output once the process ended, and its run directory."""
    state = tmp_path / "state"
    env = dora_environment(
        {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_STATE_HOME": str(state)}
    )
    command = [sys.executable, "-m", "doraforge.cli", "run", dataflow, "--port", str(free_port())]
    log = tmp_path / "run.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, *flags], cwd=PROJECT_ROOT, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        eventually(
            lambda: "ready: Gateway on http://" in log.read_text(errors="replace"),
            within=120.0,
            what="the ready line",
            detail=lambda: log.read_text(errors="replace")[-2000:],
        )
    finally:
        stop_run(process, timeout_s=60.0)
    [run_dir] = (state / "doraforge" / "runs").iterdir()
    return log.read_text(errors="replace"), run_dir


def _dora_lines(text: str) -> list[str]:
    # Dora's own lines: its node build/spawn log ("world: DEBUG building node"), its
    # crates' targets and its daemon's INFO lines.
    markers = ("DEBUG", " INFO ", "dora_", "zenoh", "building node", "spawned")
    return [line for line in text.splitlines() if any(m in line for m in markers)]


def test_run_sim_prints_one_ready_line_and_keeps_doras_diagnostics_in_its_log(
    tmp_path: Path,
) -> None:
    text, run_dir = _quiet_run(tmp_path, "sim")
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("ready:")] == [
        next(line for line in lines if line.startswith("ready:"))
    ]
    assert _dora_lines(text) == []
    assert len(lines) <= 6, text
    assert _dora_lines((run_dir / "dora.log").read_text(errors="replace"))


def test_run_verbose_prints_doras_diagnostics_too(tmp_path: Path) -> None:
    text, run_dir = _quiet_run(tmp_path, "mock", "--verbose")
    assert _dora_lines(text)
    assert sum(line.startswith("ready:") for line in text.splitlines()) == 1
    assert not (run_dir / "dora.log").exists()
