"""AgentTask store faults: before the intent nothing is sent; after it the outcome is unknown.

The faults are real SQLite faults: another connection holding the write lock past the
store's busy timeout ("database is locked"), and a real file-size limit in a child process
("database or disk is full"). The Gateway is a real in-process one with the mock provider.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app
from doraforge.gateway.local import LocalCarrier, LocalProvider
from doraforge.paos.agent_tools import TOOLS, AgentTool
from doraforge.paos.binding import BindingCandidate
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.errors import RecordIndeterminate
from doraforge.paos.store import AgentTaskStore, NewRecord, StoreUnavailable
from doraforge.paos.tasks import TaskService
from tests.gateway.harness import mock_config, mock_handler
from tests.paos.store_support import WriteLock
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1"
QUICK = {"duration_s": 0, "behaviour": "succeed"}
OFF = {"mode": "off", "goal": "move the mock"}
BUSY_TIMEOUT_MS = 50
ROOT = Path(__file__).resolve().parents[2]


class Hooked(httpx.AsyncBaseTransport):
    """Forwards to the app; ``on_answer`` runs once each answer is back, ``lose`` drops it."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.on_answer: Callable[[httpx.Request], None] = lambda request: None
        self.lose: Callable[[httpx.Request], bool] = lambda request: False
        self.posts: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.posts.append(request.url.path)
        response = await self.inner.handle_async_request(request)
        self.on_answer(request)
        if self.lose(request):
            await response.aread()
            raise httpx.ReadTimeout("the answer was lost", request=request)
        return response


