"""The runtime scope over a real home: each recorded runtime's state and its Gateway's
identity, live-checked against a real tokened Gateway; a Gateway that is down (a real
closed port) makes the scope ``stale``. Never the token, its file or any other path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from doraforge.paos.home import PaosHome
from doraforge.registry.context.scopes import RuntimeSource
from doraforge.registry.context.source import opaque_ref
from doraforge.skill_runtime.dora_run import free_port
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.runtime_state import write_state
from tests.registry.context.scope_support import (
    SKILL,
    DataflowRunning,
    leaks,
    running_on_closed_port,
    running_skill,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def home(tmp_path: Path) -> PaosHome:
    return PaosHome(tmp_path / "home")


def _source(home: PaosHome) -> RuntimeSource:
    return RuntimeSource(home, lambda: DataflowRunning(home))


async def test_a_running_runtime_is_its_state_and_its_gateways_identity(
    home: PaosHome, tmp_path: Path
) -> None:
    with running_skill(home) as running:
        snapshot = await _source(home).snapshot()
        port = running.server.port if running.server else None
    assert snapshot.status == "fresh"
    (item,) = snapshot.items
    assert item.ref == opaque_ref("runtime", SKILL)
    assert item.label == f"{SKILL} 1.0.0 runtime: running"
    assert item.route == "/console/#/skills"
    metadata = dict(item.metadata)
    assert (metadata["state"], metadata["live_check"], metadata["profile"]) == (
        "running",
        "ok",
        "sim",
    )
    assert metadata["gateway_id"] == running.state.gateway_identity["gateway_id"]  # type: ignore[index]
    assert str(metadata["gateway_instance_id"]).startswith("gwinst-")
    assert metadata["gateway_port"] == port
    assert metadata["runtime_instance_id"] == running.state.runtime_instance_id
    assert not leaks(snapshot, running.token, str(tmp_path), "token", "launch", "http://")


async def test_a_gateway_that_is_down_makes_the_runtime_stale_not_gone(home: PaosHome) -> None:
    running = running_on_closed_port(home, free_port())
    snapshot = await _source(home).snapshot()
    assert snapshot.status == "stale"
    (item,) = snapshot.items
    assert item.metadata["state"] == "running"
    assert item.metadata["live_check"] == "failed: SKILL_RUNTIME_UNHEALTHY"
    assert item.metadata["gateway_id"] == "gone"
    # The live check's message names the Gateway URL; only its code is kept.
    assert not leaks(snapshot, running.token, "does not answer", "127.0.0.1")


async def test_a_live_check_that_cannot_be_made_reports_the_recorded_state_as_stale(
    home: PaosHome,
) -> None:
    running_on_closed_port(home, free_port())

    class Busy:
        def status(self, name: str) -> Any:
            raise RuntimeStateError("SKILL_RUNTIME_BUSY", f"{home.root}: busy", retryable=True)

    snapshot = await RuntimeSource(home, Busy).snapshot()
    assert snapshot.status == "stale"
    assert snapshot.items[0].metadata["live_check"] == "failed: SKILL_RUNTIME_BUSY"
    assert not leaks(snapshot, str(home.root))


async def test_a_stopped_runtime_needs_no_live_check_and_is_fresh(home: PaosHome) -> None:
    running = running_on_closed_port(home, free_port())
    write_state(home.runtime_dir, running.state.moved("stopped", gateway_token_file=None))
    snapshot = await _source(home).snapshot()
    assert snapshot.status == "fresh"
    assert snapshot.items[0].metadata["state"] == "stopped"


async def test_references_are_stable_and_the_scan_cap_is_reported(home: PaosHome) -> None:
    running = running_on_closed_port(home, free_port())
    other = running.state.model_copy(update={"name": "robot-arm", "state": "stopped"})
    write_state(home.runtime_dir, other)
    source = _source(home)
    first, second = await source.snapshot(), await source.snapshot()
    assert [i.ref for i in first.items] == [i.ref for i in second.items]
    assert len(first.items) == 2
    assert not first.source_truncated
    capped = await source.snapshot(limit=1)
    assert len(capped.items) == 1
    assert capped.source_truncated


async def test_a_home_that_never_started_a_skill_has_no_runtimes(home: PaosHome) -> None:
    snapshot = await _source(home).snapshot()
    assert snapshot.items == ()
    assert snapshot.status == "fresh"
