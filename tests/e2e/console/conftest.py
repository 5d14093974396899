"""The console against a real cell: the sim skill on a free Gateway port, the registry and
console on a live socket with a token, Debian's chromium driven by Playwright, and an
official MCP SDK client as the agent. Everything started here is stopped here."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import BrowserContext, Page, sync_playwright

from doraforge.paos.home import PaosHome
from doraforge.registry.settings import ServerSettings
from doraforge.skill_runtime.archive import pack
from doraforge.skill_runtime.dora_run import free_port
from doraforge.skill_runtime.installer import Installer
from doraforge.skill_runtime.runtime import RuntimeManager
from tests.console.support import TOKEN, console_app, runtime_of
from tests.e2e.sim_skill import SKILL, SOURCE
from tests.paths import PROJECT_ROOT
from tests.registry.server_support import running
from tests.support.skill_copies import skill_on_port

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = PROJECT_ROOT / "docs" / "screenshots"
#: How long a high-risk call waits for the operator in these tests (then it is denied).
APPROVAL_TIMEOUT_S = 90.0
AGENT_CALL_TIMEOUT_S = 120.0
#: The API tool's credential: configured on the server, never shown by the console.
WEATHER_KEY = "wk-0123456789abcdef"


@dataclass
class Cell:
    """The served console and what it runs on."""

    base: str
    home: PaosHome
    runtime: RuntimeManager

    def http(self) -> httpx.Client:
        """A client of the server presenting the operator's token."""
        return httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30.0
        )


def _stop(runtime: RuntimeManager) -> None:
    state = runtime.status(SKILL)
    if state is None or not state.live:
        return
    try:
        runtime.stop(SKILL)
    except Exception:  # a guard tripped by a failed run: stop anyway, audited
        runtime.stop(SKILL, force=True)


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cell]:
    """The sim skill installed (not started: the browser starts it) and the console served."""
    tmp = tmp_path_factory.mktemp("console-cell")
    home = PaosHome(tmp / "home")
    # The browser starts the skill from the Skills page at the manifest's port: the copy
    # names a free one instead of the shipped 9201.
    source = skill_on_port(SOURCE, tmp / "source" / SKILL, free_port())
    packed = pack(source, tmp / f"{SKILL}.tar.gz")
    Installer(home).install(str(packed.path), yes=True)
    runtime = runtime_of(home)
    settings = ServerSettings(
        token=TOKEN,
        grants=frozenset({"robot.read", "robot.write"}),
        mcp_enabled=True,
        approval_timeout_s=APPROVAL_TIMEOUT_S,
        # The API-tools page's bundle names this host; the probe renders, it never dials.
        outbound={"default": "deny", "external": ["api.example.com"]},
        secrets={"WEATHER_KEY": WEATHER_KEY},
    )
    app, _service = console_app(home, settings, runtime)
    try:
        with running(app) as base:
            yield Cell(base, home, runtime)
    finally:
        _stop(runtime)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """Debian's chromium with a fresh profile; Playwright's own browsers are never used."""
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1360, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="module")
def page(browser: BrowserContext, cell: Cell) -> Iterator[Page]:
    """One tab on the console, signed in with the token; fails the module on any CSP
    violation or script error the page reports."""
    tab = browser.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on(
        "console",
        lambda message: (
            problems.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    tab.goto(f"{cell.base}/console/")
    tab.fill("#token", TOKEN)
    tab.click("#login button[type=submit]")
    tab.wait_for_selector("#nav:not([hidden])")
    yield tab
    tab.close()
    assert problems == []


def shot(page: Page, name: str) -> Path:
    """Write the page's screenshot to docs/screenshots/<name>.png (the README shows them)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


class Agent:
    """An official MCP SDK client of the served registry, run on its own thread so the
    browser can decide while one of its calls waits for approval."""

    def __init__(self, base: str) -> None:
        self.url = f"{base}/mcp"
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agent")

    def submit(self, name: str, arguments: dict[str, Any]) -> concurrent.futures.Future[Any]:
        """Call ``name`` in a fresh session; the future holds the ``CallToolResult``."""
        return self._pool.submit(asyncio.run, self._call(name, arguments))

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return self.submit(name, arguments).result(AGENT_CALL_TIMEOUT_S)

    def _call(self, name: str, arguments: dict[str, Any]) -> Coroutine[Any, Any, Any]:
        async def run() -> Any:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            timeout = httpx.Timeout(AGENT_CALL_TIMEOUT_S)
            async with (
                httpx.AsyncClient(headers=headers, timeout=timeout) as http,
                streamable_http_client(self.url, http_client=http) as (read, write, _sid),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await session.call_tool(name, arguments)

        return run()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def agent(cell: Cell) -> Iterator[Agent]:
    client = Agent(cell.base)
    with contextlib.closing(client):
        yield client
