"""The Recipes page in a real browser (Debian's chromium through Playwright) on a real
registry with the demo tools: the operator reads a saved recipe, saves another from the
JSON editor, sees a refused definition's code, archives and restores, and reads the
definition and revisions. No skill is started: recipes need only the registry.
The tests run in file order on one signed-in tab."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect

from doraforge.paos.home import PaosHome
from doraforge.registry.settings import ServerSettings
from tests.registry.recipes.support import GRANTS, big_count, console_with_recipes, echo_twice
from tests.registry.server_support import TOKEN, running

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("recipes-console")
    settings = ServerSettings(grants=GRANTS, token=TOKEN)
    app, _service = console_with_recipes(PaosHome(tmp / "home"), settings, tmp / "recipes")
    with running(app) as url:
        saved = httpx.post(
            f"{url}/api/recipes",
            json=echo_twice(),
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert saved.status_code == 201
        yield url


@pytest.fixture(scope="module")
def page(browser: BrowserContext, base: str) -> Iterator[Page]:
    """One signed-in tab; fails the module on any CSP violation or script error."""
    tab = browser.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on(
        "console",
        lambda message: (
            problems.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    tab.goto(f"{base}/console/#/recipes")
    tab.fill("#token", TOKEN)
    tab.click("#login button[type=submit]")
    tab.wait_for_selector("#nav:not([hidden])")
    yield tab
    tab.close()
    assert problems == []


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
