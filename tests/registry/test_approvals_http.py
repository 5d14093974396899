"""``/api/approvals`` on a real socket: a waiting call is listed with the contract's fields,
approve releases it, deny answers the caller 403 ``denied`` with the reason, a client that
disconnects withdraws it; bad input is 400, unknown ids 404, repeated decisions 409, and
every route needs the token."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.openapi.utils import get_openapi

from doraforge.registry.http import ROUTES
from doraforge.registry.server import build_app, new_service
from doraforge.registry.service import RegistryService
from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import TOKEN, DemoTools, call_body, running
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

TOOL = "demo.arm"
#: The name tools/list shows, and so the name an operator reads in the record.
LISTED = "demo_arm"
FIELDS = {
    "id", "tool", "version", "arguments", "fingerprint", "caller", "risk",
    "requested_at", "expires_at", "state", "reason", "decided_at",
}  # fmt: skip
BEARER = {"Authorization": f"Bearer {TOKEN}"}


class Arm:
    """A high-risk write that records each run."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    async def __call__(self, arguments: dict[str, Any]) -> dict[str, Any]:
        self.runs.append(arguments)
        return {"moved_to": arguments["x"]}

    def entry(self) -> dict[str, Any]:
        schema = {
            "type": "object",
            "additionalProperties": False,
            "required": ["x"],
            "properties": {"x": {"type": "number"}, "api_key": {"type": "string"}},
        }
        return {
            "name": TOOL,
            "providerName": LISTED,
            "description": "Move the demo arm (high risk).",
            "input_schema": schema,
            "output_schema": {"type": "object"},
            "policy": {
                "scopes": ["agent", "ui"],
                "requiredCapabilities": ["robot.write"],
                "sideEffect": "write",
                "idempotent": False,
                "risk": "high",
            },
        }


@pytest.fixture
def arm() -> Arm:
    return Arm()


@contextlib.contextmanager
def approvals_server(settings: ServerSettings, arm: Arm) -> Iterator[tuple[str, RegistryService]]:
    """A registry on a free port that asks operators, with the demo tools and ``arm``."""
    service = new_service(settings)
    service.ask_operators(settings.approval_timeout_s)
    DemoTools().register(service)
    service.register(arm.entry(), arm)
    with running(build_app(service, settings)) as url:
        yield url, service


@pytest.fixture
def base(arm: Arm) -> Iterator[str]:
    settings = ServerSettings(grants=frozenset({"robot.read", "robot.write"}), token=TOKEN)
    with approvals_server(settings, arm) as (url, _service):
        yield url


def _client(base: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base, headers=BEARER, timeout=30.0)


def _call(client: httpx.AsyncClient, request_id: str, **arguments: Any) -> asyncio.Task[Any]:
    body = call_body(TOOL, arguments, request_id)
    headers = {"Idempotency-Key": request_id}
    return asyncio.create_task(client.post("/api/tools/call", json=body, headers=headers))


async def _pending(client: httpx.AsyncClient, count: int = 1) -> list[dict[str, Any]]:
    async def listed() -> list[dict[str, Any]] | None:
        answer = await client.get("/api/approvals", params={"state": "pending"})
        approvals: list[dict[str, Any]] = answer.json()["approvals"]
        return approvals if len(approvals) == count else None

    return await eventually_async(listed, within=10.0, what=f"{count} pending approval(s)")


async def test_an_approved_call_is_listed_then_runs_and_answers_its_caller(
    base: str, arm: Arm
) -> None:
    async with _client(base) as client:
        waiting = _call(client, "r-1", x=0.25, api_key="k-secret")
        (record,) = await _pending(client)
        assert set(record) == FIELDS
        assert record["arguments"] == {"x": 0.25, "api_key": "[REDACTED]"}
        # The one token is the agent token: its caller is the agent principal.
        shown = (record["tool"], record["risk"], record["caller"])
        assert shown == (LISTED, "high", "doraforge-agent")
        assert record["requested_at"].endswith("Z")
        assert record["expires_at"].endswith("Z")
        one = await client.get(f"/api/approvals/{record['id']}")
        assert one.json() == record
        approved = await client.post(
            f"/api/approvals/{record['id']}/approve", json={"reason": "cell is clear"}
        )
        answer = await waiting
        again = await client.post(
            f"/api/approvals/{record['id']}/deny", json={"reason": "changed my mind"}
        )
        listed = (await client.get("/api/approvals", params={"state": "approved"})).json()
    assert approved.status_code == 200
    assert (approved.json()["state"], approved.json()["reason"]) == ("approved", "cell is clear")
    assert answer.status_code == 200
    assert answer.json()["state"] == "completed"
    assert answer.json()["result"] == {"moved_to": 0.25}
    assert arm.runs == [{"x": 0.25, "api_key": "k-secret"}]
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "APPROVAL_NOT_PENDING"
    assert set(again.json()["error"]) == {"code", "message", "retryable", "details"}
    assert [a["id"] for a in listed["approvals"]] == [record["id"]]


