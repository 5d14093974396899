"""The tools scope over a real home: a running skill's ToolSpecs and live readiness,
read from a real tokened Gateway through the TaskService's client with the runtime's own
token; a Gateway that goes down (a real closed port) answers the retained read as
``stale``, and with nothing retained the scope fails instead of reading as empty."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome, open_service
from doraforge.paos.tasks import TaskService
from doraforge.registry.context.scopes import ToolsSource
from doraforge.registry.context.scopes.tools import ToolApi
from doraforge.registry.context.source import SourceError, opaque_ref
from doraforge.registry.skill_gateway import SkillGateways
from doraforge.skill_runtime.dora_run import free_port
from doraforge.skill_runtime.gateway_tokens import GatewayTokens
from doraforge.skill_runtime.runtime_state import write_state
from tests.registry.context.scope_support import (
    MOCK_TOOLS,
    RUNTIME_INSTANCE,
    SKILL,
    DataflowRunning,
    install_skill,
    leaks,
    running_on_closed_port,
    running_skill,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def home(tmp_path: Path) -> PaosHome:
    home = PaosHome(tmp_path / "home")
    install_skill(home, tmp_path)
    return home


@pytest.fixture
async def service(home: PaosHome) -> AsyncIterator[TaskService]:
    """The TaskService ``doraforge serve`` opens: clients presenting runtimes' tokens."""
    opened = open_service(home, token_for=GatewayTokens(home.runtime_dir))
    yield opened
    await opened.aclose()
    opened.store.close()


def _source(home: PaosHome, service: TaskService) -> ToolsSource:
    gateways = SkillGateways(home, lambda: DataflowRunning(home))

    def client(url: str) -> ToolApi:
        return service.client(url)

    return ToolsSource(home, gateways.url, client)


async def test_a_running_skills_tools_are_their_kind_and_live_readiness(
    home: PaosHome, service: TaskService, tmp_path: Path
) -> None:
    with running_skill(home) as running:
        snapshot = await _source(home, service).snapshot()
        address = f"127.0.0.1:{running.server.port if running.server else 0}"
    assert snapshot.status == "fresh"
    assert not snapshot.source_truncated
    by_id = {item.metadata["tool_id"]: item for item in snapshot.items}
    assert set(by_id) == set(MOCK_TOOLS)
    echo = by_id["mock.echo"]
    assert echo.ref == opaque_ref("tools", SKILL, "mock.echo")
    assert echo.kind == "tool"
    assert echo.route == "/console/#/tools/mock.echo"
    assert echo.label == "mock.echo (Query): ready"
    assert echo.metadata["runtime_instance_id"] == RUNTIME_INSTANCE
    assert (echo.metadata["skill"], echo.metadata["ready"], echo.metadata["bound"]) == (
        SKILL,
        True,
        True,
    )
    assert {item.metadata["kind"] for item in snapshot.items} == {"Query", "Action", "Session"}
    assert all(len(str(i.metadata["spec_sha256"])) == 64 for i in snapshot.items)
    assert not leaks(snapshot, running.token, address, str(tmp_path), "input_schema")


async def test_a_gateway_that_goes_down_answers_the_retained_read_as_stale(
    home: PaosHome, service: TaskService
) -> None:
    source = _source(home, service)
    with running_skill(home):
        live = await source.snapshot()
    # The server has stopped: its port is closed, the runtime still says running.
    stale = await source.snapshot()
    assert stale.status == "stale"
    assert [i.ref for i in stale.items] == [i.ref for i in live.items]
    assert [i.metadata for i in stale.items] == [i.metadata for i in live.items]


async def test_a_gateway_down_with_nothing_retained_is_a_source_error(
    home: PaosHome, service: TaskService, tmp_path: Path
) -> None:
    running = running_on_closed_port(home, free_port())
    with pytest.raises(SourceError) as caught:
        await _source(home, service).snapshot()
    assert caught.value.code == "CONTEXT_TOOLS_UNREACHABLE"
    assert "SKILL_RUNTIME_UNHEALTHY" in caught.value.message
    assert f"doraforge skill status {SKILL}" in caught.value.message
    for secret in (running.token, str(tmp_path), "127.0.0.1"):
        assert secret not in caught.value.message


async def test_references_are_stable_and_the_scan_cap_is_reported(
    home: PaosHome, service: TaskService
) -> None:
    source = _source(home, service)
    with running_skill(home):
        first, second = await source.snapshot(), await source.snapshot()
        capped = await source.snapshot(limit=2)
    assert [i.ref for i in first.items] == [i.ref for i in second.items]
    assert len(capped.items) == 2
    assert capped.source_truncated


async def test_no_running_skill_is_an_empty_fresh_scope(
    home: PaosHome, service: TaskService
) -> None:
    assert (await _source(home, service).snapshot()).items == ()
    running = running_on_closed_port(home, free_port())
    write_state(home.runtime_dir, running.state.moved("stopped", gateway_token_file=None))
    snapshot = await _source(home, service).snapshot()
    assert snapshot.items == ()
    assert snapshot.status == "fresh"
