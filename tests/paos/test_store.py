"""The AgentTask store's invariants hold in the database, across processes."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from doraforge.paos.store import AgentTaskStore, NewRecord, StoreError, TaskSlotTaken


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AgentTaskStore]:
    store = AgentTaskStore(tmp_path / "paos.db")
    store.put_binding("bind-1", "sha", {"skill": "pick", "version": "1.0.0"})
    yield store
    store.close()


def new_task(store: AgentTaskStore, task_id: str = "task-1") -> None:
    store.create_task(
        task_id=task_id,
        revision_id=f"{task_id}-rev-1",
        binding_id="bind-1",
        goal="put the cube in the zone",
        contract={"mode": "enforce"},
    )


def intent(store: AgentTaskStore, record_id: str = "rec-1", task_id: str = "task-1") -> None:
    store.record_intent(
        NewRecord(
            record_id=record_id,
            task_id=task_id,
            revision_id=f"{task_id}-rev-1",
            tool_id="arm.home",
            semantics="action",
            caller_id=f"paos:{record_id}",
            arguments_sha256="a",
            spec_sha256="s",
        )
    )


def test_the_database_allows_one_active_task(store: AgentTaskStore) -> None:
    new_task(store)
    with pytest.raises(TaskSlotTaken) as caught:
        new_task(store, "task-2")
    assert caught.value.code == "PAOS_TASK_ACTIVE"
    assert caught.value.details["active_task_id"] == "task-1"
    store.transition("task-1", "succeeded", allowed_from={"executing"})
    new_task(store, "task-2")
    active = store.active_task()
    assert active is not None
    assert active.task_id == "task-2"


def _race(
    path: str,
    task_id: str,
    start: multiprocessing.synchronize.Event,
    out: multiprocessing.Queue[str],
) -> None:
    store = AgentTaskStore(path)
    start.wait(10)
    try:
        store.create_task(
            task_id=task_id, revision_id=f"{task_id}-r", binding_id="bind-1", goal="g", contract={}
        )
        out.put("created")
    except TaskSlotTaken:
        out.put("refused")
    finally:
        store.close()


def test_two_processes_creating_tasks_at_once_produce_exactly_one(store: AgentTaskStore) -> None:
    context = multiprocessing.get_context("spawn")
    start, out = context.Event(), context.Queue()
    workers = [
        context.Process(target=_race, args=(str(store.path), f"task-{n}", start, out))
        for n in range(4)
    ]
    for worker in workers:
        worker.start()
    start.set()
    outcomes = sorted(out.get(timeout=30) for _ in workers)
    for worker in workers:
        worker.join(timeout=30)
    assert outcomes == ["created", "refused", "refused", "refused"]
    assert store.active_task() is not None


def test_a_terminal_record_is_immutable_in_the_database(store: AgentTaskStore) -> None:
    new_task(store)
    intent(store)
    store.record_admitted("rec-1", "inv-1", "att-1", "running")
    store.record_terminal("rec-1", "completed", result={"status": "succeeded", "outputs": {}})
    with pytest.raises(StoreError) as caught:
        store.record_terminal("rec-1", "failed", error={"code": "X"})
    assert caught.value.code == "PAOS_RECORD_TERMINAL"
    raw = sqlite3.connect(store.path)
    with pytest.raises(sqlite3.IntegrityError, match="PAOS_RECORD_TERMINAL"):
        raw.execute("UPDATE records SET state = 'failed' WHERE record_id = 'rec-1'")
    with pytest.raises(sqlite3.IntegrityError):
        raw.execute("DELETE FROM records WHERE record_id = 'rec-1'")
    raw.close()
    assert store.record("rec-1").state == "completed"


def test_caller_id_is_persisted_with_the_intent_and_ids_never_change(store: AgentTaskStore) -> None:
    new_task(store)
    intent(store)
    record = store.record_by_caller("paos:rec-1")
    assert record is not None
    assert record.state == "intent"
    store.record_indeterminate("rec-1", {"code": "PAOS_FORGE_TIMEOUT"})
    store.record_admitted("rec-1", "inv-1", "att-1", "accepted")
    with pytest.raises(StoreError) as caught:
        store.record_admitted("rec-1", "inv-2", "att-2", "accepted")
    assert caught.value.code == "PAOS_RECORD_IDENTITY"


def test_revisions_are_append_only_and_need_a_recovery_verdict(store: AgentTaskStore) -> None:
    new_task(store)
    with pytest.raises(StoreError):
        store.begin_revision("task-1", "task-1-rev-2", "replan")
    store.transition("task-1", "awaiting_replan", allowed_from={"executing"})
    revision = store.begin_revision("task-1", "task-1-rev-2", "replan after a missed grasp")
    assert revision.ordinal == 2
    task = store.task("task-1")
    assert (task.state, task.replans_used) == ("executing", 1)
    store.set_verdict("task-1-rev-1", {"verdict": "replan_required"})
    with pytest.raises(StoreError) as caught:
        store.set_verdict("task-1-rev-1", {"verdict": "success"})
    assert caught.value.code == "PAOS_REVISION_IMMUTABLE"


def test_a_terminal_task_and_bindings_are_frozen(store: AgentTaskStore) -> None:
    new_task(store)
    store.transition("task-1", "failed", allowed_from={"executing"}, outcome={"why": "x"})
    with pytest.raises(StoreError) as caught:
        store.transition("task-1", "succeeded", allowed_from={"failed"})
    assert caught.value.code == "PAOS_TASK_TERMINAL"
    with pytest.raises(sqlite3.IntegrityError, match="PAOS_BINDING_IMMUTABLE"):
        sqlite3.connect(store.path).execute("UPDATE bindings SET sha256 = 'x'")


def test_tasks_are_listed_newest_first(store: AgentTaskStore) -> None:
    new_task(store, "task-a")
    store.transition("task-a", "succeeded", allowed_from={"executing"})
    new_task(store, "task-b")
    assert [task.task_id for task in store.tasks()] == ["task-b", "task-a"]
    assert [task.task_id for task in store.tasks(limit=1)] == ["task-b"]


def test_an_intent_the_database_refuses_is_a_store_error_and_nothing_is_written(
    store: AgentTaskStore,
) -> None:
    new_task(store)
    intent(store, "rec-1")
    with pytest.raises(StoreError) as taken:
        intent(store, "rec-1")  # the record id is taken
    assert taken.value.code == "PAOS_RECORD_REFUSED"
    assert taken.value.details == {"record_id": "rec-1", "task_id": "task-1"}
    with pytest.raises(StoreError) as unknown:
        intent(store, "rec-2", task_id="task-nope")  # no such task or revision
    assert unknown.value.code == "PAOS_RECORD_REFUSED"
    assert [row.record_id for row in store.records("task-1")] == ["rec-1"]
