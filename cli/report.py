"""A finished task as people read it: the verdict in a few lines, and an HTML report.

Every task has its own folder, ``<out>/<task_id>/``, holding ``report.html`` and a copy of
every evidence frame (``frames/``), so the next run never overwrites this one and the
report outlives the PAOS home it came from (the demo's home is temporary). The report
names the robot that ran, shows every frame in capture order as a filmstrip, each
captioned with the step it was taken around (the name its caller gave, e.g. "descend",
else the tool), then each criterion with its reason, the verdict and the timeline.
"""

from __future__ import annotations

import html
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

REPORT_NAME = "report.html"
FRAMES_DIR = "frames"


@dataclass(frozen=True)
class Frame:
    """One evidence frame of the filmstrip: its copy beside the report, or why it is
    missing, and the step (tool) it was captured around."""

    artifact: dict[str, Any]
    step: str
    file: str | None


def _time(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000).astimezone().strftime("%H:%M:%S.%f")[:-3]


def final_verdict(described: dict[str, Any]) -> dict[str, Any]:
    """The verdict of the task's last revision (``{}`` when it was never verified)."""
    revisions = described["revisions"]
    verdict = (revisions[-1].get("verdict") or {}) if revisions else {}
    return dict(verdict)


def robot_name(described: dict[str, Any]) -> str:
    """The robot the task ran on, as its bound tools name it (``sim_arm``, ``openarm``)."""
    binding = described["binding"]
    robots = binding.get("robots") or []
    if robots:
        return ", ".join(str(robot) for robot in robots)
    return f"not named by its tools (skill profile {binding.get('profile', 'unknown')})"


def shown_verdict(described: dict[str, Any]) -> str:
    """The verdict as shown: the last revision's, else how the task ended without one
    (``cancelled``), else ``not verified``."""
    status = final_verdict(described).get("status")
    if status:
        return str(status)
    return "cancelled" if described["task"]["state"] == "cancelled" else "not verified"


def verdict_lines(described: dict[str, Any]) -> list[str]:
    """The verdict for a terminal: one line for the outcome, one per criterion with its
    status and reason (a failing one marked ``✗``), and why nothing was verified when
    the task ended before verification (cancelled, failed execution)."""
    task, verdict = described["task"], final_verdict(described)
    status = verdict.get("status") or "not verified"
    lines = [f"verdict: {status} · task {task['state']} · robot {robot_name(described)}"]
    for result in verdict.get("results", []):
        mark = "✓" if result["status"] == "pass" else "✗"
        reason = " ".join(str(result.get("detail", "")).split())
        lines.append(f" {mark} {result['criterion_id']:20s} {result['status']:8s} {reason}")
    outcome = task.get("outcome") or {}
    if verdict and outcome.get("execution_ok") is False:
        lines.append("   a step did not complete (its error is above): the task failed")
    if not verdict:
        if outcome.get("cancelled"):
            lines.append(f"   cancelled before verification ({outcome.get('reason', 'requested')})")
        elif outcome:
            lines.append(f"   ended before verification: {_outcome_text(outcome)}")
    return lines


