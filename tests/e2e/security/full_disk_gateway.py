"""``python full_disk_gateway.py MARKER -m doraforge.gateway ARG...``: a filling disk.

Runs ``python -m doraforge.gateway ARG...`` unchanged except for its journal writer: while
the file
``MARKER`` exists, every journal write fails as a full disk does (``ENOSPC``) before any
byte is written; remove ``MARKER`` and writes succeed again. The command line keeps
``-m doraforge.gateway`` so the e2e helpers find the node as they find the real one.
"""

from __future__ import annotations

import errno
import os
import runpy
import sys
from collections.abc import Iterable
from pathlib import Path

import doraforge.gateway.main
from doraforge.gateway.journal import FileJournal, JournalRecord


def full_disk_journal(marker: Path) -> type[FileJournal]:
    """A FileJournal whose writes fail with ENOSPC while ``marker`` exists."""

    class FullDiskJournal(FileJournal):
        def append(self, record: JournalRecord) -> None:
            _refuse_while(marker)
            super().append(record)

        def compact(self, records: Iterable[JournalRecord]) -> None:
            _refuse_while(marker)
            super().compact(records)

    return FullDiskJournal


def _refuse_while(marker: Path) -> None:
    if marker.exists():
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def main(argv: list[str]) -> None:
    """Install the writer, then run the ``-m`` module with the remaining arguments."""
    marker, flag, module, *rest = argv[1:]
    if flag != "-m":
        raise SystemExit(__doc__)
    # The name the Gateway's main module looks the journal class up by, replaced in place.
    vars(doraforge.gateway.main)["FileJournal"] = full_disk_journal(Path(marker))
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv)
