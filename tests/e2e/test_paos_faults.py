"""PAOS under faults, against a real ``dora run dataflows/mock.yml`` over real sockets.

* The PAOS process is killed between its intent and the POST, and between the POST and
  reading the answer; another process then reconciles by reading only.
* The Gateway node dies mid-Action and Dora restarts it: the record reads ``unknown``, the
  changed runtime refuses new Actions before any POST, and finalize fails the task.
* The answer to an admission POST never arrives (a real client read timeout): the record is
  indeterminate, the provider saw one dispatch, and reconcile finds it by ``caller_id``.

``mock.stats`` counts what the provider received; a recording transport lists every
request PAOS sent, so "never POSTs again" is checked on both sides of the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from doraforge.paos.binding import BindingCandidate, BindingError
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.errors import ForgeTimeout
from doraforge.paos.finalize import finalize
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.store.models import TERMINAL_RECORD_STATES
from doraforge.paos.tasks import TaskService
from tests.e2e.conftest import MockStack
from tests.support.waiting import eventually, eventually_async

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ["mock.move", "mock.stats"]
OFF = {"mode": "off", "goal": "move the mock"}
QUICK_MOVE = {"duration_s": 0.3, "behaviour": "succeed"}
CHILD_TIMEOUT_S = 30.0
WAIT_S = 15.0


class Recorder(httpx.AsyncBaseTransport):
    """A real socket transport (no retries) that lists every request sent through it."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport(retries=0)
        self.sent: list[tuple[str, str]] = []

    def posts(self) -> list[str]:
        return [path for method, path in self.sent if method == "POST"]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append((request.method, request.url.path))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def new_service(path: Path, timeout_s: float = 10.0) -> tuple[TaskService, Recorder]:
    recorder = Recorder()
    service = TaskService(
        AgentTaskStore(path / "paos.db"),
        lambda url: ForgeToolClient(url, timeout_s=timeout_s, transport=recorder),
        workspace=path / "workspace",
    )
    return service, recorder


@contextlib.asynccontextmanager
async def task_service(path: Path, timeout_s: float = 10.0) -> AsyncIterator[Any]:
    service, recorder = new_service(path, timeout_s)
    try:
        yield service, recorder
    finally:
        await service.aclose()
        service.store.close()


async def new_task(service: TaskService, gateway_url: str) -> str:
    created = await service.create_task(
        OFF["goal"], OFF, BindingCandidate.adhoc(gateway_url, TOOLS)
    )
    task_id: str = created["task"]["task_id"]
    return task_id


def terminal(record: dict[str, Any]) -> bool:
    return record["state"] in TERMINAL_RECORD_STATES


def moves(stack: MockStack) -> int:
    """How many ``move`` invokes the provider has received."""
    return int(stack.stats()["invokes"].get("move", 0))


def wait_moves(stack: MockStack, expected: int) -> bool:
    """Wait (bounded) until the provider counted ``expected`` moves; then it must stay."""
    eventually(lambda: moves(stack) >= expected, within=5.0, what=f"{expected} move invokes")
    return moves(stack) == expected


