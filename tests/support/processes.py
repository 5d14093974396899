"""Process helpers: the tree below a process (for the tests that check what a command
leaves running), and a command run to its end or killed with everything it started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class Finished:
    """A command that ended: its exit status and both output streams."""

    returncode: int
    stdout: str
    stderr: str


def run_bounded(
    command: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    stdin: str | None = None,
) -> Finished:
    """Run ``command`` in a session of its own, ``stdin`` written to it (else none), and
    wait at most ``timeout``. Past that, or when the wait itself is interrupted, its whole
    process group (whatever it started too) is SIGKILLed; a timeout then raises
    ``subprocess.TimeoutExpired`` carrying the output so far. It never outlives the call."""
    process = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        out, err = process.communicate()
        raise subprocess.TimeoutExpired(list(command), timeout, out, err) from None
    finally:
        if process.poll() is None:
            _kill_group(process)
            process.communicate()
    return Finished(process.returncode, out, err)


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def survivors(processes: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Those of ``processes`` still running ``timeout`` seconds on (a zombie, whose parent
    has yet to reap it, counts as ended; so does one that vanished meanwhile)."""
    _, alive = psutil.wait_procs(list(processes), timeout=timeout)
    running = []
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.status() != psutil.STATUS_ZOMBIE:
                running.append(process)
    return running


def processes_of(pids: Iterable[int]) -> list[psutil.Process]:
    """The live processes of ``pids`` (one that has already exited is left out)."""
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            found.append(psutil.Process(pid))
    return found


def carrying(token: str) -> list[int]:
    """Pids of the live processes (zombies left out) whose command line carries ``token``:
    what a test started, found however it was re-parented or re-sessioned."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            carries = token.encode() in (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # it ended while we looked
        if carries and state != "Z":
            found.append(int(entry.name))
    return found


def kill_carrying(token: str) -> None:
    """SIGKILL every process :func:`carrying` ``token`` (a test's cleanup)."""
    for pid in carrying(token):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
