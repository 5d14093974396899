"""``task run``'s interrupt rule on a real in-process Gateway: a signal mid-Action cancels
the Action, ends the task ``cancelled`` and says so; a second one during the wait still
ends it, with the unconfirmed Action ``unknown``."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from doraforge.cli.task_interrupt import Interrupted, lines, run_interruptible
from doraforge.gateway.local import LocalProvider
from doraforge.paos.tasks import TaskService
from tests.gateway.harness import mock_handler
from tests.paos.owner_support import OFF, Clock, candidate, mock_service

pytestmark = pytest.mark.anyio

HANG = {"duration_s": 30, "behaviour": "hang"}


@pytest.fixture
def provider() -> LocalProvider:
    return LocalProvider("mock", mock_handler)


@pytest.fixture
async def service(tmp_path: Path, provider: LocalProvider) -> AsyncIterator[TaskService]:
    async with mock_service(tmp_path, Clock(), provider) as service:
        yield service


def signalled(service: TaskService, signum: signal.Signals, then: Callable[[], None]) -> Any:
    """A run that opens a task, starts a hanging move, calls ``then`` and gets ``signum``."""

    async def run(opened: Callable[[str], None]) -> dict[str, Any]:
        task_id = (await service.create_task("move", OFF, candidate()))["task"]["task_id"]
        opened(task_id)
        await service.start_action(task_id, "mock.move", HANG)
        then()
        asyncio.get_running_loop().call_soon(signal.raise_signal, signum)
        await asyncio.Event().wait()  # the move hangs until the signal stops the run
        raise AssertionError("not reached")

    return run


async def test_sigterm_mid_action_cancels_it_and_ends_the_task_cancelled(
    service: TaskService,
) -> None:
    said: list[str] = []
    with pytest.raises(Interrupted) as caught:
        await run_interruptible(
            service, signalled(service, signal.SIGTERM, lambda: None), said.append
        )

    stopped = caught.value
    assert stopped.exit_code == 143
    assert stopped.described is not None
    assert stopped.described["task"]["state"] == "cancelled"
    assert stopped.described["task"]["outcome"]["reason"] == "interrupted"
    (record,) = stopped.described["records"]
    assert record["state"] == "cancelled"  # the provider reported it
    (line,) = lines(stopped, "pick-place")
    assert line.startswith(
        f"task {stopped.task_id} cancelled (interrupted by SIGTERM); "
        "the running mock.move was cancelled; `doraforge task run pick-place` starts"
    )
    assert service.store.active_tasks() == []


async def test_a_second_signal_ends_the_task_at_once_with_the_action_unknown(
    service: TaskService, provider: LocalProvider
) -> None:
    def second_at_cleanup(line: str) -> None:
        if line.startswith("cancelling task"):
            asyncio.get_running_loop().call_soon(signal.raise_signal, signal.SIGINT)

    def silence() -> None:
        provider.silent = True  # nothing will confirm the cancel

    with pytest.raises(Interrupted) as caught:
        await run_interruptible(
            service, signalled(service, signal.SIGINT, silence), second_at_cleanup
        )

    stopped = caught.value
    assert stopped.exit_code == 130
    assert stopped.forced
    assert stopped.described is not None
    assert stopped.described["task"]["state"] == "cancelled"
    (record,) = stopped.described["records"]
    assert record["state"] == "unknown"  # never failed: nobody knows where it stopped
    (line,) = lines(stopped, "pick-place")
    assert "has an unknown outcome" in line
    assert "check the cell before the next run" in line