async def reconcile_until(
    service: TaskService, task_id: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Reconcile (read only) until the task's single record satisfies ``done``."""

    async def satisfied() -> dict[str, Any] | None:
        (record,) = await service.reconcile(task_id)
        return record if done(record) else None

    return await eventually_async(
        satisfied, within=WAIT_S, what=f"task {task_id} reconciled", interval=0.05
    )


# ---------------------------------------------------------------- a PAOS process killed


class DieOnInvoke(httpx.AsyncBaseTransport):
    """Kills its own process at an admission POST: before sending it, or after the
    Gateway answered it but before the answer is read."""

    def __init__(self, when: str) -> None:
        self.when = when
        self.inner = httpx.AsyncHTTPTransport(retries=0)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        admission = request.method == "POST" and request.url.path.endswith(":invoke")
        if admission and self.when == "before_post":
            os.kill(os.getpid(), signal.SIGKILL)  # the intent row is committed by now
        response = await self.inner.handle_async_request(request)
        if admission:
            os.kill(os.getpid(), signal.SIGKILL)  # the Gateway has admitted it; unread
        return response


def crash_child(store_dir: str, task_id: str, when: str) -> None:
    """Entry point of the child PAOS process: start a bound move and die on the way."""

    async def run() -> None:
        service = TaskService(
            AgentTaskStore(Path(store_dir) / "paos.db"),
            lambda url: ForgeToolClient(url, transport=DieOnInvoke(when)),
            workspace=Path(store_dir) / "workspace",
        )
        await service.start_action(task_id, "mock.move", QUICK_MOVE)

    asyncio.run(run())
    raise SystemExit("the child survived its admission POST")


async def run_crashing_child(store_dir: Path, task_id: str, when: str) -> None:
    code = (
        "import sys; from tests.e2e.test_paos_faults import crash_child; crash_child(*sys.argv[1:])"
    )
    with anyio.fail_after(CHILD_TIMEOUT_S):
        child = await anyio.run_process(
            [sys.executable, "-c", code, str(store_dir), task_id, when], cwd=ROOT, check=False
        )
    assert child.returncode == -signal.SIGKILL, (
        f"child exited {child.returncode}\n{child.stderr.decode(errors='replace')}"
    )


@pytest.mark.parametrize("when", ["before_post", "after_post"])
async def test_a_paos_process_killed_around_its_post_is_reconciled_without_posting(
    stack: MockStack, tmp_path: Path, when: str
) -> None:
    stack.wait_idle()
    async with task_service(tmp_path) as (service, recorder):
        task_id = await new_task(service, stack.base_url)
        before = moves(stack)

        await run_crashing_child(tmp_path, task_id, when)

        (dead,) = service.store.records(task_id)  # the intent was persisted before the POST
        assert (dead.state, dead.invocation_id) == ("intent", None)
        on_gateway = stack.data(
            stack.http.get("/invocations", params={"caller_id": dead.caller_id})
        )
        dispatched = 0 if when == "before_post" else 1
        assert len(on_gateway["invocations"]) == dispatched
        assert wait_moves(stack, before + dispatched)

        sent = len(recorder.sent)
        if when == "before_post":
            (record,) = await service.reconcile(task_id)
            assert record["state"] == "unknown"
            assert record["invocation_id"] is None
            assert record["error"]["code"] == "PAOS_NEVER_ADMITTED"
        else:
            (invocation,) = on_gateway["invocations"]
            record = await reconcile_until(service, task_id, terminal)
            assert record["invocation_id"] == invocation["invocation_id"]  # by caller_id
            assert record["attempt_id"] == invocation["attempt_id"]
            gateway_view = stack.terminal(invocation["invocation_id"])
            assert gateway_view["phase"] == "completed"
            assert record["state"] == "completed"
            assert record["result"] == gateway_view["result"]
        assert recorder.sent[sent:], "reconcile read nothing"
        assert recorder.posts() == [], recorder.sent  # reconcile only reads
        assert moves(stack) == before + dispatched
        (again,) = await service.reconcile(task_id)  # terminal now: nothing left to read
        assert again == record
        assert recorder.posts() == []


# ---------------------------------------------------------------- the Gateway restarts


async def test_a_gateway_restart_mid_action_reads_unknown_refuses_drift_and_fails_the_task(
    fresh_stack: MockStack, tmp_path: Path
) -> None:
    stack = fresh_stack
    async with task_service(tmp_path) as (service, recorder):
        task_id = await new_task(service, stack.base_url)
        before = moves(stack)
        started = await service.start_action(
            task_id, "mock.move", {"duration_s": 3.0, "behaviour": "succeed"}
        )
        stack.poll(started["invocation_id"], lambda status: status["phase"] == "running")
        assert moves(stack) == before + 1

        stack.kill_gateway()

        (record,) = await service.reconcile(task_id)
        assert record["state"] == "unknown"
        assert record["invocation_id"] == started["invocation_id"]
        assert record["result"]["status"] == "unknown"
        assert record["result"]["error"]["code"] == "FORGE_TOOL_GATEWAY_RESTARTED_OUTCOME_UNKNOWN"
        assert record["error"]["code"] == "FORGE_TOOL_GATEWAY_RESTARTED_OUTCOME_UNKNOWN"

        posts = len(recorder.posts())
        with pytest.raises(BindingError) as refused:
            await service.start_action(task_id, "mock.move", QUICK_MOVE)
        assert refused.value.code == "PAOS_RUNTIME_DRIFT"
        assert len(recorder.posts()) == posts  # refused before any POST
        assert [r.record_id for r in service.store.records(task_id)] == [record["record_id"]]
        assert wait_stats_ready(stack)
        assert moves(stack) == before + 1

        described = await finalize(service, task_id)
        assert described["task"]["state"] == "failed"
        assert described["task"]["outcome"]["execution_ok"] is False
        assert described["task"]["outcome"]["verdict"] is None
        assert len(recorder.posts()) == posts


def wait_stats_ready(stack: MockStack) -> bool:
    return eventually(lambda: stack.ready("mock.stats"), within=WAIT_S, what="mock.stats ready")


# ---------------------------------------------------------------- the admission answer is lost


class StallingProxy:
    """A TCP proxy to the Gateway that forwards every request but swallows the answer on a
    connection once it carried a request whose head starts with ``stall``."""

    def __init__(self, upstream_port: int, stall: bytes) -> None:
        self.upstream_port = upstream_port
        self.stall = stall
        self.stalled = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._pipes: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> StallingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        for pipe in self._pipes:
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        for writer in self._writers:
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        await self._server.wait_closed()

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        upstream_r, upstream_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers += [client_w, upstream_w]
        swallow = False

        async def requests() -> None:
            nonlocal swallow
            while data := await client_r.read(65536):
                if data.startswith(self.stall):
                    swallow = True
                    self.stalled += 1
                upstream_w.write(data)
                await upstream_w.drain()
            upstream_w.close()

        async def answers() -> None:
            while data := await upstream_r.read(65536):
                if not swallow:
                    client_w.write(data)
                    await client_w.drain()
            client_w.close()

        pipes = [asyncio.ensure_future(requests()), asyncio.ensure_future(answers())]
        self._pipes.update(pipes)
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await asyncio.gather(*pipes)
        for writer in (client_w, upstream_w):
            writer.close()


async def test_a_timed_out_admission_is_indeterminate_dispatched_once_and_found_by_caller_id(
    stack: MockStack, tmp_path: Path
) -> None:
    stack.wait_idle()
    async with (
        StallingProxy(stack.port, b"POST /tools/mock.move:invoke ") as proxy,
        task_service(tmp_path, timeout_s=1.0) as (service, recorder),
    ):
        task_id = await new_task(service, proxy.url)
        before = moves(stack)
        with pytest.raises(ForgeTimeout) as caught:
            await service.start_action(task_id, "mock.move", QUICK_MOVE)
        assert caught.value.remote_state == "unknown"
        assert caught.value.code == "FORGE_CLIENT_TIMEOUT"
        assert proxy.stalled == 1
        assert recorder.posts() == ["/tools/mock.move:invoke"]

        (record,) = service.store.records(task_id)
        assert (record.state, record.invocation_id) == ("indeterminate", None)
        assert record.error is not None
        assert record.error["code"] == "FORGE_CLIENT_TIMEOUT"
        assert wait_moves(stack, before + 1)  # the provider saw exactly one dispatch

        reconciled = await reconcile_until(service, task_id, terminal)
        (invocation,) = stack.data(
            stack.http.get("/invocations", params={"caller_id": record.caller_id})
        )["invocations"]
        assert reconciled["invocation_id"] == invocation["invocation_id"]  # by caller_id
        assert reconciled["state"] == "completed"
        assert recorder.posts() == ["/tools/mock.move:invoke"]  # reconcile never POSTs
        assert moves(stack) == before + 1
