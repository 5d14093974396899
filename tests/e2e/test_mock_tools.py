"""Query, Action and Session through a real Gateway and mock provider under ``dora run``."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import MockStack

pytestmark = pytest.mark.e2e

TOOL_IDS = {"mock.echo", "mock.stats", "mock.move", "mock.stream"}
BURST_CLIENTS = 32
BURST_PER_CLIENT = 20  # 640 Queries in flight from 32 connections at once


def test_discovery_lists_every_mock_tool_and_context_reports_the_live_binding(
    stack: MockStack,
) -> None:
    listing = stack.data(stack.http.get("/tools"))
    assert {tool["tool_id"] for tool in listing["tools"]} == TOOL_IDS
    assert listing["gateway_id"] == "doraforge-mock"

    first = stack.http.get("/tools/mock.move")
    second = stack.http.get("/tools/mock.move")
    assert first.status_code == 200
    assert first.content == second.content
    spec = stack.data(first)
    assert spec["semantics"] == "action"

    context = stack.context("mock.move")
    assert context["ready"] is True
    assert context["binding_error"] is None
    assert context["max_concurrency"] == 1
    assert context["robot_frame_profile"]["robot_id"] == "mock-arm"
    assert context["spec_sha256"] == first.headers["X-Spec-SHA256"]
    canonical = first.content.removeprefix(b'{"ok":true,"data":').removesuffix(b"}")
    assert hashlib.sha256(canonical).hexdigest() == context["spec_sha256"]
    instance = context["endpoint_status"]["endpoint_instance_id"]
    assert instance == stack.stats()["endpoint_instance_id"]

    missing = stack.http.get("/tools/mock.nothing/context")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "FORGE_TOOL_NOT_FOUND"


def test_query_echo_returns_the_message_through_dora(stack: MockStack) -> None:
    message = "héllo ✓ through dora"
    result = stack.query("echo", {"message": message})
    assert result == {"status": "succeeded", "outputs": {"message": message}}


def test_a_burst_of_concurrent_queries_all_answer_correctly(stack: MockStack) -> None:
    before = stack.stats()["invokes"]["echo"]
    limits = httpx.Limits(max_connections=BURST_CLIENTS, max_keepalive_connections=BURST_CLIENTS)

    def client_run(client_index: int) -> list[str]:
        failures = []
        with httpx.Client(base_url=stack.base_url, timeout=15.0, limits=limits) as client:
            for call in range(BURST_PER_CLIENT):
                message = f"burst-{client_index}-{call}"
                response = client.post(
                    "/tools/mock/echo:invoke", json={"arguments": {"message": message}}
                )
                if response.status_code != 200:
                    failures.append(f"{message}: HTTP {response.status_code} {response.text}")
                    continue
                result = response.json()["data"]["response"]["result"]
                if result != {"status": "succeeded", "outputs": {"message": message}}:
                    failures.append(f"{message}: {result}")
        return failures

    with ThreadPoolExecutor(max_workers=BURST_CLIENTS) as pool:
        failures = [f for run in pool.map(client_run, range(BURST_CLIENTS)) for f in run]

    total = BURST_CLIENTS * BURST_PER_CLIENT
    assert failures == [], f"{len(failures)} of {total} Queries failed: {failures[:10]}"
    assert stack.stats()["invokes"]["echo"] - before == total


def test_action_reports_progress_then_completes_with_outputs(stack: MockStack) -> None:
    stack.wait_idle()
    admission = stack.start("mock.move", {"duration_s": 1.0, "behaviour": "succeed"})
    assert admission["phase"] in ("accepted", "running")
    assert admission["duplicate"] is False
    invocation_id = admission["invocation_id"]

    events = stack.sse(invocation_id, lambda seen: seen[-1]["event"] == "terminal")
    ids = [event["id"] for event in events]
    assert ids == sorted(set(ids))
    fractions = [
        event["data"]["data"]["fraction"] for event in events if event["event"] == "progress"
    ]
    assert any(0.0 < fraction < 1.0 for fraction in fractions), fractions
    assert events[-1]["event"] == "terminal"

    status = stack.terminal(invocation_id)
    assert status["phase"] == "completed"
    assert status["progress"] == {"fraction": 1.0}
    result = stack.data(stack.http.get(f"/invocations/{invocation_id}/result"))
    assert result["status"] == "available"
    assert result["result"] == {"status": "succeeded", "outputs": {"travelled_s": 1.0}}


def test_cancel_mid_motion_is_accepted_first_and_ends_cancelled(stack: MockStack) -> None:
    stack.wait_idle()
    invocation_id = stack.start("mock.move", {"duration_s": 30.0, "behaviour": "succeed"})[
        "invocation_id"
    ]
    stack.poll(invocation_id, lambda status: (status["progress"] or {}).get("fraction", 0) > 0)

    response = stack.http.post(f"/invocations/{invocation_id}/cancel")
    accepted = stack.data(response, 202)
    assert accepted["cancel_status"] == "accepted"
    assert accepted["phase"] not in ("cancelled", "completed", "failed", "unknown")

    final = stack.terminal(invocation_id)
    assert final["phase"] == "cancelled"
    assert final["result"]["status"] == "cancelled"
    assert 0 < final["result"]["outputs"]["travelled_s"] < 30.0
    stack.wait_idle()


def test_session_streams_heartbeats_with_event_ids_until_stopped(stack: MockStack) -> None:
    invocation_id = stack.start("mock.stream", {})["invocation_id"]

    def three_beats(events: list[dict[str, Any]]) -> bool:
        return sum(1 for event in events if event["event"] == "heartbeat") >= 3

    events = stack.sse(invocation_id, three_beats)
    ids = [event["id"] for event in events]
    assert ids == sorted(set(ids))
    assert ids[0] >= 1
    resumed = stack.sse(invocation_id, lambda seen: len(seen) >= 1, last_event_id=ids[-1])
    assert resumed[0]["id"] > ids[-1]

    accepted = stack.data(stack.http.post(f"/invocations/{invocation_id}/stop", json={}), 202)
    assert accepted["stop_status"] == accepted["status"] == "accepted"
    assert accepted["phase"] != "stopped"

    final = stack.terminal(invocation_id)
    assert final["phase"] == "stopped"
    assert final["result"]["status"] == "stopped"
    assert final["result"]["outputs"]["beats"] >= 3


def test_missed_deadline_ends_unknown_after_exactly_one_dispatch(stack: MockStack) -> None:
    stack.wait_idle()
    before = stack.stats()["invokes"]["move"]
    admission = stack.start("mock.move", {"duration_s": 1.0, "behaviour": "hang"}, timeout_ms=1500)

    final = stack.terminal(admission["invocation_id"])
    assert final["phase"] == "unknown"
    assert final["result"]["status"] == "unknown"
    assert final["result"]["error"]["code"] == "FORGE_TOOL_DEADLINE_EXCEEDED_OUTCOME_UNKNOWN"

    # The best-effort cancel ends the hang at the provider, which frees the fenced slot.
    stack.wait_idle()
    assert stack.stats()["invokes"]["move"] - before == 1
    assert stack.status(admission["invocation_id"])["phase"] == "unknown"


def test_second_move_while_one_runs_is_refused_503_retryable(stack: MockStack) -> None:
    stack.wait_idle()
    running = stack.start("mock.move", {"duration_s": 30.0, "behaviour": "succeed"})
    try:
        busy = stack.invoke("mock.move", {"duration_s": 0.1, "behaviour": "succeed"})
        assert busy.status_code == 503, busy.text
        assert busy.headers.get("Retry-After")
        error = busy.json()["error"]
        assert error["retryable"] is True
        assert error["code"] == "FORGE_TOOL_GATEWAY_BUSY"
        assert stack.context("mock.move")["readiness"]["operation_capacity"] is False
    finally:
        stack.http.post(f"/invocations/{running['invocation_id']}/cancel")
    assert stack.terminal(running["invocation_id"])["phase"] == "cancelled"
    stack.wait_idle()


MALFORMED_BODIES = {
    "not-json": b'{"arguments": {"duration_s": 1, "behaviour": "succeed"}, "caller_id": "bad-1"',
    "not-an-object": b'["bad-2"]',
    "unknown-field": (
        b'{"arguments": {"duration_s": 1, "behaviour": "succeed"}, "caller_id": "bad-3",'
        b' "priority": 9}'
    ),
    "arguments-not-object": b'{"arguments": [1, "succeed"], "caller_id": "bad-4"}',
    "caller-id-not-string": b'{"arguments": {"duration_s": 1, "behaviour": "succeed"},'
    b' "caller_id": 5}',
    "timeout-not-integer": (
        b'{"arguments": {"duration_s": 1, "behaviour": "succeed"}, "caller_id": "bad-6",'
        b' "timeout_ms": "100"}'
    ),
    "timeout-boolean": (
        b'{"arguments": {"duration_s": 1, "behaviour": "succeed"}, "caller_id": "bad-7",'
        b' "timeout_ms": true}'
    ),
    "duplicate-key": (
        b'{"arguments": {"duration_s": 1, "behaviour": "succeed"}, "caller_id": "bad-8",'
        b' "caller_id": "bad-8b"}'
    ),
    "nan": b'{"arguments": {"duration_s": NaN, "behaviour": "succeed"}, "caller_id": "bad-9"}',
    "schema-enum": b'{"arguments": {"duration_s": 1, "behaviour": "dance"}, "caller_id": "bad-10"}',
    "schema-missing": b'{"arguments": {"behaviour": "succeed"}, "caller_id": "bad-11"}',
    "schema-extra": (
        b'{"arguments": {"duration_s": 1, "behaviour": "succeed", "speed": 2},'
        b' "caller_id": "bad-12"}'
    ),
    "empty": b"",
}
MALFORMED_CALLER_IDS = [f"bad-{n}" for n in range(1, 13)] + ["bad-8b"]


def test_malformed_bodies_are_400_and_admit_nothing(stack: MockStack) -> None:
    stack.wait_idle()
    before = stack.stats()["invokes"]
    headers = {"content-type": "application/json"}
    for name, body in MALFORMED_BODIES.items():
        for path in ("/tools/mock.move:invoke", "/tools/mock/echo:invoke"):
            response = stack.http.post(path, content=body, headers=headers)
            assert response.status_code == 400, (name, path, response.text)
            envelope = response.json()
            assert envelope["ok"] is False
            assert envelope["error"]["code"].startswith("FORGE_TOOL_"), (name, envelope)

    assert stack.stats()["invokes"] == before
    assert stack.context("mock.move")["active_invocations"] == 0
    for caller_id in MALFORMED_CALLER_IDS:
        found = stack.data(stack.http.get("/invocations", params={"caller_id": caller_id}))
        assert found["invocations"] == [], caller_id


def test_caller_id_replay_returns_the_same_invocation_and_conflict_is_409(
    stack: MockStack,
) -> None:
    stack.wait_idle()
    before = stack.stats()["invokes"]["move"]
    arguments = {"duration_s": 0.5, "behaviour": "succeed"}
    first = stack.start("mock.move", arguments, caller_id="replay-e2e-1")
    replay = stack.start("mock.move", arguments, caller_id="replay-e2e-1")
    assert replay["duplicate"] is True
    assert replay["invocation_id"] == first["invocation_id"]
    assert replay["attempt_id"] == first["attempt_id"]

    conflict = stack.invoke(
        "mock.move", {"duration_s": 0.6, "behaviour": "succeed"}, caller_id="replay-e2e-1"
    )
    assert conflict.status_code == 409, conflict.text
    assert conflict.json()["error"]["code"] == "FORGE_TOOL_CALLER_ID_CONFLICT"

    assert stack.terminal(first["invocation_id"])["phase"] == "completed"
    after_completion = stack.start("mock.move", arguments, caller_id="replay-e2e-1")
    assert after_completion["invocation_id"] == first["invocation_id"]
    assert after_completion["duplicate"] is True

    found = stack.data(stack.http.get("/invocations", params={"caller_id": "replay-e2e-1"}))
    assert [inv["invocation_id"] for inv in found["invocations"]] == [first["invocation_id"]]
    assert stack.stats()["invokes"]["move"] - before == 1
