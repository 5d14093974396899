"""``skill status`` and ``task list`` read as people need: the failure reason, times of day,
and ids whole even at 80 columns (the width the CLI renders at when not on a terminal)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from doraforge.cli import main
from doraforge.cli.output import local_time
from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.skill_runtime.runtime_state import RecordedError, RuntimeState, utc_now, write_state

GOAL = "the red cube rests inside the green target zone, seen by the scene camera"


def run(capsys: pytest.CaptureFixture[str], home: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["--home", str(home), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def failed_state(home: PaosHome, name: str) -> RuntimeState:
    now = utc_now()
    state = RuntimeState(
        name=name,
        version="1.0.0",
        profile="sim",
        state="failed",
        runtime_instance_id="rt-0123",
        dataflow_name=name,
        coordinator_port=40001,
        gateway_url="http://127.0.0.1:9201",
        started_at=now,
        updated_at=now,
        error=RecordedError(
            code="SKILL_DATAFLOW_LOST", message="the dataflow exited while running"
        ),
    )
    home.runtime_dir.mkdir(parents=True, exist_ok=True)
    return write_state(home.runtime_dir, state)


def test_status_lists_a_failed_skill_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = PaosHome(tmp_path)
    state = failed_state(home, "pick-place")
    code, out, _ = run(capsys, tmp_path, "skill", "status")
    assert code == 0
    assert "pick-place: " not in out  # the reason line names the skill and its state
    assert (
        "pick-place failed: SKILL_DATAFLOW_LOST: the dataflow exited while running"
        in out.splitlines()
    )
    assert local_time(state.updated_at.isoformat()) in out
    assert "http://127.0.0.1:9201" in out  # whole, not cut at 80 columns


def test_status_json_keeps_the_recorded_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failed_state(PaosHome(tmp_path), "pick-place")
    code, out, _ = run(capsys, tmp_path, "--json", "skill", "status")
    assert code == 0
    (only,) = json.loads(out)
    assert only["error"]["code"] == "SKILL_DATAFLOW_LOST"


def new_tasks(home: PaosHome, count: int) -> list[str]:
    store = AgentTaskStore(home.store_path)
    ids = []
    for index in range(count):
        store.put_binding(f"bind_{index}", "0" * 64, {"skill": "pick-place"})
        task_id = f"task_{index:032x}"
        store.create_task(
            task_id=task_id,
            revision_id=f"rev_{index}",
            binding_id=f"bind_{index}",
            goal=GOAL,
            contract={},
        )
        store.transition(task_id, "failed", allowed_from={"executing"})
        ids.append(task_id)
    store.close()
    return ids


def test_task_list_shows_whole_ids_and_times_of_day(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = PaosHome(tmp_path)
    ids = new_tasks(home, 2)
    code, out, _ = run(capsys, tmp_path, "task", "list")
    assert code == 0
    assert all(len(line) <= 80 for line in out.splitlines())
    for task_id in ids:
        assert task_id in out  # 37 characters, never cut
    store = AgentTaskStore(home.store_path)
    created = store.tasks()[0].public()["created_at_ms"]
    store.close()
    assert local_time(created) in out  # a time of day (the tasks were made today) ...
    assert len(local_time(created)) == len("11:52:26")
    assert str(created) not in out  # ... not epoch milliseconds


def test_task_list_json_keeps_epoch_milliseconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new_tasks(PaosHome(tmp_path), 1)
    code, out, _ = run(capsys, tmp_path, "--json", "task", "list")
    assert code == 0
    assert isinstance(json.loads(out)[0]["created_at_ms"], int)


def test_a_time_today_is_the_time_of_day_and_an_older_one_has_its_date() -> None:
    now = datetime(2026, 12, 1, 12, 0, 0).astimezone()
    earlier = now - timedelta(hours=1)
    assert local_time(int(earlier.timestamp() * 1000), now=now) == earlier.strftime("%H:%M:%S")
    older = now - timedelta(days=3)
    assert local_time(older.isoformat(), now=now) == older.strftime("%Y-%m-%d %H:%M")
    assert local_time(None) == ""


def test_status_in_a_home_where_nothing_was_started_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, tmp_path, "skill", "status")
    assert code == 0
    assert out.startswith("no skill has been started in this home; `doraforge skill list`")
    assert json.loads(run(capsys, tmp_path, "--json", "skill", "status")[1]) == []
