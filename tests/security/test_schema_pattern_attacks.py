"""Hostile ``pattern`` keywords against a real ``doraforge serve``: a pattern the ``regex``
library would unroll into millions of nodes (it crashed the process with SIGSEGV on the
first call) is refused at save with a code, and a call of many near-misses of a
backtracking pattern ends in time while the registry keeps answering."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.security.attack_peers import Listener
from tests.support.live_server import ServeProcess, serve_process

NAME = "hostile"
TOOL = f"api__{NAME}__item"
GRANTS = ("api.read", "api.write")
ANSWER_WITHIN_S = 10.0


def _bundle(base_url: str, pattern: str) -> dict[str, Any]:
    """One GET tool whose query parameter ``q`` is a list of strings matching ``pattern``."""
    schema = {"type": "array", "items": {"type": "string", "pattern": pattern}}
    item = {
        "name": "item",
        "description": "GET /items on the canary.",
        "path": "/items",
        "params": [{"name": "q", "in": "query", "required": True, "schema": schema}],
    }
    return {"schemaVersion": 1, "name": NAME, "baseUrl": base_url, "tools": [item]}


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[tuple[ServeProcess, str]]:
    """``doraforge serve`` granting the API tools' capabilities, and a loopback canary."""
    with Listener() as canary:
        config = tmp_path / "serve.json"
        outbound = {"default": "deny", "internal": [f"127.0.0.1:{canary.port}"]}
        settings = {"outbound": outbound, "grants": list(GRANTS), "approvals": ["*"]}
        config.write_text(json.dumps(settings))
        with serve_process(tmp_path, "--config", str(config)) as server:
            yield server, canary.url
            assert server.process.poll() is None, server.errors()
            assert "Traceback" not in server.errors(), server.errors()


def test_a_pattern_that_crashed_the_matcher_is_refused_at_save_and_serve_lives(
    registry: tuple[ServeProcess, str],
) -> None:
    server, canary = registry
    with httpx.Client(base_url=server.base_url, timeout=ANSWER_WITHIN_S) as http:
        saved = http.put(f"/api/api-tools/{NAME}", json=_bundle(canary, "(?:(?:ab|c){1000}){1000}"))
        call = {"name": TOOL, "arguments": {"q": ["ab"]}, "requestId": "r-crash"}
        with contextlib.suppress(httpx.HTTPError):  # before the fix: serve died of SIGSEGV
            http.post("/api/tools/call", json=call)
        exit_code = server.process.poll()

    assert exit_code is None, f"serve exited {exit_code}"

    assert saved.status_code == 422, saved.text
    assert saved.json()["error"]["code"] == "SCHEMA_INVALID"


def test_many_near_misses_end_in_time_and_the_registry_keeps_answering(
    registry: tuple[ServeProcess, str],
) -> None:
    server, canary = registry
    near_misses = ["a" * 40 + "b"] * 300  # 300 x 50 ms per validation before the fix
    call = {"name": TOOL, "arguments": {"q": near_misses}, "requestId": "r-slow"}
    with (
        httpx.Client(base_url=server.base_url, timeout=ANSWER_WITHIN_S) as http,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        saved = http.put(f"/api/api-tools/{NAME}", json=_bundle(canary, "^(a|aa)+$"))
        pending = pool.submit(http.post, "/api/tools/call", json=call)
        listed = http.get("/api/tools")
        answer = pending.result(timeout=2 * ANSWER_WITHIN_S)

    assert saved.status_code == 201, saved.text
    assert listed.status_code == 200
    assert answer.status_code < 500
    assert answer.json()["error"]["code"] == "TOOL_INVALID_ARGUMENTS"
