"""Task slots: one non-terminal AgentTask per home (global) or per runtime, in SQLite."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from doraforge.paos.store import AgentTaskStore, StoreError, TaskSlotTaken

CELLS = {
    "bind-a": {"skill": "cell-a", "version": "1.0.0", "runtime_instance": "rt-a"},
    "bind-b": {"skill": "cell-b", "version": "1.0.0", "runtime_instance": "rt-b"},
    "bind-a2": {"skill": "cell-a", "version": "1.0.0", "runtime_instance": "rt-a2"},
}


@pytest.fixture
def store(tmp_path: Path) -> Any:
    store = AgentTaskStore(tmp_path / "paos.db")
    for binding_id, document in CELLS.items():
        store.put_binding(binding_id, "sha", document)
    yield store
    store.close()


def create(store: AgentTaskStore, task_id: str, binding_id: str) -> None:
    store.create_task(
        task_id=task_id,
        revision_id=f"{task_id}-r1",
        binding_id=binding_id,
        goal="g",
        contract={"mode": "off"},
    )


def test_global_slots_are_the_default_and_refuse_a_second_cell_naming_the_first(
    store: AgentTaskStore,
) -> None:
    assert store.task_slots() == "global"
    create(store, "task-a", "bind-a")
    with pytest.raises(TaskSlotTaken) as caught:
        create(store, "task-b", "bind-b")
    details = caught.value.details
    assert caught.value.code == "PAOS_TASK_ACTIVE"
    assert (details["active_task_id"], details["task_slots"]) == ("task-a", "global")
    assert (details["skill"], details["runtime_instance_id"]) == ("cell-a", "rt-a")
    assert [t.task_id for t in store.active_tasks()] == ["task-a"]


def test_per_runtime_slots_let_each_cell_hold_one_task(store: AgentTaskStore) -> None:
    store.set_task_slots("per_runtime")
    create(store, "task-a", "bind-a")
    create(store, "task-b", "bind-b")
    with pytest.raises(TaskSlotTaken) as caught:
        create(store, "task-a-again", "bind-a")
    assert caught.value.details["active_task_id"] == "task-a"
    assert caught.value.details["runtime_key"] == "skill:cell-a"
    assert "is still active on skill cell-a;" in caught.value.message
    assert [t.task_id for t in store.active_tasks()] == ["task-a", "task-b"]


def test_a_restarted_runtime_of_the_same_skill_is_the_same_cell(store: AgentTaskStore) -> None:
    store.set_task_slots("per_runtime")
    create(store, "task-a", "bind-a")
    with pytest.raises(TaskSlotTaken) as caught:
        create(store, "task-a2", "bind-a2")  # a new runtime_instance of skill cell-a
    assert caught.value.details["runtime_instance_id"] == "rt-a"


def test_the_mode_belongs_to_the_home_not_to_one_process(
    store: AgentTaskStore, tmp_path: Path
) -> None:
    other = AgentTaskStore(tmp_path / "paos.db")
    try:
        other.set_task_slots("per_runtime")
        assert store.task_slots() == "per_runtime"
        create(store, "task-a", "bind-a")
        create(other, "task-b", "bind-b")
    finally:
        other.close()


def test_global_cannot_be_restored_while_two_cells_have_tasks(store: AgentTaskStore) -> None:
    store.set_task_slots("per_runtime")
    create(store, "task-a", "bind-a")
    create(store, "task-b", "bind-b")
    with pytest.raises(TaskSlotTaken) as caught:
        store.set_task_slots("global")
    assert caught.value.code == "PAOS_TASK_SLOTS_BUSY"
    assert caught.value.details["active_task_ids"] == ["task-a", "task-b"]
    assert store.task_slots() == "per_runtime"
    store.transition("task-b", "cancelled", allowed_from={"executing"})
    store.set_task_slots("global")
    with pytest.raises(TaskSlotTaken):  # task-a now holds the home's one slot
        create(store, "task-c", "bind-b")


def test_an_unknown_mode_is_refused(store: AgentTaskStore) -> None:
    with pytest.raises(StoreError) as caught:
        store.set_task_slots("per_robot")  # type: ignore[arg-type]
    assert caught.value.code == "PAOS_TASK_SLOTS_INVALID"


# The store as it was before task slots: a constant unique index, no slot columns.
_OLD_SCHEMA = """
CREATE TABLE bindings (binding_id TEXT PRIMARY KEY, sha256 TEXT NOT NULL,
    document_json TEXT NOT NULL, created_at_ms INTEGER NOT NULL);
CREATE TABLE tasks (task_id TEXT PRIMARY KEY, binding_id TEXT NOT NULL
    REFERENCES bindings(binding_id), goal TEXT NOT NULL, contract_json TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('executing', 'awaiting_replan', 'cancelling',
    'succeeded', 'failed', 'cancelled')), replans_used INTEGER NOT NULL DEFAULT 0,
    outcome_json TEXT, created_at_ms INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL,
    terminal_at_ms INTEGER);
