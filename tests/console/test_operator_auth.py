"""With an operator token configured, the console is the operator's: on a real home and
socket, every ``/console/api`` route refuses the agent token 403 ``OPERATOR_REQUIRED`` (the
refusal audited) and the guard's Origin check still answers first; the operator token opens
them; the console's API-tools writes (save, probe) are the operator's too while reading
bundles stays open; the static shell still loads without any token."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from doraforge.console import ROUTES
from doraforge.paos.home import PaosHome
from doraforge.registry.service import RegistryService
from doraforge.registry.settings import ServerSettings
from tests.console.support import TOKEN, console_app
from tests.registry.server_support import running

OPERATOR_TOKEN = "console-operator-token-0123456789"
AGENT = {"Authorization": f"Bearer {TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


def _concrete(path: str) -> str:
    for name, value in {
        "{name}": "pick-place",
        "{skill}": "pick-place",
        "{source}": "scene",
        "{tool_id}": "arm.home",
        "{invocation_id}": "inv_1",
        "{task_id}": "task_console0001",
        "{artifact_id}": "art_b",
    }.items():
        path = path.replace(name, value)
    return path


ROUTE_CASES = [
    (method, _concrete(route.path))  # type: ignore[attr-defined]
    for route in ROUTES
    for method in sorted(route.methods)  # type: ignore[attr-defined]
]


@dataclass
class Served:
    client: httpx.Client
    service: RegistryService


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    home = PaosHome(tmp_path_factory.mktemp("console-operator") / "home")
    settings = ServerSettings(
        token=TOKEN, operator_token=OPERATOR_TOKEN, grants=frozenset({"robot.read"})
    )
    app, service = console_app(home, settings)
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield Served(client, service)


def _refused_operator_required(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 403, answer.text
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] == "OPERATOR_REQUIRED"
    return error


@pytest.mark.parametrize(("method", "path"), ROUTE_CASES)
def test_every_console_route_refuses_the_agent_token(
    served: Served, method: str, path: str
) -> None:
    answer = served.client.request(
        method, path, json={} if method == "POST" else None, headers=AGENT
    )
    error = _refused_operator_required(answer)
    assert error["details"]["method"] == method
    audited = served.service.audit.records()[-1]
    assert audited["errorCode"] == "OPERATOR_REQUIRED"
    assert audited["name"].startswith(f"{method} /console/api/")


@pytest.mark.parametrize(("method", "path"), ROUTE_CASES)
def test_the_origin_check_still_answers_before_the_operator_check(
    served: Served, method: str, path: str
) -> None:
    headers = {**AGENT, "Origin": "http://evil.example"}
    answer = served.client.request(method, path, headers=headers)
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"


def test_the_operator_token_opens_the_console(served: Served) -> None:
    session = served.client.get("/console/api/session", headers=OPERATOR)
    assert session.status_code == 200
    assert session.json()["token_required"] is True
    assert session.json()["operator_token_required"] is True
    skills = served.client.get("/console/api/skills", headers=OPERATOR)
    assert skills.status_code == 200
    served.client.get("/console/api/tasks", headers=AGENT)  # refused, and audited
    audit = served.client.get("/console/api/audit", headers=OPERATOR)
    assert audit.status_code == 200
    newest = audit.json()["records"][0]
    assert (newest["name"], newest["errorCode"]) == ("GET /console/api/tasks", "OPERATOR_REQUIRED")


def test_the_api_tools_writes_are_the_operators(served: Served) -> None:
    listed = served.client.get("/api/api-tools", headers=AGENT)
    assert listed.status_code == 200
    saved = served.client.put("/api/api-tools/weather", json={}, headers=AGENT)
    _refused_operator_required(saved)
    probed = served.client.post("/api/api-tools/weather/probe", json={}, headers=AGENT)
    _refused_operator_required(probed)
    # The operator passes the check and reaches the route, which judges the body itself.
    by_operator = served.client.put("/api/api-tools/weather", json={}, headers=OPERATOR)
    assert by_operator.status_code == 422
    assert by_operator.json()["error"]["code"] != "OPERATOR_REQUIRED"


def test_the_static_shell_still_loads_without_a_token(served: Served) -> None:
    page = served.client.get("/console/")
    assert page.status_code == 200
    assert "text/html" in page.headers["content-type"]
