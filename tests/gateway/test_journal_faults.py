"""Journal faults: damaged lines read ``unknown``, write failures never cost a dispatch.

Damaged journals are real files written by the test; write failures come from a fake
journal that implements the real interface, and a partial write from a real file-size
limit in a child process.
"""

from __future__ import annotations

import contextlib
import errno
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from doraforge.gateway.journal import MAX_LINE_BYTES, FileJournal, JournalRecord, MemoryJournal
from tests.gateway.harness import Stack, running_stack
from tests.gateway.support import (
    assert_error,
    data,
    invoke_requests,
    read,
    start,
    wait_terminal,
)

pytestmark = pytest.mark.anyio

QUICK = {"duration_s": 0, "behaviour": "succeed"}
ROOT = Path(__file__).resolve().parents[2]


class FailingJournal(MemoryJournal):
    """A journal on a disk that fills up: chosen record kinds (or compaction) fail."""

    def __init__(self) -> None:
        super().__init__()
        self.failing: set[str] = set()

    def append(self, record: JournalRecord) -> None:
        if record["k"] in self.failing:
            raise OSError(errno.ENOSPC, "No space left on device")
        super().append(record)

    def compact(self, records: Iterable[JournalRecord]) -> None:
        if "compact" in self.failing:
            raise OSError(errno.EIO, "Input/output error")
        super().compact(records)

    def kinds(self) -> list[str]:
        return [record["k"] for record in self.records]


@contextlib.asynccontextmanager
async def stack_on_file(path: Path) -> AsyncIterator[Stack]:
    """A Gateway on a :class:`FileJournal` at ``path``, closed when the block ends."""
    journal = FileJournal(path)
    try:
        async with running_stack(journal=journal) as stack:
            yield stack
    finally:
        journal.close()


async def completed_move(path: Path) -> str:
    """One Action run to completion through a Gateway journaling to ``path``; its id."""
    async with stack_on_file(path) as stack:
        done = await start(stack, "mock.move", QUICK)
        await wait_terminal(stack, done["invocation_id"])
    invocation_id: str = done["invocation_id"]
    return invocation_id


# ---------------------------------------------------------------- damaged lines


DAMAGED_LINES = {
    "missing fields": b'{"k":"admit","id":"inv_bad"}\n',
    "wrong types": (
        b'{"k":"admit","id":"inv_bad","attempt_id":7,"tool_id":"mock.move","endpoint_id":"mock",'
        b'"operation":"move","semantics":"action","fingerprint":"f","created_at_ms":"soon",'
        b'"deadline_ms":1}\n'
    ),
    "a bool for an int": (
        b'{"k":"admit","id":"inv_bad","attempt_id":"a","tool_id":"mock.move","endpoint_id":"mock",'
        b'"operation":"move","semantics":"action","fingerprint":"f","created_at_ms":true,'
        b'"deadline_ms":1}\n'
    ),
    "unknown semantics": (
        b'{"k":"admit","id":"inv_bad","attempt_id":"a","tool_id":"mock.move","endpoint_id":"mock",'
        b'"operation":"move","semantics":"query","fingerprint":"f","created_at_ms":1,'
        b'"deadline_ms":1}\n'
    ),
    "unknown kind": b'{"k":"phase","id":"inv_bad","phase":"running"}\n',
    "garbage bytes around an id": b'\xff\xfe\x00{"id":"inv_bad",\x9c\x00 garbage\n',
    "NaN": b'{"k":"terminal","id":"inv_bad","result":{"status":"succeeded","v":NaN},"at":1}\n',
    "terminal without admit": (
        b'{"k":"terminal","id":"inv_bad","result":{"status":"succeeded","outputs":{}},"at":1}\n'
    ),
    "torn last line": b'{"k":"admit","id":"inv_bad","attempt_id":"att_1","tool_id":"mock.mo',
}


