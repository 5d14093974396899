"""``doraforge serve`` as a process: it says where it listens, serves the catalog with the
forge.* tools, the manifest with its grants, and stops in order on SIGTERM or Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.paths import PROJECT_ROOT
from tests.support.live_server import SERVE_STOP_TIMEOUT_S, serve_process

TOKEN = "serve-test-token-0123456789"


def test_serve_listens_where_it_says_with_the_granted_robot_tools(tmp_path: Path) -> None:
    options = ("--grant", "robot.read", "--token-env", "FORGE_TEST_TOKEN", "--mcp")
    with serve_process(tmp_path, *options, token=TOKEN, env={"FORGE_TEST_TOKEN": TOKEN}) as serve:
        assert serve.bound == "127.0.0.1"
        bearer = dict(serve.bearer())
        anonymous = httpx.get(f"{serve.base_url}/api/tools", timeout=10)
        catalog = httpx.get(f"{serve.base_url}/api/tools", headers=bearer, timeout=10).json()
        manifest = httpx.get(
            f"{serve.base_url}/api/agent-context/manifest", headers=bearer, timeout=10
        ).json()
    assert serve.process.returncode != -signal.SIGKILL  # SIGTERM stopped it
    assert anonymous.status_code == 401
    names = {tool["name"] for tool in catalog["tools"]}
    assert {"forge.task_create", "forge.tool_start_action", "forge.skills.installed"} <= names
    assert manifest["grants"] == ["robot.read"]
    assert manifest["enabled"] is True
    assert manifest["authentication"] == "bearer"
    assert all(t["annotations"]["readOnlyHint"] for t in manifest["tools"])
    assert "Traceback" not in serve.errors()


def test_serve_refuses_a_bad_config_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "serve.yml"
    config.write_text("hots: 0.0.0.0\n")
    done = subprocess.run(
        [sys.executable, "-m", "doraforge.cli", "serve", "--config", str(config)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "hots" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_ends_in_order_on_ctrl_c_and_sigterm_alike(
    tmp_path: Path, signum: signal.Signals
) -> None:
    with serve_process(tmp_path) as serve:
        serve.process.send_signal(signum)
        status = serve.process.wait(timeout=SERVE_STOP_TIMEOUT_S)

    assert status == 0
    assert serve.output().rstrip().endswith("registry stopped")
    assert "INTERRUPTED" not in serve.errors()
