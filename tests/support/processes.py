"""Process-tree helpers for the tests that check what a command leaves running."""

from __future__ import annotations

import psutil

#: A walk is retaken at most this often when a process below the root exits during it.
_WALKS = 10


def descendants(root: psutil.Process | int) -> list[psutil.Process]:
    """Every process below ``root`` (a process or a pid); ``[]`` once ``root`` has exited.

    psutil's recursive walk raises ``NoSuchProcess`` when *any* process below the root exits
    during the walk (benchmarks and runtimes start and end helpers all the time); such a walk
    is taken again instead of reporting an empty tree, which would hide what outlived it.
    """
    process = root if isinstance(root, psutil.Process) else psutil.Process(root)
    for _ in range(_WALKS):
        if not process.is_running():
            return []
        try:
            return process.children(recursive=True)
        except psutil.NoSuchProcess:
            continue
    return process.children(recursive=True)