@pytest.mark.parametrize("line", DAMAGED_LINES.values(), ids=DAMAGED_LINES.keys())
async def test_a_damaged_journal_line_is_skipped_and_its_invocation_reads_unknown(
    tmp_path: Path, line: bytes
) -> None:
    path = tmp_path / "gateway.journal"
    done = await completed_move(path)
    with path.open("ab") as handle:
        handle.write(line)
    async with stack_on_file(path) as stack:
        health = stack.gateway.runtime.journal_health
        assert health.skipped_records == 1
        bad = await read(stack, "inv_bad")
        assert (bad["phase"], bad["terminal"]) == ("unknown", True)
        assert bad["result"]["error"]["code"] == "FORGE_TOOL_JOURNAL_RECORD_UNREADABLE"
        assert (await read(stack, done))["phase"] == "completed"
        # The Gateway keeps serving, and replaying dispatched nothing.
        assert invoke_requests(stack.provider.received) == 0
        again = await start(stack, "mock.move", QUICK)
        assert (await wait_terminal(stack, again["invocation_id"]))["phase"] == "completed"


async def test_a_line_without_a_legible_id_is_skipped_and_nothing_else_changes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gateway.journal"
    done = await completed_move(path)
    with path.open("ab") as handle:
        handle.write(b"\x00\x01\x02 not a record \xff\n[1, 2, 3]\n" + b"x" * MAX_LINE_BYTES + b"\n")
    async with stack_on_file(path) as stack:
        assert stack.gateway.runtime.journal_health.skipped_records == 3
        assert [inv.invocation_id for inv in stack.gateway.runtime.store] == [done]
        assert (await read(stack, done))["phase"] == "completed"
    # The restart compacted the damage away: a second restart reads a clean journal.
    lines = path.read_bytes().splitlines()
    assert [json.loads(raw)["k"] for raw in lines] == ["admit", "terminal"]


async def test_an_unreadable_invocation_keeps_what_its_line_still_shows(tmp_path: Path) -> None:
    path = tmp_path / "gateway.journal"
    path.write_bytes(
        b'{"k":"admit","id":"inv_torn","attempt_id":"att_1","tool_id":"mock.move",'
        b'"endpoint_id":"mock","operation":"move","semantics":"action","caller_id":"c-9","fing'
    )
    async with stack_on_file(path) as stack:
        torn = await read(stack, "inv_torn")
        assert (torn["tool_id"], torn["caller_id"], torn["phase"]) == (
            "mock.move",
            "c-9",
            "unknown",
        )
        found = data(await stack.client.get("/invocations?caller_id=c-9"))
        assert [inv["invocation_id"] for inv in found["invocations"]] == ["inv_torn"]
        # Its arguments are lost, so a retry under its caller_id is refused, not re-sent.
        assert_error(
            await stack.client.post(
                "/tools/mock.move:invoke", json={"arguments": QUICK, "caller_id": "c-9"}
            ),
            409,
            "FORGE_TOOL_CALLER_ID_CONFLICT",
        )
        assert invoke_requests(stack.provider.received) == 0


