"""The fault table: every fault ends ``unknown`` or refused, never a crash, 404 or 500.

Each row runs against a real ``dora run`` of the mock dataflow over real sockets, and
counts what the provider received with ``mock.stats``:

* a torn, garbled, field-less or mistyped journal line, then the Gateway node killed and
  restarted by Dora: the invocation the line names reads ``unknown``, every other one
  keeps its phase, the restart dispatches nothing and the Gateway keeps serving;
* a journal on a full disk (an injected writer that fails with ``ENOSPC``, which runs
  anywhere, and a real full tmpfs where the test may mount one): admission is a retryable
  503, the provider sees no dispatch, and once space is freed the same request goes through;
* the AgentTask store failing after the intent commit: the agent tool reports remote state
  unknown, the provider saw exactly one dispatch and reconcile finds it by ``caller_id``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from doraforge.dataflows import DATAFLOWS
from doraforge.paos.agent_tools import TOOLS
from doraforge.paos.binding import BindingCandidate
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.store.models import TERMINAL_RECORD_STATES
from doraforge.paos.tasks import TaskService
from tests.e2e.conftest import GATEWAY_MARK, MockStack, dataflow_stack
from tests.paos.store_support import WriteLock
from tests.support.waiting import eventually, eventually_async

pytestmark = pytest.mark.e2e


QUICK_MOVE = {"duration_s": 0.2, "behaviour": "succeed"}
OFF = {"mode": "off", "goal": "move the mock"}
FULL_DISK_GATEWAY = Path(__file__).with_name("full_disk_gateway.py")
TMPFS_BYTES = 256 * 1024
WAIT_S = 15.0


def moves(stack: MockStack) -> int:
    """How many ``move`` invokes the provider process has received."""
    return int(stack.stats()["invokes"].get("move", 0))


def completed_move(stack: MockStack, caller_id: str) -> str:
    """Run one ``move`` to completion; its invocation id."""
    stack.wait_idle()
    admitted = stack.start("mock.move", QUICK_MOVE, caller_id=caller_id)
    assert stack.terminal(admitted["invocation_id"])["phase"] == "completed"
    invocation_id: str = admitted["invocation_id"]
    return invocation_id


# ---------------------------------------------------------------- damaged journal lines


def torn_admit(journal: Path, victim: str) -> str:
    """The Gateway died mid-way through the victim's admit line: nothing after it."""
    lines = journal.read_bytes().splitlines(keepends=True)
    at = next(i for i, raw in enumerate(lines) if json.loads(raw).get("id") == victim)
    journal.write_bytes(b"".join(lines[:at]) + lines[at][: len(lines[at]) // 2])
    return victim


def garbage(journal: Path, victim: str) -> str:
    """Bytes that are not JSON nor UTF-8, around a legible id."""
    with journal.open("ab") as handle:
        handle.write(b'\x00\xff\xfe\x9c{"k":"admit","id":"inv_garbage_row",\xc3\x28\x00\xff\n')
    return "inv_garbage_row"


def missing_fields(journal: Path, victim: str) -> str:
    """Intact JSON without the fields an admit record needs (the issue's own line)."""
    with journal.open("ab") as handle:
        handle.write(b'{"k":"admit","id":"x"}\n')
    return "x"


def wrong_types(journal: Path, victim: str) -> str:
    """A second outcome line for the victim whose fields have the wrong types."""
    record = {"k": "terminal", "id": victim, "result": "done", "at": "now"}
    with journal.open("ab") as handle:
        handle.write(json.dumps(record).encode() + b"\n")
    return victim


DAMAGE: dict[str, Callable[[Path, str], str]] = {
    "torn last line": torn_admit,
    "garbage bytes": garbage,
    "missing fields": missing_fields,
    "wrong types": wrong_types,
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_journal_line_reads_unknown_after_a_real_restart_and_the_gateway_serves(
    fresh_stack: MockStack, damage: Callable[[Path, str], str]
) -> None:
    stack = fresh_stack
    kept = completed_move(stack, "fault-kept")
    victim = completed_move(stack, "fault-victim")
    damaged = damage(stack.journal, victim)
    dispatched = moves(stack)

    stack.kill_gateway()  # Dora restarts the node; a crash loop would never answer here
    restarted = stack.node(GATEWAY_MARK).pid

    status = stack.status(damaged)
    assert (status["phase"], status["terminal"]) == ("unknown", True)
    assert status["result"]["error"]["code"] == "FORGE_TOOL_JOURNAL_RECORD_UNREADABLE"
    result = stack.data(stack.http.get(f"/invocations/{damaged}/result"))
    assert (result["status"], result["result"]["status"]) == ("available", "unknown")
    for other in {kept, victim} - {damaged}:
        assert stack.status(other)["phase"] == "completed"
    assert "skipped" in stack.tail(400)  # reported in the Gateway's log

    # The provider re-registered.
    eventually(stack.ready, within=WAIT_S, what="mock.move ready", detail=stack.context)
    assert moves(stack) == dispatched  # replaying the journal dispatched nothing
    follow_up = completed_move(stack, "fault-follow-up")
    assert stack.status(follow_up)["phase"] == "completed"
    assert moves(stack) == dispatched + 1
    assert stack.node(GATEWAY_MARK).pid == restarted  # still the same Gateway process


# ---------------------------------------------------------------- a journal on a full disk


def gateway_dataflow(directory: Path, *, wrap: list[str], extra: list[str]) -> Path:
    """dataflows/mock.yml with the Gateway command prefixed by ``wrap`` and given ``extra``."""
    flow = yaml.safe_load((DATAFLOWS / "mock.yml").read_text(encoding="utf-8"))
    (gateway,) = [node for node in flow["nodes"] if node["id"] == "gateway"]
    config = DATAFLOWS / "mock.gateway.yml"
    command = [*wrap, "-m", "doraforge.gateway", "--config", str(config), *extra]
    gateway["path"], gateway["args"] = command[0], " ".join(command[1:])
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "faults.yml"
    path.write_text(yaml.safe_dump(flow), encoding="utf-8")
    return path


def assert_refused_before_dispatch(stack: MockStack, caller_id: str) -> None:
    """An admission on a journal that cannot grow: 503, retryable, nothing dispatched."""
    response = stack.invoke("mock.move", QUICK_MOVE, caller_id=caller_id)
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert (error["code"], error["retryable"]) == ("FORGE_TOOL_JOURNAL_UNAVAILABLE", True)
    assert response.headers["retry-after"] == "1"
    assert moves(stack) == 0
    found = stack.data(stack.http.get("/invocations", params={"caller_id": caller_id}))
    assert found["invocations"] == []
    assert stack.query("echo", {"message": "still serving"})["status"] == "succeeded"


def admitted_once_space_is_freed(stack: MockStack, caller_id: str, journal: Path) -> None:
    """The request refused on a full disk, sent again: admitted anew, run, journaled."""
    admitted = stack.start("mock.move", QUICK_MOVE, caller_id=caller_id)
    assert admitted["duplicate"] is False
    assert stack.terminal(admitted["invocation_id"])["phase"] == "completed"
    assert moves(stack) == 1
    kinds = [json.loads(raw)["k"] for raw in journal.read_bytes().splitlines()]
    assert kinds == ["admit", "terminal"]


def test_a_journal_writer_failing_with_enospc_refuses_admission_with_503_before_dispatch(
    tmp_path: Path,
) -> None:
    full = tmp_path / "disk-full"
    full.touch()
    wrap = [sys.executable, str(FULL_DISK_GATEWAY), str(full)]
    dataflow = gateway_dataflow(tmp_path / "flow", wrap=wrap, extra=[])
    with dataflow_stack(tmp_path / "stack", dataflow) as stack:
        assert_refused_before_dispatch(stack, "enospc-1")
        assert "journal write failed (admit of" in stack.tail(400)
        full.unlink()
        admitted_once_space_is_freed(stack, "enospc-1", stack.journal)


@contextlib.contextmanager
def full_tmpfs(mountpoint: Path) -> Iterator[Path]:
    """A small tmpfs mounted at ``mountpoint`` and filled up; yields the filler file."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the injected-writer row covers the rest")
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},mode=0700", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        filler = mountpoint / "filler"
        fill(filler)
        yield filler
    finally:
        subprocess.run(
            ["umount", "-l", str(mountpoint)], check=False, capture_output=True, timeout=30
        )


def fill(path: Path) -> None:
    """Write ``path`` until its filesystem reports ENOSPC (bounded by the tmpfs size)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for _ in range(TMPFS_BYTES // 4096 + 16):
            try:
                os.write(fd, b"\0" * 4096)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return
    finally:
        os.close(fd)
    raise AssertionError(f"{path} never filled its filesystem")


def test_a_journal_on_a_full_filesystem_refuses_with_503_until_space_is_freed(
    tmp_path: Path,
) -> None:
    with full_tmpfs(tmp_path / "full") as filler:
        journal = filler.with_name("gateway.journal")
        dataflow = gateway_dataflow(
            tmp_path / "flow", wrap=[sys.executable], extra=["--journal", str(journal)]
        )
        with dataflow_stack(tmp_path / "stack", dataflow) as stack:
            assert_refused_before_dispatch(stack, "full-1")
            filler.unlink()  # the operator frees space
            admitted_once_space_is_freed(stack, "full-1", journal)


# ---------------------------------------------------------------- the AgentTask store fails


class LockAfterAdmission(httpx.AsyncBaseTransport):
    """Real sockets; once a ``move`` admission is answered, the store's write lock is taken."""

    def __init__(self, lock: WriteLock) -> None:
        self.inner = httpx.AsyncHTTPTransport(retries=0)
        self.lock = lock
        self.posts: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            self.posts.append(request.url.path)
        response = await self.inner.handle_async_request(request)
        if request.url.path.endswith("mock.move:invoke") and not self.lock.held:
            self.lock.hold()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@contextlib.asynccontextmanager
async def locking_service(path: Path) -> AsyncIterator[tuple[TaskService, LockAfterAdmission]]:
    store = AgentTaskStore(path / "paos.db", busy_timeout_ms=100)
    lock = WriteLock(store.path)
    transport = LockAfterAdmission(lock)
    service = TaskService(
        store,
        lambda url: ForgeToolClient(url, timeout_s=10.0, transport=transport),
        workspace=path / "workspace",
    )
    try:
        yield service, transport
    finally:
        lock.release()
        await service.aclose()
        store.close()


async def reconciled(service: TaskService, task_id: str) -> dict[str, Any]:
    """Reconcile (read only) until the task's one record is terminal."""

    async def terminal() -> dict[str, Any] | None:
        (record,) = await service.reconcile(task_id)
        return record if record["state"] in TERMINAL_RECORD_STATES else None

    return await eventually_async(
        terminal, within=WAIT_S, what=f"task {task_id} terminal", interval=0.05
    )


@pytest.mark.anyio
async def test_a_store_failure_after_the_intent_is_unknown_dispatched_once_and_reconciled(
    stack: MockStack, tmp_path: Path
) -> None:
    stack.wait_idle()
    before = moves(stack)
    async with locking_service(tmp_path) as (service, transport):
        candidate = BindingCandidate.adhoc(stack.base_url, ["mock.move", "mock.stats"])
        created = await service.create_task("move the mock", OFF, candidate)
        task_id = created["task"]["task_id"]

        answer = await TOOLS["forge_tool_start_action"](
            service, {"task_id": task_id, "tool_id": "mock.move", "arguments": QUICK_MOVE}
        )
        assert answer["ok"] is False
        error = answer["error"]
        assert error["type"] == "RecordIndeterminate"
        assert (error["remote_state"], error["retryable"]) == ("unknown", False)
        eventually(lambda: moves(stack) >= before + 1, within=WAIT_S, what="the move dispatched")
        assert moves(stack) == before + 1  # the robot moved once

        transport.lock.release()  # the store is writable again
        (record,) = service.store.records(task_id)
        assert (record.state, record.invocation_id) == ("intent", None)
        assert error["record_id"] == record.record_id
        final = await reconciled(service, task_id)
        (invocation,) = stack.data(
            stack.http.get("/invocations", params={"caller_id": record.caller_id})
        )["invocations"]
        assert final["invocation_id"] == invocation["invocation_id"] == error["invocation_id"]
        assert final["state"] == "completed"
        assert transport.posts.count("/tools/mock.move:invoke") == 1  # never re-sent
        assert moves(stack) == before + 1
