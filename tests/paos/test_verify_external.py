"""The external verifier: one POST of the context, answers mapped, failures inconclusive."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from doraforge.paos.verify import CriterionResult, ExternalCriterion, VerificationContext
from doraforge.paos.verify.external import MAX_RESPONSE_BYTES, ExternalVerifier

pytestmark = pytest.mark.anyio

URL = "https://judge.example/verify"
CRITERION = ExternalCriterion(kind="external", id="judge", url=URL, timeout_s=2.5)
CONTEXT = VerificationContext(
    task_id="task-1",
    revision_id="rev-1",
    binding={"skill_name": "pick_place", "skill_version": "1.0.0"},
    records=[{"record_id": "rec-1", "tool_id": "arm.move_to_pose", "status": "succeeded"}],
    evidence=[
        {
            "artifact_id": "art-1",
            "source": "scene",
            "phase": "after",
            "sha256": "ab" * 32,
            "path": "evidence/art-1.jpg",
            "file": "/home/operator/.paos/evidence/art-1.jpg",
        }
    ],
)


class Recorder:
    """A MockTransport handler that records requests and answers with ``respond``."""

    def __init__(self, respond: Callable[[httpx.Request], httpx.Response]) -> None:
        self.respond = respond
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.respond(request)


async def run(
    respond: Callable[[httpx.Request], httpx.Response],
) -> tuple[CriterionResult, Recorder]:
    recorder = Recorder(respond)
    async with httpx.AsyncClient(transport=httpx.MockTransport(recorder)) as client:
        result = await ExternalVerifier(client).verify(CRITERION, CONTEXT)
    return result, recorder


def answer(body: Any, status: int = 200) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, json=body)


async def test_a_pass_answer_passes_and_the_context_is_posted_once_as_json() -> None:
    result, recorder = await run(answer({"status": "pass", "detail": "looks right"}))

    assert result == CriterionResult("judge", "pass", "looks right", ())
    (request,) = recorder.requests
    assert request.method == "POST"
    assert str(request.url) == URL
    assert request.headers["content-type"] == "application/json"
    body = json.loads(request.content)
    assert body["task_id"] == "task-1"
    assert body["revision_id"] == "rev-1"
    assert body["criterion"]["id"] == "judge"
    assert body["records"][0]["tool_id"] == "arm.move_to_pose"
    assert body["evidence"][0]["path"] == "evidence/art-1.jpg"


async def test_the_absolute_evidence_file_path_is_not_sent() -> None:
    _, recorder = await run(answer({"status": "pass"}))
    assert b"/home/operator" not in recorder.requests[0].content


async def test_the_criterion_timeout_is_applied_to_the_request() -> None:
    _, recorder = await run(answer({"status": "fail"}))
    assert recorder.requests[0].extensions["timeout"]["read"] == 2.5


@pytest.mark.parametrize("status", ["pass", "fail", "inconclusive"])
async def test_each_status_is_mapped(status: str) -> None:
    result, _ = await run(answer({"status": status}))
    assert result.status == status


async def test_only_evidence_refs_from_the_context_are_kept() -> None:
    result, _ = await run(answer({"status": "pass", "evidence_refs": ["art-1", "forged", 7]}))
    assert result.evidence_refs == ("art-1",)


@pytest.mark.parametrize(
    "respond",
    [
        answer({"status": "pass"}, status=500),
        answer({"status": "pass"}, status=302),
        answer({"status": "maybe"}),
        answer(["pass"]),
        lambda request: httpx.Response(200, content=b"<html>pass</html>"),
        lambda request: httpx.Response(200, content=b"{" + b" " * MAX_RESPONSE_BYTES + b"}"),
    ],
    ids=["http-500", "redirect", "unknown-status", "not-an-object", "not-json", "too-large"],
)
async def test_bad_answers_are_inconclusive(respond: Callable[..., httpx.Response]) -> None:
    result, recorder = await run(respond)
    assert result.status == "inconclusive"
    assert len(recorder.requests) == 1


@pytest.mark.parametrize(
    "error",
    [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("x")],
)
async def test_transport_errors_are_inconclusive_and_never_retried(error: Exception) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise error

    result, recorder = await run(fail)

    assert result.status == "inconclusive"
    assert type(error).__name__ in result.detail
    assert len(recorder.requests) == 1


async def test_records_that_are_not_json_are_stringified_not_fatal() -> None:
    odd = VerificationContext(task_id="t", revision_id="r", records=[{"at": object()}])
    recorder = Recorder(answer({"status": "pass"}))
    async with httpx.AsyncClient(transport=httpx.MockTransport(recorder)) as client:
        result = await ExternalVerifier(client).verify(CRITERION, odd)
    assert result.status == "pass"


async def test_without_a_client_an_unreachable_service_is_inconclusive() -> None:
    closed = ExternalCriterion(kind="external", id="judge", url="http://127.0.0.1:1/", timeout_s=2)
    result = await ExternalVerifier().verify(closed, CONTEXT)
    assert result.status == "inconclusive"
