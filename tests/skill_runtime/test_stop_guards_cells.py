"""A skill's stop guard sees its own cell's task, also behind another cell's older one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doraforge.paos.store import AgentTaskStore
from doraforge.skill_runtime import stop_guards


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AgentTaskStore]:
    store = AgentTaskStore(tmp_path / "paos.db")
    store.set_task_slots("per_runtime")
    for skill in ("cell-1", "cell-2", "cell-3"):
        store.put_binding(f"bind-{skill}", "sha", {"skill": skill, "runtime_instance": "rt"})
    yield store
    store.close()


def _create(store: AgentTaskStore, skill: str) -> str:
    task_id = f"task-{skill}"
    store.create_task(
        task_id=task_id,
        revision_id=f"{task_id}-r1",
        binding_id=f"bind-{skill}",
        goal="g",
        contract={"mode": "off"},
    )
    return task_id


def test_the_younger_cells_task_blocks_its_own_stop(store: AgentTaskStore) -> None:
    _create(store, "cell-1")  # the oldest active task belongs to another cell
    younger = _create(store, "cell-2")
    bound = stop_guards.bound_task(store, "cell-2")
    assert bound is not None
    assert bound[0] == younger
    assert store.active_task_of("cell-3") is None


def test_each_cell_names_only_its_own_task(store: AgentTaskStore) -> None:
    first, second = _create(store, "cell-1"), _create(store, "cell-2")
    found = [store.active_task_of(s) for s in ("cell-1", "cell-2")]
    assert [t.task_id if t else None for t in found] == [first, second]


def test_a_refused_stop_names_the_task_and_the_commands_that_clear_it() -> None:
    found: list[dict[str, Any]] = [
        {"kind": "task_binding", "task_id": "task_7"},
        {"kind": "invocation", "record_id": "r", "invocation_id": "i", "state": "running"},
        {"kind": "gateway_invocations", "tool_id": "arm.home", "active": 1},
    ]
    assert stop_guards.refusal("pick-place", found) == (
        "'pick-place' is bound to task task_7 (1 live invocation(s)); cancel the task with "
        "`doraforge task cancel task_7`, or stop it anyway with "
        "`doraforge skill stop pick-place --force` (audited)"
    )


def test_a_refusal_without_a_task_counts_the_gateways_live_invocations() -> None:
    found = [{"kind": "gateway_invocations", "tool_id": "arm.home", "active": 2}]
    assert stop_guards.refusal("pick-place", found).startswith(
        "'pick-place' has 2 live invocation(s); let them end, or stop it anyway with "
    )