def _outcome_text(outcome: dict[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in sorted(outcome.items()))


def task_folder(out_dir: Path, task_id: str) -> Path:
    """``<out_dir>/<task_id>``: where one task's report and frames live."""
    return out_dir / task_id


def write_report(described: dict[str, Any], workspace: Path, out_dir: Path) -> Path:
    """Write ``<out_dir>/<task_id>/report.html`` with a copy of every evidence frame
    (from ``workspace``, the PAOS home's) and return its path. Raises ``OSError`` when
    the folder cannot be written."""
    folder = task_folder(out_dir, described["task"]["task_id"])
    (folder / FRAMES_DIR).mkdir(parents=True, exist_ok=True)
    frames = copy_frames(described, workspace, folder)
    path = folder / REPORT_NAME
    path.write_text(_page(described, frames), encoding="utf-8")
    return path


def copy_frames(described: dict[str, Any], workspace: Path, folder: Path) -> list[Frame]:
    """Every evidence artifact in capture order, each frame copied to ``folder/frames``
    as ``NN-<phase>-<source>.png``; a missing capture or file is kept with ``file=None``."""
    steps = {record["record_id"]: _step(record) for record in described["records"]}
    ordered = sorted(described["evidence"], key=lambda a: a.get("captured_at_ns") or 0)
    frames = []
    for index, artifact in enumerate(ordered, start=1):
        record_step = steps.get(artifact.get("record_id") or "", "task start")
        step = artifact.get("step") or record_step
        source = workspace / artifact["path"] if artifact.get("path") else None
        file = None
        if artifact.get("error") is None and source is not None and source.is_file():
            file = f"{FRAMES_DIR}/{index:02d}-{artifact['phase']}-{artifact['source']}.png"
            shutil.copyfile(source, folder / file)
        frames.append(Frame(artifact, step, file))
    return frames


def _step(record: dict[str, Any]) -> str:
    """A record's step as its caller named it, else its tool."""
    return str(record.get("step") or record["tool_id"])


def _figure(index: int, frame: Frame) -> str:
    artifact = frame.artifact
    when = _time((artifact.get("captured_at_ns") or 0) // 1_000_000 or None)
    label = html.escape(f"{index}. {artifact['phase']} {frame.step}")
    meta = html.escape(f"{artifact['source']} · seq {artifact.get('seq')} · {when}")
    if frame.file is None:
        why = html.escape(str(artifact.get("error") or "file missing"))
        caption = f"<figcaption>{label}<br>not captured: {why}</figcaption>"
        return f'<figure class="missing">{caption}</figure>'
    return (
        f'<figure><a href="{frame.file}"><img src="{frame.file}" alt="{label}"></a>'
        f"<figcaption>{label}<br><small>{meta}</small></figcaption></figure>"
    )


def _criteria(verdict: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(r['criterion_id'])}</td><td class='{r['status']}'>{r['status']}"
        f"</td><td>{html.escape(str(r.get('detail', '')))}</td></tr>"
        for r in verdict.get("results", [])
    )
    return rows or "<tr><td colspan=3>not verified</td></tr>"


def _timeline(described: dict[str, Any]) -> str:
    return "".join(
        f"<tr><td>{_time(r['created_at_ms'])}</td><td>{_time(r['terminal_at_ms'])}</td>"
        f"<td>{html.escape(str(r.get('step') or ''))}</td>"
        f"<td>{html.escape(r['tool_id'])}</td><td>{r['semantics']}</td>"
        f"<td class='{r['state']}'>{r['state']}</td></tr>"
        for r in described["records"]
    )


def _page(described: dict[str, Any], frames: list[Frame]) -> str:
    task, verdict = described["task"], final_verdict(described)
    binding = described["binding"]
    skill = html.escape(f"{binding['skill']} {binding['version']}")
    strip = "".join(_figure(index, frame) for index, frame in enumerate(frames, start=1))
    status = html.escape(shown_verdict(described))
    robot = html.escape(robot_name(described))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>doraforge task {task["task_id"]}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
.filmstrip {{ display: flex; flex-wrap: wrap; gap: .6rem; }}
figure {{ margin: 0; flex: 0 0 auto; width: 240px; font-size: .8rem; }}
figure.missing {{ border: 1px dashed #a31515; padding: .4rem; }}
img {{ width: 240px; border: 1px solid #ccc; display: block; }}
table {{ border-collapse: collapse; margin: 1rem 0; }}
td, th {{ border: 1px solid #ddd; padding: .3rem .6rem; font-size: .9rem; text-align: left; }}
.pass, .completed, .succeeded, .success {{ color: #176b1a; font-weight: 600; }}
.fail, .failed, .failure, .unknown, .cancelled {{ color: #a31515; font-weight: 600; }}
</style></head><body>
<h1>{html.escape(task["goal"])}</h1>
<p>task <code>{task["task_id"]}</code> · state <b class="{task["state"]}">{task["state"]}</b>
 · verdict <b class="{status}">{status}</b> · robot <b class="robot">{robot}</b>
 · skill {skill}
 · created {_time(task.get("created_at_ms"))}</p>
<h2>Evidence ({len(frames)} frames, in capture order)</h2>
<div class="filmstrip">{strip or "<p>no evidence was captured</p>"}</div>
<h2>Criteria</h2><table><tr><th>criterion</th><th>status</th><th>reason</th></tr>
{_criteria(verdict)}</table>
<h2>Timeline</h2>
<table><tr><th>started</th><th>ended</th><th>step</th><th>tool</th><th>kind</th><th>state</th></tr>
{_timeline(described)}</table>
</body></html>
"""
