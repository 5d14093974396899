"""``/api/recipes`` over a real socket with an agent and an operator token: the operator
saves, reads, archives and restores; the agent token is refused on every route; every bad
input is a structured 4xx; each write is audited and changes the catalog's ETag; a saved
recipe runs through ``/api/tools/call``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.registry.server import build_app, new_service
from doraforge.registry.service import RegistryService
from doraforge.registry.settings import ServerSettings
from tests.registry.recipes.support import GRANTS, big_count, echo_twice
from tests.registry.server_support import TOKEN, DemoTools, call_body, running

OPERATOR_TOKEN = "operator-token-0123456789abcdef"
AGENT = {"Authorization": f"Bearer {TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
NAME = "recipe.echo-twice"


@dataclass
class Served:
    url: str
    service: RegistryService
    directory: Path

    def client(self, headers: dict[str, str] = OPERATOR) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)


def serve_recipes(directory: Path, **settings: Any) -> Any:
    """The registry app with the demo tools and a recipe library in ``directory``."""
    config = ServerSettings(grants=GRANTS, token=TOKEN, operator_token=OPERATOR_TOKEN, **settings)
    service = new_service(config)
    DemoTools().register(service)
    return build_app(service, config, recipes_dir=directory), service


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    app, service = serve_recipes(tmp_path / "recipes", max_body_bytes=4096)
    with running(app) as url:
        yield Served(url, service, tmp_path / "recipes")


def _error(answer: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["ok"] is False
    error: dict[str, Any] = body["error"]
    assert set(error) == {"code", "message", "retryable", "details"}
    assert error["code"] == code
    return error


def test_the_operator_saves_lists_reads_archives_and_restores(served: Served) -> None:
    with served.client() as http:
        saved = http.post("/api/recipes", json=echo_twice())
        assert saved.status_code == 201
        assert saved.json()["recipe"]["activeRevision"] == 1
        unchanged = http.post("/api/recipes", json=echo_twice())
        assert unchanged.status_code == 200
        assert unchanged.json()["added"] is False
        assert http.post("/api/recipes", json=big_count()).status_code == 201
        listed = http.get("/api/recipes").json()
        assert [r["name"] for r in listed["recipes"]] == ["recipe.big-count", NAME]
        assert {r["status"] for r in listed["recipes"]} == {"active"}
        assert listed["skipped"] == []
        detail = http.get(f"/api/recipes/{NAME}").json()["recipe"]
        assert detail["history"][0]["definition"] == {**echo_twice(), "output": [1, 2]}
        archived = http.post(f"/api/recipes/{NAME}/archive")
        assert archived.json()["recipe"]["status"] == "archived"
        http.post("/api/recipes", json=echo_twice(description="Unarchived by a revision."))
        restored = http.post(f"/api/recipes/{NAME}/restore", json={"revision": 1})
        assert restored.status_code == 200
        assert restored.json()["recipe"]["activeRevision"] == 1
    assert (served.directory / "echo-twice.json").is_file()


def test_the_agent_token_is_refused_on_every_recipe_route_and_audited(served: Served) -> None:
    with served.client() as http:
        assert http.post("/api/recipes", json=echo_twice()).status_code == 201
    routes = [
        ("GET", "/api/recipes", None),
        ("GET", f"/api/recipes/{NAME}", None),
        ("POST", "/api/recipes", big_count()),
        ("POST", f"/api/recipes/{NAME}/archive", None),
        ("POST", f"/api/recipes/{NAME}/restore", None),
    ]
    with served.client(AGENT) as http:
        for method, path, body in routes:
            _error(http.request(method, path, json=body), 403, "OPERATOR_REQUIRED")
    refused = [r for r in served.service.audit.records() if r["errorCode"] == "OPERATOR_REQUIRED"]
    assert len(refused) == len(routes)
    assert served.service.resolve("recipe.big-count") is None
    assert served.service.resolve(NAME) is not None


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        (
            {"steps": [{"tool": "demo.write", "arguments": {"value": 1}}], "output": []},
            "RECIPE_WRITE_TOOL",
        ),
        (
            {"steps": [{"tool": "demo.echo", "arguments": {"text": "x"}}] * 6, "output": []},
            "RECIPE_TOO_MANY_STEPS",
        ),
        ({"steps": [{"tool": "demo.nope", "arguments": {}}], "output": []}, "RECIPE_TOOL_UNKNOWN"),
        ({"input_schema": {"type": "object"}}, "RECIPE_INVALID"),
    ],
)
def test_a_definition_that_may_not_be_saved_is_a_422_with_its_code(
    served: Served, changes: dict[str, Any], code: str
) -> None:
    with served.client() as http:
        _error(http.post("/api/recipes", json=echo_twice(**changes)), 422, code)
        assert http.get("/api/recipes").json()["recipes"] == []


def test_bad_bodies_names_and_revisions_are_structured_4xx_never_5xx(served: Served) -> None:
    with served.client() as http:
        http.post("/api/recipes", json=echo_twice())
        _error(http.post("/api/recipes", json=[1]), 400, "RECIPE_BODY_INVALID")
        _error(http.post("/api/recipes"), 400, "RECIPE_BODY_INVALID")
        bad_json = http.post(
            "/api/recipes",
            content=b'{"name": 1, "name": 2}',
            headers={"content-type": "application/json"},
        )
        assert bad_json.status_code == 400
        text = http.post("/api/recipes", content=b"x", headers={"content-type": "text/plain"})
        assert text.status_code == 415
        huge = {**echo_twice(), "description": "x" * 5000}
        assert http.post("/api/recipes", json=huge).status_code == 413
        _error(http.get("/api/recipes/recipe.nothing"), 404, "RECIPE_NOT_FOUND")
        _error(http.get("/api/recipes/..%2F..%2Fetc"), 404, "NOT_FOUND")  # no such route
        _error(http.get("/api/recipes/Recipe..X"), 404, "RECIPE_NOT_FOUND")
        _error(http.post("/api/recipes/recipe.nothing/archive"), 404, "RECIPE_NOT_FOUND")
        _error(http.post(f"/api/recipes/{NAME}/archive", json={"x": 1}), 400, "RECIPE_BODY_INVALID")
        for body in ({"revision": 0}, {"revision": "1"}, {"revision": True}, {"other": 1}, [1]):
            answer = http.post(f"/api/recipes/{NAME}/restore", json=body)
            _error(answer, 400, "RECIPE_BODY_INVALID")
        _error(
            http.post(f"/api/recipes/{NAME}/restore", json={"revision": 4}),
            409,
            "RECIPE_REVISION_NOT_FOUND",
        )
        _error(http.delete(f"/api/recipes/{NAME}"), 405, "METHOD_NOT_ALLOWED")


def test_each_write_is_audited_with_its_outcome_never_the_definition(served: Served) -> None:
    with served.client() as http:
        http.post("/api/recipes", json=echo_twice(description="marker-in-description"))
        http.post("/api/recipes", json=echo_twice(steps=[{"tool": "demo.write"}], output=[]))
        http.post(f"/api/recipes/{NAME}/archive")
        http.post(f"/api/recipes/{NAME}/restore")
    records = [r for r in served.service.audit.records() if str(r["name"]).startswith("recipes ")]
    assert [(r["name"], r["state"], r["errorCode"], r["principal"]) for r in records] == [
        (f"recipes save {NAME}", "completed", None, "doraforge-operator"),
        (f"recipes save {NAME}", "rejected", "RECIPE_WRITE_TOOL", "doraforge-operator"),
        (f"recipes archive {NAME}", "completed", None, "doraforge-operator"),
        (f"recipes restore {NAME}", "completed", None, "doraforge-operator"),
    ]
    assert "marker-in-description" not in repr(served.service.audit.records())


def _catalog(http: httpx.Client, etag: str | None = None) -> httpx.Response:
    headers = {} if etag is None else {"If-None-Match": etag}
    return http.get("/api/tools", params={"scope": "agent"}, headers=headers)


def test_revision_archive_and_restore_each_change_the_catalog_etag(served: Served) -> None:
    with served.client() as http:
        before = _catalog(http).headers["etag"]
        http.post("/api/recipes", json=echo_twice())
        saved = _catalog(http, before)
        assert saved.status_code == 200
        first = saved.headers["etag"]
        assert _catalog(http, first).status_code == 304
        http.post("/api/recipes", json=echo_twice(description="Revised."))
        revised = _catalog(http, first)
        assert revised.status_code == 200
        second = revised.headers["etag"]
        tool = next(t for t in revised.json()["tools"] if t["name"] == NAME)
        assert tool["origin"]["revision"] == 2
        http.post(f"/api/recipes/{NAME}/archive")
        archived = _catalog(http, second)
        assert archived.status_code == 200
        assert NAME not in [t["name"] for t in archived.json()["tools"]]
        http.post(f"/api/recipes/{NAME}/restore", json={"revision": 1})
        restored = _catalog(http, archived.headers["etag"])
        assert restored.status_code == 200
        assert restored.headers["etag"] not in (second, archived.headers["etag"])
        openai = http.get("/api/tools", params={"scope": "agent", "format": "openai"}).json()
        function = next(
            t["function"] for t in openai["tools"] if t["function"]["name"] == "recipe_echo-twice"
        )
        assert function["description"].endswith(" [local recipe, rev 1]")


def test_a_saved_recipe_runs_through_the_http_call_route(served: Served) -> None:
    with served.client() as http:
        http.post("/api/recipes", json=echo_twice())
    with served.client(AGENT) as http:
        answer = http.post("/api/tools/call", json=call_body(NAME, {"text": "over http"}, "h-1"))
        assert answer.status_code == 200, answer.text
        results = answer.json()["result"]["results"]
        assert [r["result"] for r in results] == [{"text": "over http"}] * 2
        gone = http.post("/api/tools/call", json=call_body("recipe.nothing", {}, "h-2"))
        assert gone.status_code == 403
        assert gone.json()["error"]["code"] == "TOOL_NOT_FOUND"


def test_a_malformed_file_is_listed_as_skipped_and_the_server_still_starts(tmp_path: Path) -> None:
    directory = tmp_path / "recipes"
    directory.mkdir()
    (directory / "broken.json").write_text('{"name": "recipe.broken"')
    app, _service = serve_recipes(directory)
    with running(app) as url, httpx.Client(base_url=url, headers=OPERATOR, timeout=10) as http:
        listed = http.get("/api/recipes").json()
        assert listed["recipes"] == []
        assert listed["skipped"][0]["file"] == "broken.json"
        assert listed["skipped"][0]["code"] == "RECIPE_FILE_INVALID"
        assert http.post("/api/recipes", json=echo_twice()).status_code == 201
