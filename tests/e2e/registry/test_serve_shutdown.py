"""End to end: a real ``doraforge serve`` process stopped by SIGTERM while an agent's
high-risk call waits for an operator exits within seconds (not when the approval would
expire), without a traceback, and the waiting agent is answered ``REGISTRY_STOPPING``
(or, at worst, sees its connection close) instead of hanging."""

from __future__ import annotations

import concurrent.futures
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live_server import ServeProcess, serve_process
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TOKEN = "shutdown-e2e-token-0123456789"
#: What the brief allows a stop to take; uvicorn's grace is 2 s of it.
STOP_WITHIN_S = 5.0
CALL = {
    "type": "portos_tool_call",
    "requestId": "r-shutdown",
    "name": "forge.tool_start_action",
    "arguments": {"task_id": "task_shutdown", "tool_id": "arm.home", "arguments": {}},
}


def _agent_call(serve: ServeProcess) -> httpx.Response | httpx.TransportError:
    """The agent's high-risk call (no skill needed: it waits for an operator first)."""
    try:
        return httpx.post(
            f"{serve.base_url}/api/tools/call", json=CALL, headers=dict(serve.bearer()), timeout=60
        )
    except httpx.TransportError as closed:  # a closed connection is an acceptable end
        return closed


def _pending(serve: ServeProcess) -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{serve.base_url}/api/approvals?state=pending", headers=dict(serve.bearer()), timeout=10
    )
    records: list[dict[str, Any]] = answer.json()["approvals"]
    return records


def test_sigterm_with_a_pending_approval_stops_promptly(tmp_path: Path) -> None:
    options = ("--grant", "robot.read", "--grant", "robot.write", "--token-env", "SHUTDOWN_TOKEN")
    with (
        serve_process(tmp_path, *options, token=TOKEN, env={"SHUTDOWN_TOKEN": TOKEN}) as serve,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        waiting = pool.submit(_agent_call, serve)
        eventually(lambda: _pending(serve), within=20, what="the agent's call to wait")
        started = time.monotonic()
        serve.process.send_signal(signal.SIGTERM)
        try:
            serve.process.wait(timeout=STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve still ran {STOP_WITHIN_S} s after SIGTERM:\n{serve.errors()}")
        took = time.monotonic() - started
        answer = waiting.result(timeout=10)
    assert took < STOP_WITHIN_S
    assert serve.process.returncode != -signal.SIGKILL
    errors = serve.errors()
    assert "Traceback" not in errors, errors
    # A registry token without an operator token is said once at start.
    assert errors.count("WARNING: no operator token") == 1
    if isinstance(answer, httpx.Response):
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error["code"] == "REGISTRY_STOPPING"
        assert "withdrawn" in error["message"]
