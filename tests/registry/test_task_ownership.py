"""A registry owns the tasks its agents open: opening one ends the stale ones (and says
so), a refusal names who holds the slot and when it would be ended, and an orderly stop
ends the tasks the registry owns. Each ended task is audited."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from doraforge.gateway.local import LocalProvider
from doraforge.paos.agent_tools import TOOLS
from doraforge.paos.home import PaosHome
from doraforge.paos.owners import OwnerLocks
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.tasks import TaskService
from doraforge.registry.audit import AuditLog
from doraforge.registry.robot_tools import RobotTools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings, SettingsError, load_settings
from doraforge.registry.task_owner import TaskOwnership
from tests.gateway.harness import mock_handler
from tests.paos.owner_support import OFF, URL, Clock, candidate, mock_service

pytestmark = pytest.mark.anyio

LIMIT_S = 600.0
CREATE = {"goal": "g", "contract": OFF, "gateway_url": f"{URL}:1", "required_tools": ["mock.move"]}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def service(tmp_path: Path, clock: Clock) -> AsyncIterator[TaskService]:
    provider = LocalProvider("mock", mock_handler)
    async with mock_service(tmp_path, clock, provider) as service:
        yield service


@pytest.fixture
def locks(tmp_path: Path) -> OwnerLocks:
    return OwnerLocks(tmp_path / "owners")


async def opened(ownership: TaskOwnership, service: TaskService) -> dict[str, Any]:
    return await ownership.call(TOOLS["forge_task_create"], service, dict(CREATE))


async def test_opening_a_task_ends_one_whose_registry_stopped_and_says_so(
    service: TaskService, locks: OwnerLocks
) -> None:
    earlier = TaskOwnership(OwnerLocks(locks.folder), LIMIT_S)
    await earlier.start(service)
    left = (await opened(earlier, service))["data"]["task"]["task_id"]
    audit = AuditLog()
    ownership = TaskOwnership(locks, LIMIT_S, audit)
    await ownership.start(service)  # the earlier serve still runs: its task is left alone
    assert service.store.task(left).state == "executing"
    earlier.locks.release(str(earlier.owner_id))  # that serve ended without its orderly stop

    answer = await opened(ownership, service)

    assert answer["ok"], answer
    (notice,) = answer["data"]["ended_stale_tasks"]
    assert notice["task_id"] == left
    assert notice["reason"] == "owner_stopped"
    assert service.store.task(left).state == "cancelled"
    new = answer["data"]["task"]["task_id"]
    owner = service.store.task_owner(new)
    assert owner is not None
    assert owner.owner_id == ownership.owner_id
    (entry,) = [r for r in audit.records() if r.get("kind") == "task"]
    assert entry["taskId"] == left
    assert entry["reason"] == "owner_stopped"


async def test_a_task_idle_past_the_limit_is_ended_by_the_next_open(
    service: TaskService, locks: OwnerLocks, clock: Clock
) -> None:
    ownership = TaskOwnership(locks, LIMIT_S)
    await ownership.start(service)
    first = (await opened(ownership, service))["data"]["task"]["task_id"]
    clock.advance(LIMIT_S + 1)

    answer = await opened(ownership, service)

    assert answer["ok"], answer
    assert answer["data"]["ended_stale_tasks"][0]["reason"] == "idle_timeout"
    outcome = service.store.task(first).outcome
    assert outcome is not None
    assert outcome["reason"] == "idle_timeout"


async def test_a_refusal_names_the_live_holder_and_when_it_would_be_ended(
    service: TaskService, locks: OwnerLocks, clock: Clock
) -> None:
    other = TaskOwnership(OwnerLocks(locks.folder), LIMIT_S)  # another serve, still running
    await other.start(service)
    held = (await opened(other, service))["data"]["task"]["task_id"]
    clock.advance(LIMIT_S / 2)
    await other.call(TOOLS["forge_task_get"], service, {"task_id": held})  # its agent acts
    clock.advance(LIMIT_S / 2)
    ownership = TaskOwnership(locks, LIMIT_S)
    await ownership.start(service)

    answer = await opened(ownership, service)

    assert not answer["ok"]
    error = answer["error"]
    assert error["code"] == "PAOS_TASK_ACTIVE"
    assert error["holder"]["owner"] == other.owner_id
    assert error["holder"]["idle_s"] == LIMIT_S / 2  # the get counted
    assert "another registry, still running, holds it" in error["message"]
    assert "idle_timeout" in error["message"]
    assert service.store.task(held).state == "executing"


async def test_an_orderly_stop_ends_the_tasks_this_registry_owns(
    service: TaskService, locks: OwnerLocks
) -> None:
    ownership = TaskOwnership(locks, LIMIT_S)
    await ownership.start(service)
    task_id = (await opened(ownership, service))["data"]["task"]["task_id"]
    owner_id = str(ownership.owner_id)

    (notice,) = await ownership.stop(service)

    assert notice["task_id"] == task_id
    outcome = service.store.task(task_id).outcome
    assert outcome is not None
    assert outcome["reason"] == "owner_stopped"
    assert not OwnerLocks(locks.folder).alive(owner_id)


def test_the_idle_timeout_is_a_setting_with_a_default_and_a_checked_value(
    tmp_path: Path,
) -> None:
    assert load_settings().task_idle_timeout_s == 600.0
    config = tmp_path / "registry.yaml"
    config.write_text("task_idle_timeout_s: 90\n", encoding="utf-8")
    assert load_settings(config=config).task_idle_timeout_s == 90.0
    assert load_settings(config=config, task_idle_timeout_s=5).task_idle_timeout_s == 5.0
    with pytest.raises(SettingsError, match="task_idle_timeout_s"):
        load_settings(task_idle_timeout_s=0)


async def test_the_servers_lifespan_ends_stale_tasks_at_start_and_its_own_at_stop(
    tmp_path: Path, service: TaskService, locks: OwnerLocks
) -> None:
    left = (await service.create_task("left open", OFF, candidate(1)))["task"]["task_id"]
    service.store.own_task(left, "owner_1_gone")  # a serve that was killed
    ownership = TaskOwnership(locks, LIMIT_S)
    robot = RobotTools(PaosHome(tmp_path / "home"), lambda: service, ownership=ownership)
    settings = ServerSettings()
    app = build_app(new_service(settings), settings, robot=robot)

    async with app.router.lifespan_context(app):
        assert service.store.task(left).state == "cancelled"  # ended at start
        answer = await opened(ownership, service)
        mine = answer["data"]["task"]["task_id"]
        assert service.store.task(mine).state == "executing"

    # The stop closed the service's store; another connection reads what it left.
    store = AgentTaskStore(tmp_path / "paos.db")
    outcome = store.task(mine).outcome  # ended by the orderly stop
    store.close()
    assert outcome is not None
    assert outcome["reason"] == "owner_stopped"
