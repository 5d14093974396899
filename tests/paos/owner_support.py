"""A TaskService on an in-process Gateway with the mock provider, its store on a clock the
test moves, and owner liveness the test sets: for the task-owner rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app
from doraforge.gateway.local import LocalCarrier, LocalProvider
from doraforge.paos.binding import BindingCandidate
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.tasks import TaskService
from tests.gateway.harness import mock_config
from tests.support.waiting import eventually_async

URL = "http://127.0.0.1"
OFF = {"mode": "off", "goal": "move the mock"}


class Clock:
    """The store's clock, moved by hand."""

    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def __call__(self) -> int:
        return self.ms

    def advance(self, seconds: float) -> None:
        self.ms += int(seconds * 1000)


class Owners:
    """Owner liveness as a test sets it."""

    def __init__(self, *running: str) -> None:
        self.running = set(running)

    def alive(self, owner_id: str) -> bool:
        return owner_id in self.running


@asynccontextmanager
async def mock_service(
    tmp_path: Path, clock: Clock, provider: LocalProvider
) -> AsyncIterator[TaskService]:
    """A TaskService whose Gateway runs ``provider``, on per-runtime task slots."""
    carrier = LocalCarrier()
    gateway = Gateway(mock_config(), send=carrier.send)
    carrier.add(provider, gateway.on_message).register()
    await eventually_async(
        lambda: gateway.registry.current("mock") is not None, what="the mock registered"
    )
    transport = httpx.ASGITransport(app=create_app(gateway))
    service = TaskService(
        AgentTaskStore(tmp_path / "paos.db", clock_ms=clock),
        lambda url: ForgeToolClient(url, transport=transport),
        workspace=tmp_path / "workspace",
    )
    service.store.set_task_slots("per_runtime")
    try:
        yield service
    finally:
        await service.aclose()
        service.store.close()


def candidate(port: int = 1) -> BindingCandidate:
    """An ad hoc binding on its own runtime, so several tasks can be active at once."""
    return BindingCandidate.adhoc(f"{URL}:{port}", ["mock.move"])
