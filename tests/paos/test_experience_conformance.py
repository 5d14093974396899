"""One conformance suite over every implementation of PAOS's ``ExperienceLog`` protocol.

It sits beside PAOS's other tests rather than in a cross-package folder because the
protocol (``paos/experience.py``), both implementations and their consumers (finalize's and
the agent tools' lessons) all live in ``paos/``, and ``tests/`` mirrors the packages; the
Gateway's journal has its own suite next to its owner
(``tests/gateway/test_journal_conformance.py``).

The implementations: :class:`InMemoryExperienceLog` and the AgentTask store
(:class:`AgentTaskStore`, real SQLite in WAL mode under ``tmp_path``). Every row runs on
each; where one legitimately differs (memory promises no restart; the store keeps episodes
only of tasks it holds, one connection per writer as one per PAOS process) the table says
so, and the row asserts that instead. Nothing is skipped.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from doraforge.paos.experience import (
    EPISODE_SCHEMA,
    Episode,
    EpisodeRecord,
    EpisodeRevision,
    ExperienceLog,
    InMemoryExperienceLog,
    lessons,
)
from doraforge.paos.store import AgentTaskStore, StoreError

THREADS = 4
PER_THREAD = 20
BINDING = "bind-conformance"


def open_store(path: Path) -> AgentTaskStore:
    store = AgentTaskStore(path)
    if not store_has_binding(path):
        store.put_binding(BINDING, "sha", {"skill": "pick", "version": "1.0.0"})
    return store


def store_has_binding(path: Path) -> bool:
    with closing(sqlite3.connect(path)) as db:
        row = db.execute("SELECT 1 FROM bindings WHERE binding_id = ?", (BINDING,)).fetchone()
    return row is not None


def hold_tasks(log: ExperienceLog, task_ids: list[str]) -> None:
    """Make ``task_ids`` terminal tasks of the store (episodes are of terminal tasks)."""
    if not isinstance(log, AgentTaskStore):
        return  # memory keeps an episode of any task id
    for task_id in task_ids:
        log.create_task(
            task_id=task_id,
            revision_id=f"{task_id}-rev-1",
            binding_id=BINDING,
            goal="put the cube in the zone",
            contract={"mode": "enforce"},
        )
        log.transition(task_id, "succeeded", allowed_from={"executing"})


@dataclass(frozen=True)
class Implementation:
    """One experience log: how to open it on a path, and what it promises."""

    name: str
    open: Callable[[Path], ExperienceLog]
    durable: bool  # the next instance on the same path reads what this one kept
    #: Another concurrent writer: the same instance (memory) or its own connection (SQLite).
    writer: Callable[[ExperienceLog, Path], ExperienceLog]
    needs_known_task: bool  # refuses an episode of a task it does not hold

    def __str__(self) -> str:
        return self.name


IMPLEMENTATIONS = (
    Implementation(
        "memory",
        lambda _: InMemoryExperienceLog(),
        durable=False,  # "for tests and one-shot tools"
        writer=lambda shared, _: shared,
        needs_known_task=False,
    ),
    Implementation(
        "sqlite-store",
        open_store,
        durable=True,
        # One AgentTaskStore is one connection, used by one thread at a time (the PAOS
        # event loop); concurrent writers are other connections, as other processes are.
        writer=lambda _, path: AgentTaskStore(path),
        needs_known_task=True,
    ),
)


@pytest.fixture(params=IMPLEMENTATIONS, ids=str)
def impl(request: pytest.FixtureRequest) -> Implementation:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "paos.db"


@pytest.fixture
def log(impl: Implementation, path: Path) -> Iterator[ExperienceLog]:
    opened = impl.open(path)
    yield opened
    close(opened)


def close(log: ExperienceLog) -> None:
    if isinstance(log, AgentTaskStore):
        log.close()


def tool_record(tool: str, status: str, code: str | None, ordinal: int = 1) -> EpisodeRecord:
    return EpisodeRecord(
        revision_ordinal=ordinal,
        tool_id=tool,
        semantics="action",
        ownership="owned",
        status=status,
        error_code=code,
        invocation=None,
        attempt=None,
    )


def episode(task: str, *, tool: str = "arm.home", code: str = "ARM_NO_STATE") -> Episode:
    """A redacted episode with one failed tool record (what ``lessons`` clusters)."""
    return Episode(
        schema=EPISODE_SCHEMA,
        skill="pick",
        version="1.0.0",
        binding="sha256:" + "b" * 64,
        task=f"sha256:{task}",
        outcome="failed",
        mode="enforce",
        replans_used=0,
        revisions=[EpisodeRevision(revision=None, ordinal=1, verdict="failed", criteria=[])],
        records=[tool_record(tool, "failed", code)],
        evidence=[],
    )


def keep(log: ExperienceLog, task: str, skill: str = "pick", version: str = "1.0.0") -> Episode:
    kept = episode(task)
    log.add_episode(task, skill, version, kept)
    return kept


# ---------------------------------------------------------------- round trip and order


def test_kept_episodes_read_back_equal_oldest_first_within_their_skill_version(
    log: ExperienceLog,
) -> None:
    hold_tasks(log, ["t1", "t2", "t3", "t4"])
    first = keep(log, "t1")
    other_version = keep(log, "t2", version="2.0.0")
    second = keep(log, "t3")
    other_skill = keep(log, "t4", skill="place")
    assert list(log.episodes("pick", "1.0.0")) == [first, second]
    assert list(log.episodes("pick", "2.0.0")) == [other_version]
    assert list(log.episodes("place", "1.0.0")) == [other_skill]
    assert list(log.episodes("pick", "9.9.9")) == []


def test_a_second_episode_of_the_same_task_is_ignored(log: ExperienceLog) -> None:
    hold_tasks(log, ["t1"])
    kept = keep(log, "t1")
    log.add_episode("t1", "pick", "1.0.0", episode("t1", tool="gripper.grasp"))
    assert list(log.episodes("pick", "1.0.0")) == [kept]


def test_what_it_keeps_is_what_lessons_are_drawn_from(log: ExperienceLog) -> None:
    hold_tasks(log, ["t1", "t2"])
    keep(log, "t1")
    keep(log, "t2")
    (lesson,) = lessons(log.episodes("pick", "1.0.0"), "pick", "1.0.0")
    assert (lesson["kind"], lesson["key"], lesson["count"]) == (
        "tool_failure",
        "arm.home/ARM_NO_STATE",
        2,
    )


def test_an_episode_of_a_task_it_does_not_hold(impl: Implementation, log: ExperienceLog) -> None:
    if not impl.needs_known_task:
        kept = keep(log, "never-created")
        assert list(log.episodes("pick", "1.0.0")) == [kept]
        return
    with pytest.raises(StoreError) as refused:  # typed, never a raw sqlite3 error
        keep(log, "never-created")
    assert refused.value.code.startswith("PAOS_")
    assert list(log.episodes("pick", "1.0.0")) == []


def test_a_large_episode_round_trips_intact(log: ExperienceLog) -> None:
    hold_tasks(log, ["t1"])
    big = episode("t1")
    big["records"] = [tool_record("arm.move_to_pose", "succeeded", None, n) for n in range(5_000)]
    log.add_episode("t1", "pick", "1.0.0", big)
    assert list(log.episodes("pick", "1.0.0")) == [big]


# ---------------------------------------------------------------- restart and damage


def test_a_reopened_log_reads_what_the_last_one_kept(impl: Implementation, path: Path) -> None:
    first = impl.open(path)
    hold_tasks(first, ["t1", "t2"])
    kept = [keep(first, "t1"), keep(first, "t2")]
    close(first)
    second = impl.open(path)
    try:
        if not impl.durable:
            assert list(second.episodes("pick", "1.0.0")) == [], "memory promises no restart"
            return
        assert list(second.episodes("pick", "1.0.0")) == kept
        hold_tasks(second, ["t3"])
        kept.append(keep(second, "t3"))
        assert list(second.episodes("pick", "1.0.0")) == kept
    finally:
        close(second)


def test_a_damaged_episode_found_on_reopen_is_passed_over_and_the_rest_still_read(
    impl: Implementation, path: Path
) -> None:
    first = impl.open(path)
    hold_tasks(first, ["t1", "t2", "t3"])
    good = [keep(first, "t1"), keep(first, "t3")]
    close(first)
    if impl.durable:  # damage written by another hand into the real file
        with closing(sqlite3.connect(path)) as db, db:
            db.execute(
                "INSERT INTO episodes VALUES ('t2', 'pick', '1.0.0', '{\"schema\": torn', 0)"
            )
    second = impl.open(path)
    try:
        found = list(second.episodes("pick", "1.0.0"))
    finally:
        close(second)
    if not impl.durable:
        assert found == [], "nothing outside the process to damage, nothing kept"
        return
    assert found == good  # "read defensively" (ExperienceLog.episodes)


def test_a_file_that_is_not_a_store_is_refused_with_a_code(
    impl: Implementation, path: Path
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is not an SQLite database\n" * 100)
    if not impl.durable:
        opened = impl.open(path)  # memory never reads the path
        assert list(opened.episodes("pick", "1.0.0")) == []
        return
    with pytest.raises(StoreError) as refused:
        impl.open(path)
    assert refused.value.code == "PAOS_STORE_UNAVAILABLE"


# ---------------------------------------------------------------- concurrent writers


def test_concurrent_writers_lose_no_episode(
    impl: Implementation, log: ExperienceLog, path: Path
) -> None:
    tasks = [[f"w{t}-{n:03d}" for n in range(PER_THREAD)] for t in range(THREADS)]
    hold_tasks(log, [task for mine in tasks for task in mine])
    barrier = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def write(mine: list[str]) -> None:
        writer = impl.writer(log, path)
        try:
            barrier.wait(timeout=10)
            for task in mine:
                writer.add_episode(task, "pick", "1.0.0", episode(task))
        except BaseException as exc:  # reported below, with the thread's first failure
            failures.append(exc)
        finally:
            if writer is not log:
                close(writer)

    workers = [threading.Thread(target=write, args=(mine,)) for mine in tasks]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not any(worker.is_alive() for worker in workers)
    assert failures == []
    found: list[Any] = list(log.episodes("pick", "1.0.0"))
    assert len(found) == THREADS * PER_THREAD
    for mine in tasks:
        order = [e["task"] for e in found if e["task"].startswith(f"sha256:{mine[0][:3]}")]
        assert order == [f"sha256:{task}" for task in mine], "a writer's episodes out of order"
