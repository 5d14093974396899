"""The console's Recipes page: shipped in the shell under its CSP, reachable from the nav,
building its DOM as text, and served the operator's ``/api/recipes`` from the console's
own origin (the agent token is refused there)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from doraforge.console.shell import CONTENT_SECURITY_POLICY, static_files
from doraforge.paos.home import PaosHome
from doraforge.registry.settings import ServerSettings
from tests.registry.recipes.support import GRANTS, console_with_recipes, echo_twice
from tests.registry.recipes.test_routes import OPERATOR_TOKEN
from tests.registry.server_support import TOKEN, running

PAGE = "js/pages/recipes.js"
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    settings = ServerSettings(grants=GRANTS, token=TOKEN, operator_token=OPERATOR_TOKEN)
    app, _service = console_with_recipes(PaosHome(tmp_path / "home"), settings, tmp_path / "r")
    with running(app) as base:
        yield base


def test_the_recipes_page_is_shipped_under_the_csp_and_linked_from_the_nav(url: str) -> None:
    script = httpx.get(f"{url}/console/static/{PAGE}", timeout=10)
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert script.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    shell = httpx.get(f"{url}/console/", timeout=10).text
    assert '<a href="#/recipes">Recipes</a>' in shell
    app = static_files()["js/app.js"].decode()
    assert 'import * as recipes from "./pages/recipes.js";' in app
    assert re.search(r"^\s+recipes,$", app, re.MULTILINE)


def test_the_page_builds_text_never_markup_and_calls_only_the_recipe_routes() -> None:
    source = static_files()[PAGE].decode()
    for unsafe in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "eval(",
        "new Function",
        "document.write",
        "http://",
        "https://",
    ):
        assert unsafe not in source, unsafe
    paths = set(re.findall(r"`(/api/[^`$]*)", source)) | set(re.findall(r'"(/api/[^"]*)"', source))
    assert paths == {"/api/recipes", "/api/recipes/"}


def test_from_the_console_origin_the_operator_saves_and_the_agent_is_refused(url: str) -> None:
    origin = {"Origin": url}
    with httpx.Client(base_url=url, headers={**OPERATOR, **origin}, timeout=10) as http:
        assert http.post("/api/recipes", json=echo_twice()).status_code == 201
        listed = http.get("/api/recipes").json()["recipes"]
        assert [(r["name"], r["status"]) for r in listed] == [("recipe.echo-twice", "active")]
    agent = {"Authorization": f"Bearer {TOKEN}", **origin}
    with httpx.Client(base_url=url, headers=agent, timeout=10) as http:
        refused = http.get("/api/recipes/recipe.echo-twice")
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "OPERATOR_REQUIRED"
