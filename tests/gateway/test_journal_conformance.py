"""One conformance suite over every implementation of the Gateway's ``Journal`` protocol.

It sits beside the Gateway's other tests rather than in a cross-package folder because the
protocol, its implementations and its one consumer (the Tool Runtime's recovery) all live
in ``gateway/``, and ``tests/`` mirrors the packages; the PAOS experience log has its own
suite next to its owner (``tests/paos/test_experience_conformance.py``).

The implementations: :class:`MemoryJournal` and :class:`FileJournal` (page-cache writes,
and ``fsync=True``). Every row runs on each; where one legitimately differs (a memory
journal promises no restart), the row says so from the table, it is never skipped. File
rows use real files under ``tmp_path``; damage is written into them by the test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from doraforge.gateway.journal import (
    MAX_LINE_BYTES,
    FileJournal,
    Journal,
    JournalLine,
    JournalRecord,
    MemoryJournal,
)

THREADS = 4
PER_THREAD = 150


@dataclass(frozen=True)
class Implementation:
    """One journal implementation: how to open it on a path, and what it promises."""

    name: str
    open: Callable[[Path], Journal]
    durable: bool  # the records of one instance are there for the next on the same path
    file: bool  # it lives in a file a crash or another writer can damage

    def __str__(self) -> str:
        return self.name


IMPLEMENTATIONS = (
    # In-process only: "for Gateways that need no restart story" (gateway/journal.py).
    Implementation("memory", lambda _: MemoryJournal(), durable=False, file=False),
    Implementation("file", lambda path: FileJournal(path), durable=True, file=True),
    Implementation(
        "file-fsync", lambda path: FileJournal(path, fsync=True), durable=True, file=True
    ),
)


@pytest.fixture(params=IMPLEMENTATIONS, ids=str)
def impl(request: pytest.FixtureRequest) -> Implementation:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "invocations.jsonl"


@pytest.fixture
def journal(impl: Implementation, path: Path) -> Iterator[Journal]:
    opened = impl.open(path)
    yield opened
    close(opened)


def close(journal: Journal) -> None:
    if isinstance(journal, FileJournal):
        journal.close()


def admit(n: int, **extra: object) -> JournalRecord:
    """An admit-like record, as the Tool Runtime writes them."""
    return {"k": "admit", "id": f"inv-{n:05d}", "attempt_id": "att-1", "n": n, **extra}


def records_of(lines: list[JournalLine]) -> list[JournalRecord | None]:
    return [line.record for line in lines]


# ---------------------------------------------------------------- append and replay


def test_what_was_appended_replays_equal_numbered_in_order(journal: Journal) -> None:
    written = [
        admit(1),
        admit(2, result={"outputs": {"pose": [0.1, -2.5e-7, 3.0]}, "ok": True, "none": None}),
        admit(3, caller_id="caller-é-ü-机器人", big=2**53 - 1),
        {"k": "terminal", "id": "inv-00001", "status": "succeeded"},
    ]
    for record in written:
        journal.append(record)
    lines = journal.replay()
    assert [line.number for line in lines] == [1, 2, 3, 4]
    assert records_of(lines) == written
    assert all(line.problem is None for line in lines)


def test_a_record_json_cannot_carry_is_refused_and_nothing_is_written(journal: Journal) -> None:
    journal.append(admit(1))
    with pytest.raises(ValueError, match="JSON"):
        journal.append(admit(2, score=float("nan")))
    assert records_of(journal.replay()) == [admit(1)]


def test_records_are_values_later_mutation_changes_nothing_stored(journal: Journal) -> None:
    record = admit(1, result={"outputs": {"width": 0.02}})
    journal.append(record)
    record["result"]["outputs"]["width"] = 99.0
    first = journal.replay()[0].record
    assert first is not None
    first["result"]["outputs"]["width"] = -1.0
    assert records_of(journal.replay()) == [admit(1, result={"outputs": {"width": 0.02}})]


def test_compact_replaces_everything_and_appends_follow_it(journal: Journal) -> None:
    for n in range(5):
        journal.append(admit(n))
    journal.compact([admit(3), admit(4)])
    journal.append(admit(5))
    assert records_of(journal.replay()) == [admit(3), admit(4), admit(5)]
    assert [line.number for line in journal.replay()] == [1, 2, 3]


def test_a_compaction_that_fails_part_way_keeps_the_old_journal(
    journal: Journal, path: Path, impl: Implementation
) -> None:
    for n in range(3):
        journal.append(admit(n))

    def failing() -> Iterator[JournalRecord]:
        yield admit(7)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        journal.compact(failing())
    assert records_of(journal.replay()) == [admit(0), admit(1), admit(2)]
    journal.append(admit(3))
    assert records_of(journal.replay())[-1] == admit(3)
    if impl.file:
        assert sorted(p.name for p in path.parent.iterdir()) == [path.name], "a temporary left"


# ---------------------------------------------------------------- restart


def test_a_reopened_journal_replays_what_the_last_one_wrote(
    impl: Implementation, path: Path
) -> None:
    first = impl.open(path)
    for n in range(3):
        first.append(admit(n))
    close(first)
    second = impl.open(path)
    try:
        if not impl.durable:
            assert second.replay() == [], "a memory journal promises no restart"
            return
        assert records_of(second.replay()) == [admit(0), admit(1), admit(2)]
        second.append(admit(3))
        assert records_of(second.replay())[-1] == admit(3)
    finally:
        close(second)


def test_damage_found_on_reopen_is_reported_per_line_and_the_rest_still_reads(
    impl: Implementation, path: Path
) -> None:
    first = impl.open(path)
    first.append(admit(1))
    close(first)
    if impl.file:
        with path.open("ab") as handle:
            handle.write(b'{"k":"admit","id":"inv-garbled",\x00\xff garbage}\n')
            handle.write(b"[1, 2]\n")
            handle.write(b"\n")
            handle.write(b'{"k":"admit","id":"inv-torn","attempt_id":"att-1","n"')  # a crash
    second = impl.open(path)
    try:
        second.append(admit(2))  # must not extend the torn tail
        lines = second.replay()
    finally:
        close(second)
    if not impl.file:
        assert lines == [JournalLine(1, admit(2))], "nothing outside the process to damage"
        return
    assert [line.record for line in lines if line.record is not None] == [admit(1), admit(2)]
    damaged = [line for line in lines if line.problem is not None]
    assert [line.salvaged.get("id") for line in damaged] == ["inv-garbled", None, "inv-torn"]
    assert all(line.record is None for line in damaged)
    assert [line.number for line in lines] == list(range(1, len(lines) + 1))


def test_a_record_longer_than_a_line_may_be_still_names_its_invocation(
    impl: Implementation, journal: Journal
) -> None:
    huge = admit(1, result={"blob": "x" * MAX_LINE_BYTES})
    journal.append(huge)
    journal.append(admit(2))
    first, second = journal.replay()
    assert second.record == admit(2)
    if impl.file:
        # A line past MAX_LINE_BYTES is damage by the file's own bound: reported, with the
        # id still legible so the invocation reads unknown rather than vanishing.
        assert first.record is None
        assert first.problem is not None
        assert first.salvaged["id"] == "inv-00001"
    else:
        assert first.record == huge  # memory has no line bound


# ---------------------------------------------------------------- concurrent writers


def test_concurrent_writers_lose_no_record_and_tear_none(journal: Journal) -> None:
    barrier = threading.Barrier(THREADS)

    def write(thread: int) -> None:
        barrier.wait(timeout=10)
        for n in range(PER_THREAD):
            journal.append({"k": "admit", "id": f"t{thread}-{n:04d}", "thread": thread, "n": n})

    workers = [threading.Thread(target=write, args=(t,)) for t in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert not any(worker.is_alive() for worker in workers)
    lines = journal.replay()
    assert all(line.problem is None for line in lines), [x for x in lines if x.problem][:3]
    assert len(lines) == THREADS * PER_THREAD
    for thread in range(THREADS):
        mine = [
            line.record["n"] for line in lines if line.record and line.record["thread"] == thread
        ]
        assert mine == list(range(PER_THREAD)), f"thread {thread}'s records out of order"
