"""An HTML report of a finished task: verdict, before/after frames side by side, timeline."""

from __future__ import annotations

import html
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _time(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S.%f")[:-3]


def evidence_pair(
    described: dict[str, Any],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The first ``before`` and the last ``after`` frame that were captured."""
    frames = [a for a in described["evidence"] if a.get("error") is None]
    before = next((a for a in frames if a["phase"] == "before"), None)
    after = next((a for a in reversed(frames) if a["phase"] == "after"), None)
    return before, after


def write_report(described: dict[str, Any], workspace: Path, out_dir: Path) -> Path:
    """Write ``report.html`` (and copies of the two frames) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    before, after = evidence_pair(described)
    images = []
    for label, artifact in (("before", before), ("after", after)):
        if artifact is None:
            images.append(f"<figure><figcaption>{label}: not captured</figcaption></figure>")
            continue
        target = out_dir / f"{label}.png"
        shutil.copyfile(workspace / artifact["path"], target)
        images.append(
            f'<figure><img src="{target.name}" alt="{label}"><figcaption>{label} · seq '
            f"{artifact['seq']} · sha256 {artifact['sha256'][:12]}…</figcaption></figure>"
        )
    path = out_dir / "report.html"
    path.write_text(_page(described, "".join(images)), encoding="utf-8")
    return path


def _page(described: dict[str, Any], images: str) -> str:
    task = described["task"]
    verdict = (described["revisions"][-1].get("verdict") or {}) if described["revisions"] else {}
    criteria = "".join(
        f"<tr><td>{html.escape(r['criterion_id'])}</td><td class='{r['status']}'>{r['status']}"
        f"</td><td>{html.escape(r.get('detail', ''))}</td></tr>"
        for r in verdict.get("results", [])
    )
    rows = "".join(
        f"<tr><td>{_time(r['created_at_ms'])}</td><td>{_time(r['terminal_at_ms'])}</td>"
        f"<td>{html.escape(r['tool_id'])}</td><td>{r['semantics']}</td>"
        f"<td class='{r['state']}'>{r['state']}</td></tr>"
        for r in described["records"]
    )
    binding = described["binding"]
    skill = html.escape(f"{binding['skill']} {binding['version']}")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>doraforge task {task["task_id"]}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
.frames {{ display: flex; gap: 1rem; }} figure {{ margin: 0; }}
img {{ max-width: 480px; border: 1px solid #ccc; }}
table {{ border-collapse: collapse; margin: 1rem 0; }}
td, th {{ border: 1px solid #ddd; padding: .3rem .6rem; font-size: .9rem; }}
.pass, .completed, .succeeded {{ color: #176b1a; font-weight: 600; }}
.fail, .failed, .unknown {{ color: #a31515; font-weight: 600; }}
</style></head><body>
<h1>{html.escape(task["goal"])}</h1>
<p>task <code>{task["task_id"]}</code> · state <b class="{task["state"]}">{task["state"]}</b>
 · verdict <b>{html.escape(str(verdict.get("status", "none")))}</b>
 · skill {skill}</p>
<div class="frames">{images}</div>
<h2>Criteria</h2><table><tr><th>criterion</th><th>status</th><th>detail</th></tr>{criteria}</table>
<h2>Timeline</h2>
<table><tr><th>started</th><th>ended</th><th>tool</th><th>kind</th><th>state</th></tr>{rows}</table>
</body></html>
"""