def is_move_post(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path.endswith("mock.move:invoke")


@dataclass
class Cell:
    gateway: Gateway
    provider: LocalProvider
    transport: Hooked
    service: TaskService
    lock: WriteLock

    def moves(self) -> int:
        return sum(
            1
            for e in self.provider.received
            if e.message_type == "tool.invoke.request" and e.operation == "move"
        )

    def lock_after(self, which: Callable[[httpx.Request], bool]) -> None:
        """Take the write lock as soon as the answer to a matching request is back."""

        def take(request: httpx.Request) -> None:
            if which(request) and not self.lock.held:
                self.lock.hold()

        self.transport.on_answer = take


@pytest.fixture
async def cell(tmp_path: Path) -> AsyncIterator[Cell]:
    carrier = LocalCarrier()
    gateway = Gateway(mock_config(), send=carrier.send)
    provider = carrier.add(LocalProvider("mock", mock_handler), gateway.on_message)
    provider.register()
    await eventually_async(
        lambda: gateway.registry.current("mock") is not None, what="the mock registered"
    )
    transport = Hooked(httpx.ASGITransport(app=create_app(gateway)))
    path = tmp_path / "paos.db"
    service = TaskService(
        AgentTaskStore(path, busy_timeout_ms=BUSY_TIMEOUT_MS),
        lambda url: ForgeToolClient(url, transport=transport),
        workspace=tmp_path / "workspace",
    )
    lock = WriteLock(path)
    yield Cell(gateway, provider, transport, service, lock)
    lock.release()
    await service.aclose()
    service.store.close()


async def new_task(cell: Cell) -> str:
    candidate = BindingCandidate.adhoc(URL, ["mock.move", "mock.echo"])
    created = await cell.service.create_task("move the mock", OFF, candidate)
    task_id: str = created["task"]["task_id"]
    return task_id


async def gateway_terminal(cell: Cell, caller_id: str) -> None:
    def terminal() -> bool:
        found = cell.gateway.runtime.store.latest_for_caller(caller_id)
        return found is not None and found.terminal

    await eventually_async(terminal, what=f"{caller_id} terminal at the Gateway")


# ---------------------------------------------------------------- store translation


def test_a_locked_store_refuses_a_write_as_retryable_store_unavailable(tmp_path: Path) -> None:
    store = AgentTaskStore(tmp_path / "paos.db", busy_timeout_ms=BUSY_TIMEOUT_MS)
    lock = WriteLock(store.path)
    lock.hold()
    try:
        with pytest.raises(StoreUnavailable) as caught:
            store.put_binding("bind-1", "sha", {"gateway_url": URL})
        assert not isinstance(caught.value, sqlite3.Error)
        assert (caught.value.code, caught.value.retryable) == ("PAOS_STORE_UNAVAILABLE", True)
        assert caught.value.details == {"sqlite_error": "SQLITE_BUSY"}
        assert store.tasks() == []  # readers still read under the lock
    finally:
        lock.release()
    store.put_binding("bind-1", "sha", {"gateway_url": URL})  # no transaction was left open
    assert store.binding("bind-1") == {"gateway_url": URL}
    store.close()


def test_a_full_disk_fails_the_write_and_leaves_the_store_usable(tmp_path: Path) -> None:
    # A real "disk full": the kernel refuses to grow the database files past a size limit.
    path = tmp_path / "paos.db"
    script = textwrap.dedent(
        f"""
        import resource
        from pathlib import Path
        from doraforge.paos.store import AgentTaskStore, StoreUnavailable
        store = AgentTaskStore({str(path)!r})
        store.put_binding("small", "sha", {{"n": 1}})
        largest = max(p.stat().st_size for p in Path({str(tmp_path)!r}).glob("paos.db*"))
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (largest + 4096, hard))
        try:
            store.put_binding("large", "sha", {{"blob": "x" * 1_000_000}})
        except StoreUnavailable as exc:
            assert exc.retryable and exc.code == "PAOS_STORE_UNAVAILABLE", exc
            print(exc.details.get("sqlite_error"))
        else:
            raise SystemExit("a write past the size limit succeeded")
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        store.put_binding("after", "sha", {{"n": 2}})
        store.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_IOERR")
    store = AgentTaskStore(path)
    try:
        assert store.binding("after") == {"n": 2}
        with pytest.raises(LookupError):
            store.binding("large")  # the failed write left nothing behind
    finally:
        store.close()


# ---------------------------------------------------------------- before the intent


async def test_a_store_failure_before_the_intent_is_retryable_and_sends_nothing(cell: Cell) -> None:
    task_id = await new_task(cell)
    cell.lock.hold()
    with pytest.raises(StoreUnavailable) as caught:
        await cell.service.start_action(task_id, "mock.move", QUICK)
    assert caught.value.retryable is True
    assert getattr(caught.value, "remote_state", None) is None
    assert cell.transport.posts == []
    cell.lock.release()
    assert cell.service.store.records(task_id) == []
    started = await cell.service.start_action(task_id, "mock.move", QUICK)  # the retry
    assert started["invocation_id"] is not None
    assert cell.moves() == 1


# ---------------------------------------------------------------- after the intent


@pytest.mark.parametrize("answer", ["arrives", "is lost"])
async def test_a_store_failure_after_the_intent_is_indeterminate_and_reconciled_once(
    cell: Cell, answer: str
) -> None:
    task_id = await new_task(cell)
    cell.lock_after(is_move_post)
    if answer == "is lost":
        cell.transport.lose = is_move_post
    with pytest.raises(RecordIndeterminate) as caught:
        await cell.service.start_action(task_id, "mock.move", QUICK)
    error = caught.value
    assert (error.remote_state, error.retryable) == ("unknown", False)
    assert error.code == "PAOS_RECORD_INDETERMINATE"
    assert isinstance(error.__cause__, StoreUnavailable)
    assert cell.moves() == 1  # the robot may have moved: exactly one dispatch
    cell.lock.release()

    (record,) = cell.service.store.records(task_id)
    assert (record.state, record.invocation_id) == ("intent", None)
    assert error.details["record_id"] == record.record_id
    gateway_view = cell.gateway.runtime.store.latest_for_caller(record.caller_id)
    assert gateway_view is not None
    expected_id = None if answer == "is lost" else gateway_view.invocation_id
    assert error.details["invocation_id"] == expected_id

    await gateway_terminal(cell, record.caller_id)
    (reconciled,) = await cell.service.reconcile(task_id)
    assert reconciled["invocation_id"] == gateway_view.invocation_id  # found by caller_id
    assert reconciled["state"] == "completed"
    assert cell.transport.posts.count("/tools/mock.move:invoke") == 1  # never re-sent
    assert cell.moves() == 1


async def test_a_store_failure_after_a_bound_query_is_sent_is_indeterminate(cell: Cell) -> None:
    task_id = await new_task(cell)
    cell.lock_after(lambda r: r.method == "POST" and r.url.path.endswith("echo:invoke"))
    with pytest.raises(RecordIndeterminate) as caught:
        await cell.service.query("mock.echo", {"message": "hi"}, task_id=task_id)
    assert caught.value.remote_state == "unknown"
    cell.lock.release()
    (record,) = cell.service.store.records(task_id)
    assert record.state == "intent"


# ---------------------------------------------------------------- through the agent tools


async def test_the_start_action_tool_reports_a_store_failure_as_unknown_then_status_finds_it(
    cell: Cell,
) -> None:
    task_id = await new_task(cell)
    cell.lock_after(is_move_post)
    answer = await TOOLS["forge_tool_start_action"](
        cell.service, {"task_id": task_id, "tool_id": "mock.move", "arguments": QUICK}
    )
    cell.lock.release()
    assert answer["ok"] is False
    error = answer["error"]
    assert error["type"] == "RecordIndeterminate"
    assert (error["remote_state"], error["retryable"]) == ("unknown", False)
    (record,) = cell.service.store.records(task_id)
    assert error["record_id"] == record.record_id
    invocation = cell.gateway.runtime.store.latest_for_caller(record.caller_id)
    assert invocation is not None
    assert error["invocation_id"] == invocation.invocation_id
    # Reading the status looks the invocation up by caller_id, without sending anything.
    status = await TOOLS["forge_tool_action_status"](
        cell.service, {"task_id": task_id, "record_id": record.record_id}
    )
    assert status["ok"] is True, status
    assert status["data"]["record"]["invocation_id"] == error["invocation_id"]
    assert status["data"]["invocation"]["caller_id"] == record.caller_id
    assert cell.moves() == 1


async def test_a_status_read_of_a_record_never_admitted_changes_nothing(cell: Cell) -> None:
    task_id = await new_task(cell)
    store = cell.service.store
    store.record_intent(
        NewRecord(
            record_id="rec_lost",
            task_id=task_id,
            revision_id=store.current_revision(task_id).revision_id,
            tool_id="mock.move",
            semantics="action",
            caller_id="paos:lost:1",
            arguments_sha256="a",
            spec_sha256="s",
        )
    )
    status = await cell.service.status(task_id, "rec_lost")
    assert status["invocation"] is None
    assert store.record("rec_lost").state == "intent"  # only reconcile may conclude
    assert cell.transport.posts == []


async def test_an_agent_tool_never_leaks_a_raw_sqlite_or_os_error(cell: Cell) -> None:
    async def broken(_service: TaskService, _arguments: dict[str, Any]) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    tool = AgentTool("forge_test_broken", "raises", {"type": "object"}, broken)
    answer = await tool(cell.service, {})
    assert answer["ok"] is False
    error = answer["error"]
    assert (error["remote_state"], error["retryable"]) == ("unknown", False)
    assert error["code"] == "PAOS_UNCLASSIFIED_FAULT"
    assert "disk I/O error" in error["message"]
