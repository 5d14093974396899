"""``doraforge serve``'s context sources: one per scope over the real home, the console's
page table and this very parser's commands; every scope reads a real home without a
path or a token in what it returns."""

from __future__ import annotations

from pathlib import Path

import pytest

from doraforge.cli import _subparsers, build_parser
from doraforge.cli.context import Context
from doraforge.cli.context_sources import build
from doraforge.cli.output import Output
from doraforge.console.navigation import PAGES
from doraforge.paos.home import PaosHome, open_service
from doraforge.registry.context.source import SCOPES, ContextSource
from doraforge.registry.robot_tools import RobotTools
from doraforge.skill_runtime.gateway_tokens import GatewayTokens
from tests.registry.context.scope_support import (
    MOCK_TOOLS,
    DataflowRunning,
    install_skill,
    leaks,
    recorded_tasks,
    running_skill,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def ctx(tmp_path: Path) -> Context:
    home = PaosHome(tmp_path / "home")
    install_skill(home, tmp_path)
    recorded_tasks(home, 1)
    return Context(home, Output(as_json=True), {"DORAFORGE_GATEWAY_TOKEN": "operator-secret-0"})


def test_every_scope_has_its_source(ctx: Context) -> None:
    sources = build(ctx)
    assert tuple(sources) == SCOPES
    for scope, source in sources.items():
        typed: ContextSource = source
        assert typed.scope == scope


async def test_navigation_has_every_console_page_and_every_command_of_the_parser(
    ctx: Context,
) -> None:
    snapshot = await build(ctx)["navigation"].snapshot()
    routes = {item.route: item for item in snapshot.items}
    pages = {item.route for item in snapshot.items if item.kind == "page"}
    assert pages == {page.route for page in PAGES}
    commands = {item.route for item in snapshot.items if item.kind == "command"}
    assert commands == {child.prog for child in _subparsers(build_parser())}
    start = routes["doraforge skill start"]
    assert start.label == "doraforge skill start"
    assert "skill start" in start.aliases
    assert "start the skill's runtime on Dora" in start.text
    assert routes["doraforge skill"].metadata["sections"].startswith("pack, install")  # type: ignore[union-attr]
    assert not snapshot.source_truncated


async def test_every_scope_reads_the_real_home_without_a_path_or_a_token(
    ctx: Context, tmp_path: Path
) -> None:
    for scope, source in build(ctx).items():
        snapshot = await source.snapshot()
        assert snapshot.status == "fresh", scope
        assert not leaks(snapshot, str(tmp_path), "operator-secret-0"), scope
    sources = build(ctx)
    assert len((await sources["skills"].snapshot()).items) == 1
    assert len((await sources["tasks"].snapshot()).items) == 1
    assert len((await sources["evidence"].snapshot()).items) == 2
    assert (await sources["tools"].snapshot()).items == ()  # no skill runs


async def test_the_tools_scope_reads_through_the_servers_own_robot_tools(ctx: Context) -> None:
    service = open_service(ctx.home, token_for=GatewayTokens(ctx.home.runtime_dir))
    opened: list[object] = []

    def task_service() -> object:
        opened.append(service)
        return service

    robot = RobotTools(ctx.home, task_service, lambda: DataflowRunning(ctx.home))
    try:
        with running_skill(ctx.home) as running:
            snapshot = await build(ctx, robot)["tools"].snapshot()
    finally:
        await service.aclose()
        service.store.close()
    assert opened  # the server's TaskService and its clients, not a second set
    assert snapshot.status == "fresh"
    assert {item.metadata["tool_id"] for item in snapshot.items} == set(MOCK_TOOLS)
    assert not leaks(snapshot, running.token)
