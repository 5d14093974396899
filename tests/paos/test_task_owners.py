"""Agent tasks end with their owner: stopped or idle past the limit, they are cancelled
with that reason at the next start; a live, recently active one is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from doraforge.gateway.local import LocalProvider
from doraforge.paos import owners
from doraforge.paos.tasks import TaskService
from tests.gateway.harness import mock_handler
from tests.paos.owner_support import OFF, Clock, Owners, candidate, mock_service

pytestmark = pytest.mark.anyio

LIMIT_S = 600.0


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def provider() -> LocalProvider:
    return LocalProvider("mock", mock_handler)


@pytest.fixture
async def service(
    tmp_path: Path, clock: Clock, provider: LocalProvider
) -> AsyncIterator[TaskService]:
    async with mock_service(tmp_path, clock, provider) as service:
        yield service


async def agent_task(service: TaskService, owner_id: str, port: int = 1) -> str:
    created = await service.create_task("move the mock", OFF, candidate(port))
    task_id: str = created["task"]["task_id"]
    service.store.own_task(task_id, owner_id)
    return task_id


async def test_a_task_idle_past_the_limit_is_cancelled_idle_timeout(
    service: TaskService, clock: Clock
) -> None:
    alive = Owners("owner_a")
    task_id = await agent_task(service, "owner_a")
    clock.advance(LIMIT_S + 1)

    (notice,) = await owners.end_stale_tasks(service, alive, idle_timeout_s=LIMIT_S)

    assert notice["task_id"] == task_id
    assert notice["reason"] == "idle_timeout"
    task = service.store.task(task_id)
    assert task.state == "cancelled"
    assert task.outcome is not None
    assert task.outcome["reason"] == "idle_timeout"
    assert service.store.active_tasks() == []


async def test_a_task_whose_owner_stopped_is_cancelled_owner_stopped(
    service: TaskService,
) -> None:
    task_id = await agent_task(service, "owner_gone")

    (notice,) = await owners.end_stale_tasks(service, Owners(), idle_timeout_s=LIMIT_S)

    assert notice == {**notice, "task_id": task_id, "reason": "owner_stopped"}
    outcome = service.store.task(task_id).outcome
    assert outcome is not None
    assert outcome["reason"] == "owner_stopped"


async def test_a_live_recently_active_task_and_an_unowned_one_are_left_alone(
    service: TaskService, clock: Clock
) -> None:
    alive = Owners("owner_a")
    live = await agent_task(service, "owner_a", port=1)
    clock.advance(LIMIT_S - 1)
    service.store.touch_task(live)  # the agent called again: idle starts over
    unowned = (await service.create_task("operator's task", OFF, candidate(2)))["task"]["task_id"]
    clock.advance(LIMIT_S - 1)

    assert await owners.end_stale_tasks(service, alive, idle_timeout_s=LIMIT_S) == []
    assert service.store.task(live).state == "executing"
    assert service.store.task(unowned).state == "executing"


async def test_an_owner_stopping_cancels_the_running_action_it_left(
    service: TaskService,
) -> None:
    task_id = await agent_task(service, "owner_a")
    started = await service.start_action(
        task_id, "mock.move", {"duration_s": 5, "behaviour": "hang"}
    )

    (notice,) = await owners.end_owned_tasks(service, "owner_a", settle_timeout_s=5)

    assert notice["state"] == "cancelled"
    record = service.store.record(started["record_id"])
    assert record.state == "cancelled"  # as the provider reported it
    assert record.cancel is not None  # the Gateway was asked to cancel


async def test_a_cancel_the_provider_never_confirms_ends_the_record_unknown(
    service: TaskService, provider: LocalProvider
) -> None:
    task_id = await agent_task(service, "owner_a")
    started = await service.start_action(
        task_id, "mock.move", {"duration_s": 30, "behaviour": "hang"}
    )
    provider.silent = True  # the provider answers nothing more, the cancel included

    (notice,) = await owners.end_owned_tasks(service, "owner_a", settle_timeout_s=0.2)

    assert notice["state"] == "cancelled"
    assert notice["unknown_records"] == [started["record_id"]]
    record = service.store.record(started["record_id"])
    assert record.state == "unknown"  # never "failed": nobody knows where the arm is
    assert record.error is not None
    assert record.error["code"] == "PAOS_CANCEL_UNCONFIRMED"


def test_owner_locks_tell_a_running_owner_from_one_that_ended(tmp_path: Path) -> None:
    locks = owners.OwnerLocks(tmp_path / "owners")
    mine = locks.claim()
    assert locks.alive(mine)
    # Another process's view: the lock is held while this one runs.
    probe = (
        "import sys; from pathlib import Path; from doraforge.paos.owners import OwnerLocks;"
        "print(OwnerLocks(Path(sys.argv[1])).alive(sys.argv[2]))"
    )
    seen = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "owners"), mine],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ},
    )
    assert seen.stdout.strip() == "True"
    locks.release(mine)
    assert not owners.OwnerLocks(tmp_path / "owners").alive(mine)
    assert not locks.alive("owner_1_nobody")
