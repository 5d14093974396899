"""Reading a skill's node logs as an operator does: its nodes' own lines, not Dora's.

``dora logs --log-format json`` gives one JSON object per line. Dora's own diagnostics
(queue-size drops, zenoh paths, daemon readiness) carry a ``target`` inside Dora's crates
(``dora_node_api::…``, ``dora_daemon::…``) or its transport's (``zenoh::…``); a node's prints
and logging do not. They are
hidden by default because on a busy camera stream they outnumber everything else a
hundred to one; ``keep_dora`` keeps them. The coordinator's stream and Dora's ``out/``
files spell the fields differently (``node_id``/``node``, ``message``/``msg``,
``timestamp``/``ts``): both are read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

# Dora's crates (dora_node_api, dora_daemon, dora_coordinator …) and its transport's
# (zenoh, zenoh_transport …): neither is the node's own output.
_DORA_TARGETS = ("dora", "zenoh")


@dataclass(frozen=True)
class LogLine:
    """One log line: when, how severe, which node, what, and the logger's target."""

    message: str
    node: str | None = None
    level: str | None = None
    time: str | None = None
    target: str | None = None

    @property
    def from_dora(self) -> bool:
        """Whether Dora itself wrote this line (a diagnostic, not the node's output)."""
        return (self.target or "").split("::", 1)[0].startswith(_DORA_TARGETS)

    def render(self) -> str:
        """``2026-12-01 11:35:16.740 WARN  camera: message`` (local time)."""
        head = " ".join(part for part in (_local(self.time), f"{self.level or '':5s}") if part)
        node = f"{self.node}: " if self.node else ""
        return f"{head} {node}{self.message}".strip()


def parse(line: str) -> LogLine:
    """A ``dora logs --log-format json`` line; any other line is kept as its text."""
    try:
        data = json.loads(line)
    except ValueError:
        return LogLine(line.rstrip("\n"))
    if not isinstance(data, dict):
        return LogLine(line.rstrip("\n"))
    return LogLine(
        message=str(data.get("message", data.get("msg", ""))).rstrip("\n"),
        node=_text(data.get("node_id", data.get("node"))),
        level=(_text(data.get("level")) or "").upper() or None,
        time=_text(data.get("timestamp", data.get("ts"))),
        target=_text(data.get("target")),
    )


def select(
    lines: Iterable[str], *, keep_dora: bool, last: int | None = None
) -> tuple[list[str], int]:
    """The rendered lines to show (the ``last`` ones, when given) and how many of Dora's
    own diagnostics were hidden."""
    shown: list[str] = []
    hidden = 0
    for raw in lines:
        if not raw.strip():
            continue
        line = parse(raw)
        if line.from_dora and not keep_dora:
            hidden += 1
            continue
        shown.append(line.render())
    return (shown[-last:] if last else shown), hidden


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _local(stamp: str | None) -> str:
    if not stamp:
        return ""
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
