"""``doraforge serve`` as a process: it says where it listens, serves the catalog with the
forge.* tools, the manifest with its grants, and stops on SIGTERM."""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.paths import PROJECT_ROOT

LISTENING = re.compile(r"http://127\.0\.0\.1:(\d+)")


def _wait_for_address(process: subprocess.Popen[str], timeout_s: float) -> str:
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    seen = ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not selector.select(timeout=deadline - time.monotonic()):
            break
        line = process.stdout.readline()
        if not line:
            break
        seen += line
        found = LISTENING.search(seen)
        if found:
            return f"http://127.0.0.1:{found.group(1)}"
    raise AssertionError(f"no listening address in {seen!r}")


def test_serve_listens_where_it_says_with_the_granted_robot_tools(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200", "FORGE_TEST_TOKEN": "serve-test-token-0123456789"}
    command = [sys.executable, "-m", "doraforge.cli", "serve", "--home", str(tmp_path / "home")]
    command += ["--port", "0", "--grant", "robot.read", "--token-env", "FORGE_TEST_TOKEN"]
    command += ["--mcp"]
    process = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = _wait_for_address(process, timeout_s=30)
        bearer = {"authorization": "Bearer serve-test-token-0123456789"}
        anonymous = httpx.get(f"{base}/api/tools", timeout=10)
        catalog = httpx.get(f"{base}/api/tools", headers=bearer, timeout=10).json()
        manifest = httpx.get(
            f"{base}/api/agent-context/manifest", headers=bearer, timeout=10
        ).json()
    finally:
        process.terminate()
        _out, err = process.communicate(timeout=20)
    assert anonymous.status_code == 401
    names = {tool["name"] for tool in catalog["tools"]}
    assert {"forge.task_create", "forge.tool_start_action", "forge.skills.installed"} <= names
    assert manifest["grants"] == ["robot.read"]
    assert manifest["enabled"] is True
    assert manifest["authentication"] == "bearer"
    assert all(t["annotations"]["readOnlyHint"] for t in manifest["tools"])
    assert "Traceback" not in err


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
