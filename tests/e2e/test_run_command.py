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