async def test_an_unreadable_outcome_line_turns_a_completed_invocation_unknown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gateway.journal"
    done = await completed_move(path)
    admit, terminal = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(admit + terminal[: len(terminal) // 2])  # the outcome line was torn
    async with stack_on_file(path) as stack:
        status = await read(stack, done)
        assert status["phase"] == "unknown"
        assert status["result"]["error"]["code"] == "FORGE_TOOL_JOURNAL_RECORD_UNREADABLE"


# ---------------------------------------------------------------- write failures


async def test_a_full_journal_refuses_admission_with_a_retryable_503_before_dispatch() -> None:
    journal = FailingJournal()
    journal.failing = {"admit"}
    async with running_stack(journal=journal) as stack:
        response = await stack.client.post(
            "/tools/mock.move:invoke", json={"arguments": QUICK, "caller_id": "full-1"}
        )
        error = assert_error(response, 503, "FORGE_TOOL_JOURNAL_UNAVAILABLE")
        assert error["retryable"] is True
        assert response.headers["retry-after"] == "1"
        assert invoke_requests(stack.provider.received) == 0
        assert len(stack.gateway.runtime.store) == 0
        context = data(await stack.client.get("/tools/mock.move/context"))
        assert context["active_invocations"] == 0  # no slot was taken
        assert stack.gateway.runtime.journal_health.write_failures == 1

        journal.failing = set()  # space was freed: the same request now goes through
        admitted = await start(stack, "mock.move", QUICK, caller_id="full-1")
        assert admitted["duplicate"] is False
        assert (await wait_terminal(stack, admitted["invocation_id"]))["phase"] == "completed"
        assert invoke_requests(stack.provider.received, "move") == 1


async def test_an_outcome_that_cannot_be_journaled_is_still_answered_and_restarts_unknown() -> None:
    journal = FailingJournal()
    journal.failing = {"terminal"}
    async with running_stack(journal=journal) as stack:
        admitted = await start(stack, "mock.move", QUICK, caller_id="deg-1")
        status = await wait_terminal(stack, admitted["invocation_id"])
        assert status["phase"] == "completed"  # the caller's answer comes from memory
        health = stack.gateway.runtime.journal_health
        assert (health.degraded, health.write_failures) == (True, 1)
        assert journal.kinds() == ["admit"]
    # A Gateway restarted now reads it as unknown: never 404, never a guessed outcome.
    async with running_stack(journal=journal) as restarted:
        after = await read(restarted, admitted["invocation_id"])
        assert after["phase"] == "unknown"
        assert after["result"]["error"]["code"] == "FORGE_TOOL_GATEWAY_RESTARTED_OUTCOME_UNKNOWN"


async def test_a_degraded_journal_heals_by_compaction_once_the_disk_has_room() -> None:
    journal = FailingJournal()
    journal.failing = {"terminal", "compact"}
    async with running_stack(journal=journal) as stack:
        runtime = stack.gateway.runtime
        admitted = await start(stack, "mock.move", QUICK)
        await wait_terminal(stack, admitted["invocation_id"])
        runtime.evict()  # the disk is still full: compaction fails and changes nothing
        assert runtime.journal_health.degraded is True
        assert journal.kinds() == ["admit"]
        journal.failing = set()
        runtime.evict()
        assert runtime.journal_health.degraded is False
        assert journal.kinds() == ["admit", "terminal"]
    async with running_stack(journal=journal) as restarted:
        assert (await read(restarted, admitted["invocation_id"]))["phase"] == "completed"


async def test_a_gateway_whose_journal_cannot_be_rewritten_at_start_still_serves() -> None:
    journal = FailingJournal()
    journal.failing = {"compact"}
    async with running_stack(journal=journal) as stack:
        assert stack.gateway.runtime.journal_health.degraded is True
        admitted = await start(stack, "mock.move", QUICK)
        assert (await wait_terminal(stack, admitted["invocation_id"]))["phase"] == "completed"


def test_an_append_cut_short_by_the_disk_leaves_only_whole_lines(tmp_path: Path) -> None:
    # A real partial write: the kernel writes up to the file-size limit, then EFBIG.
    path = tmp_path / "gateway.journal"
    script = textwrap.dedent(
        f"""
        import errno, resource
        from doraforge.gateway.journal import FileJournal, encode
        first = {{"k": "admit", "id": "inv_1"}}
        journal = FileJournal({str(path)!r})
        journal.append(first)
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(encode(first)) + 10, hard))
        try:
            journal.append({{"k": "admit", "id": "inv_2", "pad": "x" * 100}})
        except OSError as exc:
            assert exc.errno == errno.EFBIG, exc
        else:
            raise SystemExit("the append past the limit did not fail")
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        journal.append({{"k": "admit", "id": "inv_3"}})
        """
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=60)
    lines = path.read_bytes().splitlines(keepends=True)
    assert [json.loads(raw)["id"] for raw in lines] == ["inv_1", "inv_3"]
    assert all(raw.endswith(b"\n") for raw in lines)


def test_a_journal_reopened_after_a_crash_starts_the_next_record_on_a_fresh_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gateway.journal"
    path.write_bytes(b'{"k":"admit","id":"inv_1"}\n{"k":"admit","id":"inv_2","att')
    journal = FileJournal(path)
    try:
        journal.append({"k": "admit", "id": "inv_3"})
        lines = journal.replay()
    finally:
        journal.close()
    assert [line.record["id"] if line.record else None for line in lines] == [
        "inv_1",
        None,
        "inv_3",
    ]
    assert lines[1].salvaged == {"id": "inv_2"}
