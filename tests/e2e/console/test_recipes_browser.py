"""The Recipes page in a real browser (Debian's chromium through Playwright) on a real
registry with the demo tools: the operator reads a saved recipe, saves another from the
JSON editor, sees a refused definition's code, archives and restores, and reads the
definition and revisions. No skill is started: recipes need only the registry.
The tests run in file order on one signed-in tab."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Locator, Page, expect

from doraforge.paos.home import PaosHome
from doraforge.registry.settings import ServerSettings
from tests.console.support import runtime_of
from tests.e2e.console.conftest import Cell, shot
from tests.registry.recipes.support import GRANTS, big_count, console_with_recipes, echo_twice
from tests.registry.server_support import TOKEN, running

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cell]:
    """This module's cell: the registry and console with the demo tools and one saved
    recipe, no skill (the shared signed-in ``page`` fixture opens it)."""
    tmp = tmp_path_factory.mktemp("recipes-console")
    home = PaosHome(tmp / "home")
    settings = ServerSettings(grants=GRANTS, token=TOKEN)
    app, _service = console_with_recipes(home, settings, tmp / "recipes")
    with running(app) as url:
        served = Cell(url, home, runtime_of(home))
        with served.http() as http:
            assert http.post("/api/recipes", json=echo_twice()).status_code == 201
        yield served


def _row(page: Page, name: str) -> Locator:
    return page.locator(f'#recipes tr[data-recipe="{name}"]')


def test_the_list_shows_a_saved_recipe_as_available_with_its_tools(page: Page) -> None:
    page.click('#nav a[href="#/recipes"]')
    row = _row(page, "recipe.echo-twice")
    expect(row.locator(".recipe-status")).to_have_text("available")
    expect(row).to_contain_text("demo.echo, demo.echo")
    expect(row).to_contain_text("rev 1 of 1")


def test_a_definition_saved_from_the_editor_appears_in_the_list(page: Page) -> None:
    page.fill("#recipe-editor", json.dumps(big_count()))
    page.click("#recipe-save")
    expect(page.locator("#recipe-result")).to_have_text("saved recipe.big-count rev 1")
    expect(_row(page, "recipe.big-count").locator(".recipe-status")).to_have_text("available")


def test_a_refused_definition_shows_its_code_and_saves_nothing(page: Page) -> None:
    write = echo_twice(
        "writer", steps=[{"tool": "demo.write", "arguments": {"value": 1}}], output=[]
    )
    page.fill("#recipe-editor", json.dumps(write))
    page.click("#recipe-save")
    expect(page.locator("#recipe-result")).to_contain_text("RECIPE_WRITE_TOOL")
    page.fill("#recipe-editor", "{not json")
    page.click("#recipe-save")
    expect(page.locator("#recipe-result")).to_contain_text("RECIPE_INVALID")
    expect(_row(page, "recipe.writer")).to_have_count(0)


def test_archive_and_restore_from_the_list(page: Page) -> None:
    row = _row(page, "recipe.big-count")
    row.locator("button.archive").click()
    expect(row.locator(".recipe-status")).to_have_text("archived")
    row.locator("button.restore").click()
    expect(row.locator(".recipe-status")).to_have_text("available")


def test_the_detail_shows_the_definition_and_makes_an_older_revision_active(page: Page) -> None:
    page.fill("#recipe-editor", json.dumps(echo_twice(description="Second revision.")))
    page.click("#recipe-save")
    expect(page.locator("#recipe-result")).to_have_text("saved recipe.echo-twice rev 2")
    _row(page, "recipe.echo-twice").locator("a.recipe-link").click()
    detail = page.locator("#recipe-detail")
    expect(detail.locator("#recipe-definition")).to_contain_text("Second revision.")
    expect(detail.locator("#recipe-definition")).to_contain_text('"$input": "text"')
    detail.locator('tr[data-revision="1"] button.restore-revision').click()
    expect(detail.locator(".recipe-status")).to_have_text("available · rev 1 of 2")
    expect(detail.locator("#recipe-definition")).not_to_contain_text("Second revision.")
    shot(page, "recipes")
