"""How the CLI talks: rich tables and progress for people, ``--json`` for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

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
    ) -> None:
        """A table for people; ``raw`` as JSON for scripts.

        The ``whole`` columns (ids) are never cut or wrapped, however narrow the terminal,
        so they can be copied into the next command; the other columns wrap instead.
        """
        if self.as_json:
            print(json.dumps(raw, indent=2, sort_keys=True, default=str))
            return
        cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
        table = Table(title=title)
        for index, column in enumerate(columns):
            if column in whole:
                widest = max((len(row[index]) for row in cells), default=0)
                table.add_column(column, no_wrap=True, min_width=max(widest, len(column)))
            else:
                table.add_column(column)
        for row in cells:
            table.add_row(*row)
        self.console.print(table)

    def say(self, text: str) -> None:
        """A line of narration (silent under ``--json``)."""
        if not self.as_json:
            self.console.print(text, highlight=False)

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


def local_time(epoch_ms: int | None) -> str:
    """``2026-12-01 11:34:13`` in this machine's time zone, for tables people read
    (``--json`` keeps the epoch milliseconds); empty for ``None``."""
    if epoch_ms is None:
        return ""
    return datetime.fromtimestamp(epoch_ms / 1000).astimezone().strftime("%Y-%m-%d %H:%M:%S")