CREATE UNIQUE INDEX one_active_task ON tasks ((1))
    WHERE state IN ('executing', 'awaiting_replan', 'cancelling');
CREATE TRIGGER terminal_task_frozen BEFORE UPDATE ON tasks
    WHEN OLD.state IN ('succeeded', 'failed', 'cancelled')
BEGIN SELECT RAISE(ABORT, 'PAOS_TASK_TERMINAL'); END;
INSERT INTO bindings VALUES ('bind-a', 'sha', '{"skill":"cell-a","runtime_instance":"rt-a"}', 1);
INSERT INTO tasks VALUES ('old-done', 'bind-a', 'g', '{}', 'succeeded', 0, NULL, 1, 2, 2);
INSERT INTO tasks VALUES ('old-live', 'bind-a', 'g', '{}', 'executing', 0, NULL, 3, 3, NULL);
"""


def test_an_older_store_is_upgraded_and_its_live_task_keeps_the_slot(tmp_path: Path) -> None:
    path = tmp_path / "paos.db"
    old = sqlite3.connect(path)
    old.executescript(_OLD_SCHEMA)
    old.close()
    store = AgentTaskStore(path)
    try:
        store.put_binding("bind-b", "sha", CELLS["bind-b"])
        assert store.task("old-done").state == "succeeded"
        with pytest.raises(TaskSlotTaken) as caught:
            create(store, "new", "bind-b")
        assert caught.value.details["active_task_id"] == "old-live"
        store.set_task_slots("per_runtime")
        create(store, "new", "bind-b")  # another cell: the old task keeps only cell-a's
        with pytest.raises(TaskSlotTaken):
            create(store, "new-a", "bind-a")
    finally:
        store.close()
    raw = sqlite3.connect(path)
    indexes = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    raw.close()
    assert "one_active_task" not in indexes
    assert "one_active_task_slot" in indexes


def _race(path: str, task_id: str, binding_id: str, start: Any, out: Any) -> None:
    store = AgentTaskStore(path)
    start.wait(10)
    try:
        create(store, task_id, binding_id)
        out.put(binding_id)
    except TaskSlotTaken:
        out.put("refused")
    finally:
        store.close()


def test_processes_racing_per_runtime_get_exactly_one_task_per_cell(store: AgentTaskStore) -> None:
    store.set_task_slots("per_runtime")
    context = multiprocessing.get_context("spawn")
    start, out = context.Event(), context.Queue()
    plan = [("a1", "bind-a"), ("a2", "bind-a"), ("b1", "bind-b"), ("b2", "bind-b")]
    workers = [
        context.Process(target=_race, args=(str(store.path), task_id, binding, start, out))
        for task_id, binding in plan
    ]
    for worker in workers:
        worker.start()
    start.set()
    outcomes = sorted(out.get(timeout=30) for _ in workers)
    for worker in workers:
        worker.join(timeout=30)
    assert outcomes == ["bind-a", "bind-b", "refused", "refused"]
    assert len(store.active_tasks()) == 2


@pytest.mark.anyio
async def test_with_two_active_tasks_a_call_naming_no_task_lists_the_cells(
    tmp_path: Path,
) -> None:
    from doraforge.paos.agent_tools import TOOLS
    from doraforge.paos.home import PaosHome, open_service

    service = open_service(PaosHome(tmp_path / "home"))
    try:
        bound: dict[str, Any] = {"version": "1", "profile": "sim", "manifest_sha256": None}
        bound |= {"skill_md_sha256": None, "node_artifacts": [], "tools": {}}
        for name in ("cell-a", "cell-b"):
            document = {**bound, "skill": name, "runtime_instance": f"rt-{name}"}
            document |= {"gateway_url": "http://127.0.0.1:9", "gateway_identity": {}}
            service.store.put_binding(f"bind-{name}", "sha", document)
        service.store.set_task_slots("per_runtime")
        for name in ("cell-a", "cell-b"):
            create(service.store, f"task-{name}", f"bind-{name}")
        answer = await TOOLS["forge_tool_query"](service, {"tool_id": "arm.state"})
    finally:
        await service.aclose()
        service.store.close()
    assert answer["ok"] is False
    error = answer["error"]
    assert error["code"] == "PAOS_CELL_AMBIGUOUS"
    assert error["candidates"] == [
        {"task_id": "task-cell-a", "skill": "cell-a", "runtime_instance_id": "rt-cell-a"},
        {"task_id": "task-cell-b", "skill": "cell-b", "runtime_instance_id": "rt-cell-b"},
    ]
