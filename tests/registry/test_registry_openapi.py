"""The registry serves its OpenAPI document at ``/openapi.json`` on a real socket, behind
the transport guard (401 without the token, 403 from a foreign Origin), generated without
a warning (every operation has its own id, ``/mcp`` GET and DELETE included), and
describing the tools and approvals routes with their error statuses."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import TOKEN, demo_app, running

BEARER = {"Authorization": f"Bearer {TOKEN}"}
OPERATOR_TOKEN = "openapi-operator-token-0123456789"


@pytest.fixture
def base() -> Iterator[str]:
    settings = ServerSettings(token=TOKEN, operator_token=OPERATOR_TOKEN, mcp_enabled=True)
    with running(demo_app(settings)) as url:
        yield url


@pytest.fixture
def document(base: str) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a duplicate operation id would warn on the server
        answer = httpx.get(f"{base}/openapi.json", headers=BEARER, timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = answer.json()
    return body


def test_the_document_needs_the_token(base: str) -> None:
    anonymous = httpx.get(f"{base}/openapi.json", timeout=10)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "AUTH_REQUIRED"
    foreign = httpx.get(
        f"{base}/openapi.json", headers={**BEARER, "Origin": "http://evil.example"}, timeout=10
    )
    assert foreign.status_code == 403
    assert foreign.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"


def test_every_operation_has_its_own_id(document: dict[str, Any]) -> None:
    ids = [
        operation["operationId"]
        for item in document["paths"].values()
        for operation in item.values()
    ]
    assert len(ids) == len(set(ids))
    assert {"mcp_get", "mcp_delete"} <= set(ids)
    assert set(document["paths"]["/mcp"]) == {"get", "post", "delete"}


def test_the_tools_routes_are_described_with_their_errors(document: dict[str, Any]) -> None:
    paths = document["paths"]
    assert {"200", "304", "400", "401"} <= set(paths["/api/tools"]["get"]["responses"])
    call = paths["/api/tools/call"]["post"]["responses"]
    assert {"200", "400", "401", "403", "413", "415", "503"} <= set(call)
    assert "REGISTRY_STOPPING" in call["503"]["description"]
    retained = paths["/api/tools/calls/{request_id}"]["get"]["responses"]
    assert {"200", "401", "404"} <= set(retained)
    error = call["400"]["content"]["application/json"]["schema"]
    assert error["properties"]["error"]["required"] == ["code", "message", "retryable", "details"]


def test_the_approvals_routes_are_described_with_their_errors(document: dict[str, Any]) -> None:
    paths = document["paths"]
    assert {"200", "400", "401"} <= set(paths["/api/approvals"]["get"]["responses"])
    assert {"200", "401", "404"} <= set(paths["/api/approvals/{approval_id}"]["get"]["responses"])
    for decision in ("approve", "deny"):
        responses = paths[f"/api/approvals/{{approval_id}}/{decision}"]["post"]["responses"]
        assert {"200", "400", "401", "403", "404", "409"} <= set(responses)
        assert "OPERATOR_REQUIRED" in responses["403"]["description"]


def test_operator_writes_keep_their_documented_operation(tmp_path: Path) -> None:
    from doraforge.registry.server import build_app, new_service

    settings = ServerSettings(token=TOKEN, operator_token=OPERATOR_TOKEN)
    app = build_app(new_service(settings), settings, recipes_dir=tmp_path / "recipes")
    operation = app.openapi()["paths"]["/api/recipes"]["post"]
    assert operation["summary"] == "Save a recipe (a new active revision)"
