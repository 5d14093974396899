"""The operator switches a built-in on and off live over ``/api/builtins`` on a real
socket: the catalog and its ETag follow at once, calls of a switched-off built-in answer
``TOOL_NOT_FOUND``, the agent token is refused, an unknown name is a structured 404, and
each switch is an audit record."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import TOKEN, call_body, running

OPERATOR_TOKEN = "builtins-operator-token-0123456789"
AGENT = {"Authorization": f"Bearer {TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture
def served() -> Iterator[tuple[str, Any]]:
    settings = ServerSettings(
        grants=frozenset({"builtin.read"}),
        token=TOKEN,
        operator_token=OPERATOR_TOKEN,
        builtins={"enabled": ["calculator"]},
    )
    service = new_service(settings)
    with running(build_app(service, settings)) as base:
        yield base, service


def _catalog(base: str) -> tuple[set[str], str]:
    answer = httpx.get(f"{base}/api/tools", headers=AGENT, timeout=10)
    assert answer.status_code == 200
    return {tool["name"] for tool in answer.json()["tools"]}, answer.headers["etag"]


def _calculate(base: str, request_id: str) -> dict[str, Any]:
    body = call_body("calculator", {"expression": "6 * 7"}, request_id)
    answer = httpx.post(f"{base}/api/tools/call", json=body, headers=AGENT, timeout=10)
    assert answer.status_code < 500
    result: dict[str, Any] = answer.json()
    return result


def test_a_builtin_leaves_and_rejoins_the_catalog_live(served: tuple[str, Any]) -> None:
    base, service = served
    names, before = _catalog(base)
    assert "builtin.calculator" in names
    assert "builtin.web_search" not in names
    assert _calculate(base, "b-1")["result"]["value"] == 42

    off = httpx.delete(f"{base}/api/builtins/calculator", headers=OPERATOR, timeout=10)
    assert off.status_code == 200
    assert off.json()["wasEnabled"] is True
    names, after_off = _catalog(base)
    assert "builtin.calculator" not in names
    assert after_off != before
    assert _calculate(base, "b-2")["error"]["code"] == "TOOL_NOT_FOUND"

    on = httpx.put(f"{base}/api/builtins/web_search", headers=OPERATOR, timeout=10)
    assert on.status_code == 200
    assert on.json()["tool"] == "builtin.web_search"
    states = httpx.get(f"{base}/api/builtins", headers=OPERATOR, timeout=10).json()["builtins"]
    assert {s["name"]: s["enabled"] for s in states} == {
        "calculator": False,
        "http_fetch": False,
        "web_search": True,
    }
    assert "builtin.web_search" in _catalog(base)[0]
    labels = [record["name"] for record in service.audit.records()]
    assert "builtins disable calculator" in labels
    assert "builtins enable web_search" in labels


def test_the_switch_is_the_operators_and_names_only_builtins(served: tuple[str, Any]) -> None:
    base, _service = served
    refused = httpx.delete(f"{base}/api/builtins/calculator", headers=AGENT, timeout=10)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "OPERATOR_REQUIRED"
    assert "builtin.calculator" in _catalog(base)[0]
    unknown = httpx.put(f"{base}/api/builtins/shell", headers=OPERATOR, timeout=10)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "BUILTIN_NOT_FOUND"
    assert unknown.json()["error"]["details"]["builtins"] == [
        "calculator",
        "http_fetch",
        "web_search",
    ]
