"""A finished task's report: its own folder, every frame in capture order, reasons."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from doraforge.cli.report import verdict_lines, write_report

DATA = Path(__file__).parents[1] / "paos" / "data"


def described(task_id: str, workspace: Path, *, verdict: dict[str, Any] | None) -> dict[str, Any]:
    """A task as ``TaskService.describe`` returns it: three frames (taken in the order
    after-release, before, after-grasp, listed out of order) and one failed capture."""
    folder = workspace / "evidence" / task_id
    folder.mkdir(parents=True)
    for name in ("before", "after"):
        shutil.copy(DATA / f"pick_place_{name}.png", folder / f"{name}.png")

    def frame(phase: str, name: str, at: int, record: str | None) -> dict[str, Any]:
        path = f"evidence/{task_id}/{name}.png"
        return {
            "artifact_id": f"ev-{at}",
            "phase": phase,
            "source": "scene",
            "seq": at,
            "captured_at_ns": at * 1_000_000_000,
            "record_id": record,
            "path": path,
            "error": None,
        }

    evidence = [
        frame("after", "after", 30, "rec_2"),
        frame("before", "before", 10, None),
        frame("after", "before", 20, "rec_1"),
        {**frame("after", "none", 40, "rec_2"), "path": None, "error": "no frame in 5 s"},
    ]
    records = [
        {
            "record_id": "rec_1",
            "tool_id": "gripper.grasp",
            "semantics": "action",
            "state": "completed",
            "created_at_ms": 15_000,
            "terminal_at_ms": 19_000,
        },
        {
            "record_id": "rec_2",
            "tool_id": "gripper.release",
            "semantics": "action",
            "state": "completed",
            "created_at_ms": 25_000,
            "terminal_at_ms": 29_000,
        },
    ]
    return {
        "task": {
            "task_id": task_id,
            "goal": "cube <in> zone",
            "state": "failed",
            "created_at_ms": 1_000,
            "outcome": {"execution_ok": True},
        },
        "binding": {
            "skill": "pick-place",
            "version": "1.0.0",
            "profile": "sim-openarm",
            "robots": ["openarm"],
        },
        "revisions": [{"verdict": verdict}],
        "records": records,
        "evidence": evidence,
    }


FAILED = {
    "status": "failure",
    "results": [
        {"criterion_id": "cube_in_zone", "status": "pass", "detail": "inside the box"},
        {
            "criterion_id": "cube_seen_in_zone",
            "status": "fail",
            "detail": "object inside the target but it did not move: moved 1.9 px",
        },
    ],
}


def test_each_task_has_its_own_report_and_the_next_run_does_not_overwrite_it(
    tmp_path: Path,
) -> None:
    workspace, out = tmp_path / "home", tmp_path / "out"
    first = write_report(described("task_a", workspace, verdict=FAILED), workspace, out)
    second = write_report(described("task_b", workspace, verdict=FAILED), workspace, out)
    assert first == out / "task_a" / "report.html"
    assert second == out / "task_b" / "report.html"
    assert "task_a" in first.read_text(encoding="utf-8")


def test_the_filmstrip_shows_every_frame_in_capture_order(tmp_path: Path) -> None:
    workspace = tmp_path / "home"
    report = write_report(described("task_a", workspace, verdict=FAILED), workspace, tmp_path)
    page = report.read_text(encoding="utf-8")
    frames = sorted(p.name for p in (report.parent / "frames").iterdir())
    assert frames == ["01-before-scene.png", "02-after-scene.png", "03-after-scene.png"]
    positions = [page.index(f'src="frames/{name}"') for name in frames]
    assert positions == sorted(positions)
    assert "1. before task start" in page
    assert "2. after gripper.grasp" in page
    assert "3. after gripper.release" in page
    assert "4. after gripper.release<br>not captured: no frame in 5 s" in page
    # The copies outlive the home they came from (the demo's is temporary).
    shutil.rmtree(workspace)
    assert (report.parent / "frames" / frames[0]).read_bytes()[:4] == b"\x89PNG"


def test_the_report_has_each_criterion_with_its_reason_and_escapes_text(tmp_path: Path) -> None:
    workspace = tmp_path / "home"
    page = write_report(described("task_a", workspace, verdict=FAILED), workspace, tmp_path)
    text = page.read_text(encoding="utf-8")
    assert "object inside the target but it did not move: moved 1.9 px" in text
    assert "<td class='fail'>fail</td>" in text
    assert "cube &lt;in&gt; zone" in text
    assert "cube <in> zone" not in text


def test_verdict_lines_give_each_criterion_its_status_and_reason(tmp_path: Path) -> None:
    lines = verdict_lines(described("task_a", tmp_path, verdict=FAILED))
    assert lines[0] == "verdict: failure · task failed · robot openarm"
    assert lines[1].startswith(" ✓ cube_in_zone")
    assert lines[2].startswith(" ✗ cube_seen_in_zone")
    assert lines[2].endswith("object inside the target but it did not move: moved 1.9 px")


def test_a_task_cancelled_before_verification_says_so(tmp_path: Path) -> None:
    task = described("task_a", tmp_path, verdict=None)
    task["task"].update(
        state="cancelled", outcome={"cancelled": True, "reason": "operator_requested"}
    )
    assert verdict_lines(task) == [
        "verdict: not verified · task cancelled · robot openarm",
        "   cancelled before verification (operator_requested)",
    ]


def test_a_verified_task_whose_step_failed_says_why_it_failed(tmp_path: Path) -> None:
    passed = {"status": "success", "results": [FAILED["results"][0]]}
    task = described("task_a", tmp_path, verdict=passed)
    task["task"]["outcome"] = {"execution_ok": False, "verdict": "success"}
    assert verdict_lines(task) == [
        "verdict: success · task failed · robot openarm",
        " ✓ cube_in_zone         pass     inside the box",
        "   a step did not complete (its error is above): the task failed",
    ]


def test_the_report_names_the_robot_that_ran(tmp_path: Path) -> None:
    workspace = tmp_path / "home"
    page = write_report(described("task_a", workspace, verdict=FAILED), workspace, tmp_path)
    assert 'robot <b class="robot">openarm</b>' in page.read_text(encoding="utf-8")


def test_a_binding_without_robots_says_the_tools_name_none(tmp_path: Path) -> None:
    task = described("task_a", tmp_path, verdict=FAILED)
    del task["binding"]["robots"]
    assert verdict_lines(task)[0].endswith(
        "robot not named by its tools (skill profile sim-openarm)"
    )


def test_frames_are_captioned_with_the_step_names_the_agent_gave(tmp_path: Path) -> None:
    workspace = tmp_path / "home"
    task = described("task_a", workspace, verdict=FAILED)
    task["records"][0]["step"] = "grasp"
    task["records"][1]["step"] = "release"
    task["evidence"][0]["step"] = "release"
    task["evidence"][1]["step"] = "move above the cube"
    page = write_report(task, workspace, tmp_path).read_text(encoding="utf-8")
    assert "1. before move above the cube" in page
    assert "2. after grasp" in page
    assert "3. after release" in page
    assert "<td>grasp</td><td>gripper.grasp</td>" in page


def test_a_task_cancelled_before_verification_has_cancelled_as_its_verdict(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "home"
    task = described("task_a", workspace, verdict=None)
    task["task"].update(state="cancelled", outcome={"cancelled": True})
    page = write_report(task, workspace, tmp_path).read_text(encoding="utf-8")
    assert 'verdict <b class="cancelled">cancelled</b>' in page
