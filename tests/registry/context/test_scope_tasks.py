"""The tasks scope over a real SQLite task store: summaries, verdicts and criteria
counts under opaque references; never the task id, arguments, raw outputs or targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.registry.context.scopes import TasksSource
from doraforge.registry.context.source import SourceError, opaque_ref
from tests.registry.context.scope_support import (
    MEASURED,
    RUNTIME_INSTANCE,
    SKILL,
    TARGET,
    leaks,
    recorded_tasks,
    returned,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def home(tmp_path: Path) -> PaosHome:
    return PaosHome(tmp_path / "home")


async def test_a_finished_task_is_its_skill_state_verdict_criteria_and_times(
    home: PaosHome, tmp_path: Path
) -> None:
    (task_id,) = recorded_tasks(home, 1)
    snapshot = await TasksSource(home).snapshot()
    assert snapshot.status == "fresh"
    assert not snapshot.source_truncated
    (task,) = snapshot.items
    assert task.ref == opaque_ref("tasks", task_id)
    assert task.kind == "task"
    assert task.label == f"{SKILL} task: succeeded, verdict success"
    assert task.route == "/console/#/tasks"
    metadata = dict(task.metadata)
    assert metadata["skill"] == SKILL
    assert metadata["skill_version"] == "1.0.0"
    assert metadata["runtime_instance_id"] == RUNTIME_INSTANCE  # the cell the task is bound to
    assert (metadata["state"], metadata["verdict"], metadata["mode"]) == (
        "succeeded",
        "success",
        "enforce",
    )
    assert str(metadata["terminal_at"]).endswith("+00:00")
    assert task.counts["criteria"] == 2
    assert task.counts["revisions"] == 1
    assert task.counts["criteria_pass"] == 1
    assert task.counts["criteria_inconclusive"] == 1
    assert task.counts["evidence"] == 2
    # Criteria by id and kind only; the goal is private text.
    assert "cube_in_zone (state)" in task.text
    assert TARGET not in returned(task)
    # The goal's words match; its numbers (a target the agent spelled out) are gone.
    assert "put the red cube at x=#" in task.text
    assert not leaks(snapshot, TARGET)
    assert not leaks(snapshot, task_id, MEASURED, "less_than", str(tmp_path), "pose")


async def test_references_are_stable_across_snapshots(home: PaosHome) -> None:
    recorded_tasks(home, 2)
    source = TasksSource(home)
    first, second = await source.snapshot(), await source.snapshot()
    assert [i.ref for i in first.items] == [i.ref for i in second.items]
    assert len({i.ref for i in first.items}) == 2


async def test_the_scan_cap_keeps_the_newest_tasks_and_says_more_exist(home: PaosHome) -> None:
    ids = recorded_tasks(home, 3, frames=0)
    capped = await TasksSource(home).snapshot(limit=2)
    assert capped.source_truncated
    assert [i.ref for i in capped.items] == [opaque_ref("tasks", t) for t in ids[:0:-1]]
    whole = await TasksSource(home).snapshot(limit=3)
    assert len(whole.items) == 3
    assert not whole.source_truncated


async def test_a_home_without_a_store_has_no_tasks_and_gets_no_store(home: PaosHome) -> None:
    snapshot = await TasksSource(home).snapshot()
    assert snapshot.items == ()
    assert snapshot.status == "fresh"
    assert not home.store_path.exists()


async def test_an_unreadable_store_is_a_source_error_not_an_empty_scope(home: PaosHome) -> None:
    recorded_tasks(home, 1)
    home.store_path.write_bytes(b"not a database, a damaged file" * 200)
    with pytest.raises(SourceError) as caught:
        await TasksSource(home).snapshot()
    assert caught.value.code == "CONTEXT_STORE_UNAVAILABLE"
    assert str(home.root) not in caught.value.message
