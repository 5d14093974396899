"""How the CLI talks: rich tables and progress for people, ``--json`` for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table


class Output:
    """One place that decides between human output and JSON."""

    def __init__(self, *, as_json: bool) -> None:
        self.as_json = as_json
        self.console = Console(stderr=False)
        self.errors = Console(stderr=True)

    def data(self, value: Any) -> None:
        """Print a result: JSON for scripts, pretty for people."""
        if self.as_json:
            print(json.dumps(value, indent=2, sort_keys=True, default=str))
        else:
            self.console.print_json(json.dumps(value, default=str))

    def table(
        self,
        title: str,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        raw: Any,
        *,
        whole: Sequence[str] = (),
        wrapped: Sequence[str] = (),
    ) -> None:
        """A table for people; ``raw`` as JSON for scripts.

        The ``whole`` columns (ids, states, times) are never cut or wrapped, however narrow
        the terminal, so an id can be copied into the next command; the ``wrapped`` ones
        (descriptions) wrap between words and are never cut; the others then give way
        (ending in …) when the terminal is too narrow for everything. Without ``whole``
        every column wraps.
        """
        if self.as_json:
            print(json.dumps(raw, indent=2, sort_keys=True, default=str))
            return
        cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
        # Light borders leave the text the room an 80-column terminal has.
        table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
        widths = [
            max([len(column), *(len(row[i]) for row in cells)]) for i, column in enumerate(columns)
        ]
        kept = sum(w for w, column in zip(widths, columns, strict=True) if column in whole)
        others = [column for column in columns if column not in whole and column not in wrapped]
        # Rich shrinks every column when a row is too wide; the others share what is left.
        room = self.console.width - kept - 3 * len(columns)
        share = max(8, room // len(others)) if others else 0
        for width, column in zip(widths, columns, strict=True):
            if not whole:
                table.add_column(column)
            elif column in whole:
                table.add_column(column, no_wrap=True, min_width=width)
            elif column in wrapped:
                table.add_column(column, overflow="fold")
            else:  # one line per row: a long text ends in … rather than in a tall cell
                table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=share)
        for row in cells:
            table.add_row(*row)
        self.console.print(table)

    def say(self, text: str) -> None:
        """A line of narration (silent under ``--json``)."""
        if not self.as_json:
            # soft_wrap: the terminal folds a long line; no newline is inserted into a path
            # or an id that a reader copies (or a test reads) from the output.
            self.console.print(text, highlight=False, soft_wrap=True)

    def fail(self, reason: str) -> None:
        """The one-line reason of a failure, on stderr."""
        # Plain print: a console would wrap a long reason over several lines.
        print(f"doraforge: {' '.join(reason.split())}", file=sys.stderr)

    @contextmanager
    def progress(self, label: str) -> Iterator[Any]:
        """A spinner with elapsed time while something long runs (plain lines off a TTY)."""
        if self.as_json or not sys.stderr.isatty():
            yield lambda message, elapsed=0.0: None
            return
        with self.errors.status(label) as status:
            yield lambda message, elapsed=0.0: status.update(f"{label}: {message} ({elapsed:.0f}s)")


def local_time(when: int | str | None, *, now: datetime | None = None) -> str:
    """When something happened, in this machine's time zone, for tables people read:
    ``11:34:13`` today, ``2026-11-30 18:02`` before (``--json`` keeps the stored form).
    ``when`` is epoch milliseconds or an ISO 8601 timestamp; empty for ``None``."""
    if when is None or when == "":
        return ""
    if isinstance(when, str):
        moment = datetime.fromisoformat(when.replace("Z", "+00:00")).astimezone()
    else:
        moment = datetime.fromtimestamp(when / 1000).astimezone()
    today = (now or datetime.now().astimezone()).date()
    return moment.strftime("%H:%M:%S" if moment.date() == today else "%Y-%m-%d %H:%M")