async def test_a_denied_call_answers_its_caller_403_denied_with_the_reason(
    base: str, arm: Arm
) -> None:
    async with _client(base) as client:
        waiting = _call(client, "r-1", x=0.9)
        (record,) = await _pending(client)
        denied = await client.post(
            f"/api/approvals/{record['id']}/deny", json={"reason": "someone is in the cell"}
        )
        answer = await waiting
    assert denied.json()["state"] == "denied"
    assert answer.status_code == 403
    body = answer.json()
    assert body["state"] == "denied"
    assert body["error"]["code"] == "TOOL_APPROVAL_DENIED"
    assert body["error"]["details"]["reason"] == "someone is in the cell"
    assert arm.runs == []


async def test_a_client_that_disconnects_withdraws_its_pending_approval(
    base: str, arm: Arm
) -> None:
    async with _client(base) as client:
        async with _client(base) as leaving:
            waiting = _call(leaving, "r-1", x=0.5)
            (record,) = await _pending(client)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting

        async def withdrawn() -> bool:
            answer = await client.get(f"/api/approvals/{record['id']}")
            return bool(answer.json()["state"] == "withdrawn")

        await eventually_async(withdrawn, within=10.0, what="the approval to be withdrawn")
        replay = await client.get("/api/tools/calls/r-1")
    assert replay.json()["error"]["code"] == "TOOL_APPROVAL_WITHDRAWN"
    assert arm.runs == []


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"reason": ""}, "APPROVAL_REASON_REQUIRED"),
        ({"reason": "  "}, "APPROVAL_REASON_REQUIRED"),
        ({}, "APPROVAL_REASON_REQUIRED"),
        (None, "APPROVAL_DECISION_INVALID"),
        ({"reason": "ok", "extra": 1}, "APPROVAL_DECISION_INVALID"),
    ],
)
async def test_a_decision_without_a_plain_reason_is_400_and_changes_nothing(
    base: str, body: Any, code: str
) -> None:
    async with _client(base) as client:
        waiting = _call(client, "r-1", x=0.1)
        (record,) = await _pending(client)
        refused = await client.post(f"/api/approvals/{record['id']}/approve", json=body)
        still = (await client.get(f"/api/approvals/{record['id']}")).json()
        await client.post(f"/api/approvals/{record['id']}/deny", json={"reason": "cleanup"})
        await waiting
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == code
    assert still["state"] == "pending"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/approvals/apr_000000000000000000000000"),
        ("GET", "/api/approvals/not-an-id"),
        ("POST", "/api/approvals/apr_000000000000000000000000/approve"),
        ("POST", "/api/approvals/../deny"),
    ],
)
async def test_an_unknown_approval_is_404(base: str, method: str, path: str) -> None:
    async with _client(base) as client:
        answer = await client.request(method, path, json={"reason": "why"})
    assert answer.status_code == 404
    assert answer.json()["ok"] is False
    assert answer.json()["error"]["code"] in {"APPROVAL_NOT_FOUND", "NOT_FOUND"}


@pytest.mark.parametrize("query", ["state=maybe", "status=pending", "state=pending&state=denied"])
async def test_a_bad_list_query_is_400(base: str, query: str) -> None:
    async with _client(base) as client:
        answer = await client.get(f"/api/approvals?{query}")
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "INVALID_QUERY"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/approvals"),
        ("GET", "/api/approvals/apr_000000000000000000000000"),
        ("POST", "/api/approvals/apr_000000000000000000000000/approve"),
        ("POST", "/api/approvals/apr_000000000000000000000000/deny"),
    ],
)
async def test_every_approval_route_needs_the_token(base: str, method: str, path: str) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=10.0) as anonymous:
        missing = await anonymous.request(method, path, json={"reason": "why"})
        wrong = await anonymous.request(
            method, path, json={"reason": "why"}, headers={"Authorization": "Bearer " + "x" * 26}
        )
    assert (missing.status_code, wrong.status_code) == (401, 401)


def test_the_openapi_document_describes_the_approval_routes() -> None:
    document = get_openapi(title="doraforge registry", version="1", routes=ROUTES)
    paths = document["paths"]
    listing = paths["/api/approvals"]["get"]
    assert [p["name"] for p in listing["parameters"]] == ["state"]
    decided = paths["/api/approvals/{approval_id}/approve"]["post"]
    assert {"200", "400", "401", "404", "409"} <= set(decided["responses"])
    assert decided["requestBody"]["content"]["application/json"]["schema"]["required"] == ["reason"]
    assert "/api/approvals/{approval_id}/deny" in paths
    assert "/api/approvals/{approval_id}" in paths
    record = decided["responses"]["200"]["content"]["application/json"]["schema"]
    assert set(record["required"]) == FIELDS
