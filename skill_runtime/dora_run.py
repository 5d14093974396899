"""Running development dataflows with `dora run` and the project's Dora settings.

Settings applied to every run: the shipped Zenoh overlay (no silent drops under bursts),
a private coordinator port (the default 6013 is machine-wide and ``dora down`` kills its
owner), and this interpreter's ``bin`` first on PATH with uv pinned to it
(:func:`node_interpreter_environment`) so ``path: python`` nodes run inside the project's
environment. The world node chooses its headless GL backend itself (EGL, else OSMesa)
unless ``MUJOCO_GL`` is set.

``dora run`` writes its ``out/`` logs next to the dataflow file, so a shipped dataflow
(package data, perhaps in a read-only ``site-packages``) runs from a :func:`private_copy`
in a run directory of its own (:func:`new_run_directory`), which also holds that run's
Gateway journal.

Stopping is bounded: :class:`Dataflow` asks ``dora run`` to stop (SIGINT), and after a
short grace kills ``dora run`` *and every process below it*. Dora starts each node in a
process group of its own, so killing ``dora run``'s group alone would leave the nodes
running. :func:`exit_on_sigterm` lets a script's ``with Dataflow(...)`` block unwind on
SIGTERM (``timeout``, a CI runner, ``kill``) as it does on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO

from doraforge.dataflows import ZENOH_OVERLAY
from doraforge.skill_runtime.dora import SHARED_DEFAULT_PORT
from doraforge.skill_runtime.errors import RuntimeStateError

#: Seconds ``dora run`` gets to stop its nodes after SIGINT before everything is killed:
#: an operator's Ctrl-C must end the run within 5 s.
STOP_GRACE_S = 3.0
#: Seconds ``dora run`` may spend on its own teardown once every node has exited.
LINGER_S = 0.3
_POLL_S = 0.05

# What a private copy of a dataflow folder leaves behind: earlier runs' logs and the
# package's own Python files.
_NOT_COPIED = shutil.ignore_patterns("out", "__pycache__", "*.py", "*.pyc")


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now, never Dora's machine-wide
    default coordinator port (whoever owns that one, ``dora down`` would kill)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port != SHARED_DEFAULT_PORT:
            return port


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something listens on ``host:port`` now.

    The probe binds with ``SO_REUSEADDR`` as uvicorn does, so connections of an earlier
    run lingering in TIME_WAIT do not count; a host that is not an address of this
    machine (a remote Gateway) cannot be probed and counts as free.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def refuse_busy_port(port: int, host: str = "127.0.0.1") -> None:
    """Raise :class:`RuntimeStateError` ``GATEWAY_PORT_BUSY`` naming ``port`` and the option
    that chooses another, when something already listens there (checked before Dora starts,
    whose Gateway would otherwise crash-loop on ``address already in use``)."""
    if port_in_use(port, host):
        raise RuntimeStateError(
            "GATEWAY_PORT_BUSY",
            f"port {port} is in use; pass --port N or stop what holds it",
            retryable=True,
            details={"port": port, "host": host},
        )


def descendants(pid: int) -> dict[int, str]:
    """Every live process below ``pid`` (Linux ``/proc/<pid>/task/*/children``), each with
    its start time: a pid is only ever signalled again while it still names the same
    process. Walks the tree down from ``pid`` instead of reading every process's stat, so
    it stays cheap enough to poll."""
    found: dict[int, str] = {}
    queue = _children(pid)
    while queue:
        child = queue.pop(0)
        fields = _stat_fields(child)
        if fields is None or child in found:
            continue
        found[child] = fields[19]
        queue.extend(_children(child))
    return found


def _children(pid: int) -> list[int]:
    pids: list[int] = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            pids.extend(int(word) for word in listing.read_text().split())
    return pids


def _stat_fields(pid: int | str) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name (state, ppid, ..., starttime at 19)."""
    try:
        # The command name is in parentheses and may hold spaces: split after it.
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 19 else None


def _same_live_process(pid: int, started: str) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[19] == started and fields[0] != "Z"


def exit_on_sigterm() -> None:
    """Make SIGTERM raise :class:`KeyboardInterrupt` in the main thread, as Ctrl-C does.

    Python's default for SIGTERM ends the process without running ``finally`` blocks or
    ``__exit__``, so a script killed by ``timeout`` would leave its dataflow and servers
    running (each ``dora run`` is in a session of its own and gets no signal). Call it
    once, from the main thread, at a script's entry point.
    """
    signal.signal(signal.SIGTERM, _raise_interrupt)


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


#: The signals that stop a doraforge command (Ctrl-C, and SIGTERM through
#: :func:`exit_on_sigterm`).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_signals_held() -> Iterator[list[int]]:
    """Hold Ctrl-C and SIGTERM while the block spawns a process; yields the signals that
    arrived, for the caller to act on once the process is owned.

    A signal raised as ``KeyboardInterrupt`` inside ``subprocess.Popen`` (after the fork,
    before it returns) leaves the child running with nobody holding it: ``dora run`` sits
    in a session of its own and would outlive its parent. Python handlers, not a signal
    mask, because a child inherits a blocked mask. Outside the main thread, where no
    handler can be set, nothing is held.
    """
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, _frame: object) -> None:
        held.append(signum)

    previous = {signum: signal.signal(signum, hold) for signum in STOP_SIGNALS}
    try:
        yield held
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def redeliver(held: list[int], undo: Callable[[], object]) -> None:
    """Hand each signal :func:`stop_signals_held` held to the handler installed again
    (the command's own: ``doraforge run`` stops its dataflow gracefully, the others raise
    ``KeyboardInterrupt``); when that handler raises, ``undo()`` first stops what was
    spawned, so nothing is left unowned."""
    try:
        for signum in held:
            signal.raise_signal(signum)
    except BaseException:
        undo()
        raise


def dora_binary() -> str:
    """The ``dora`` CLI installed beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).with_name("dora")
    return str(beside) if beside.exists() else "dora"


def node_interpreter_environment(base: Mapping[str, str], bin_dir: Path) -> dict[str, str]:
    """``base`` with ``bin_dir`` first on PATH and uv pinned to ``bin_dir``'s interpreter.

    Every environment a ``dora`` process gets is built here (``dora run`` through
    :func:`dora_environment`, the Skill Runtime's ``dora up``/``start``/``stop`` through its
    ``_project_env``). Dora resolves a bare node ``path`` such as ``python`` with
    ``uv run which python`` whenever a ``uv`` executable is on its PATH, before it
    looks at PATH itself (dora ``libraries/core/src/descriptor/mod.rs``, ``resolve_path``
    and ``resolve_path_via_uv``), and ``uv`` is always in ``bin_dir``: ``dora-rs-cli``
    depends on it. Left alone, that ``uv run`` treats the enclosing ``pyproject.toml`` (the
    checkout, for the shipped dataflows) as a uv project: it locks it (writing
    ``uv.lock``), syncs and rebuilds its ``.venv`` from the network, and fails the whole
    dataflow with "Could not find source path python within uv" when the index cannot be
    reached; it also prefers ``$VIRTUAL_ENV`` or a ``.venv`` above the working directory
    to this interpreter. The pins make that lookup answer ``bin_dir``'s ``python``
    without a project, a cache, a download or the network, whatever the caller's
    environment or the working directory.
    """
    env = dict(base)
    python = bin_dir / "python"
    env["PATH"] = os.pathsep.join(p for p in (str(bin_dir), env.get("PATH")) if p)
    env["UV_NO_PROJECT"] = "1"  # no lock, no sync, no uv.lock, no network
    env["UV_PYTHON"] = str(python if python.exists() else Path(sys.executable))
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env["UV_NO_CACHE"] = "1"  # a HOME without a writable cache does not matter
    return env


def dora_environment(base: Mapping[str, str], **overrides: str) -> dict[str, str]:
    """The environment for ``dora run``: project settings under explicit overrides."""
    env = node_interpreter_environment(base, Path(sys.executable).parent)
    env.setdefault("DORA_ZENOH_CONFIG_OVERLAY", str(ZENOH_OVERLAY))
    env.setdefault("DORA_COORDINATOR_PORT", str(free_port()))
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(overrides)
    return env


def state_directory(environ: Mapping[str, str]) -> Path:
    """doraforge's folder in the user's state directory (``$XDG_STATE_HOME``, else
    ``~/.local/state``), where the Gateway keeps its journal by default too."""
    state = environ.get("XDG_STATE_HOME")
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    return (Path(state) if state else home / ".local" / "state") / "doraforge"


def new_run_directory(environ: Mapping[str, str], name: str) -> Path:
    """A fresh, private (0700) directory for one run of ``name`` under
    ``<state>/doraforge/runs/``; it stays after the run so its logs can be read."""
    runs = state_directory(environ) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{name}-{time.strftime('%Y%m%dT%H%M%S')}-", dir=runs))


def private_copy(dataflow: Path, run_dir: Path) -> Path:
    """Copy the folder holding ``dataflow`` (the configs its nodes name relative to it)
    into ``run_dir`` and return the copy of ``dataflow``, which ``dora run`` can run
    without writing anywhere else. Earlier runs' ``out/`` and Python files are left out."""
    shutil.copytree(dataflow.parent, run_dir, ignore=_NOT_COPIED, dirs_exist_ok=True)
    return run_dir / dataflow.name


class Dataflow:
    """One ``dora run`` process group, stopped gracefully then forcibly, nodes included."""

    def __init__(self, path: str | Path, env: Mapping[str, str], log: IO[bytes] | None = None):
        self.path = Path(path).resolve()
        self.env = dict(env)
        self._log = log
        self.process: subprocess.Popen[bytes] | None = None
        self._started = ""
        self._below: dict[int, str] = {}

    def start(self) -> Dataflow:
        """Spawn ``dora run`` in its own session so the whole group can be stopped."""
        if not self.path.is_file():
            raise FileNotFoundError(f"dataflow {self.path} does not exist")
        self._spawn([dora_binary(), "run", str(self.path)])
        return self

    def _spawn(self, command: list[str]) -> None:
        """Run ``command`` (a ``dora`` command that owns the dataflow's lifetime) in its own
        session beside the dataflow file, logging to the log, and remember its start time
        so a recycled pid is never mistaken for it. Ctrl-C or SIGTERM during the spawn is
        handed to the command's handler once the process is owned."""
        with stop_signals_held() as held:
            self.process = subprocess.Popen(
                command,
                env=self.env,
                cwd=self.path.parent,
                stdout=self._log,
                stderr=subprocess.STDOUT if self._log else None,
                start_new_session=True,
            )
            fields = _stat_fields(self.process.pid)
            self._started = fields[19] if fields else ""
        redeliver(held, self.stop)

    def running(self) -> bool:
        """Whether ``dora run`` is still alive."""
        return self.process is not None and self.process.poll() is None

    def interrupt(self) -> None:
        """SIGINT to ``dora run`` (Dora's graceful stop: STOP to every node), without
        waiting: safe in a signal handler that interrupts a frame blocked in :meth:`wait`.
        The nodes it runs now are remembered, so :meth:`kill` finds them even once
        ``dora run`` is gone and they were re-parented."""
        if self._dora_alive():
            self._remember_nodes()
            self._signal(signal.SIGINT)

    def kill(self) -> None:
        """SIGKILL to ``dora run``'s group and to every node below it, without waiting."""
        if self.process is None:
            return
        self._remember_nodes()
        if self._dora_alive():  # never a pid that was reaped and handed to someone else
            self._signal(signal.SIGKILL)
        for pid in self.leftovers():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def stop(self, grace_s: float = STOP_GRACE_S) -> int:
        """SIGINT (Dora's graceful stop), :meth:`settle` within ``grace_s``, then SIGKILL
        to whatever is left. Returns ``dora run``'s exit status; never raises for a slow
        stop."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.interrupt()
            self.settle(grace_s)
        self.kill()
        return self.process.wait()

    def settle(self, grace_s: float, linger_s: float = LINGER_S) -> bool:
        """After :meth:`interrupt`, wait (bounded by ``grace_s``) for ``dora run`` to exit.

        Once every node has exited, ``dora run`` only tears itself down (its coordinator
        and network session take seconds more under load) and holds nothing of the run:
        after ``linger_s`` it is killed. At ``grace_s`` everything left is killed. Returns
        ``True`` when no node had to be killed. Polls ``/proc`` rather than the process
        handle, so it can run in a thread while another one blocks in :meth:`wait`.
        """
        deadline = time.monotonic() + grace_s
        nodes_gone_at: float | None = None
        while self._dora_alive():
            now = time.monotonic()
            self._remember_nodes()
            if self.leftovers():
                nodes_gone_at = None
            elif nodes_gone_at is None:
                nodes_gone_at = now
            elif now - nodes_gone_at >= linger_s:
                break
            if now >= deadline:
                clean = not self.leftovers()
                self.kill()
                return clean
            time.sleep(_POLL_S)
        self.kill()
        return True

    def leftovers(self) -> list[int]:
        """Node processes of this run still alive (zombies excluded)."""
        return [
            pid for pid, started in sorted(self._below.items()) if _same_live_process(pid, started)
        ]

    def wait(self) -> int:
        """Block until ``dora run`` exits."""
        return 0 if self.process is None else self.process.wait()

    def _remember_nodes(self) -> None:
        assert self.process is not None
        if self._dora_alive():
            self._below.update(descendants(self.process.pid))

    def _dora_alive(self) -> bool:
        return self.process is not None and _same_live_process(self.process.pid, self._started)

    def _signal(self, signum: int) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def __enter__(self) -> Dataflow:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        # A node that ignored STOP (or was re-parented when dora run exited) goes too.
        self.kill()


def wait_until(
    predicate: Callable[[], bool],
    timeout_s: float,
    interval_s: float = 0.1,
    on_wait: Callable[[float], None] | None = None,
) -> bool:
    """Poll ``predicate`` until true or ``timeout_s`` passes; ``on_wait`` shows progress."""
    started = time.monotonic()
    while True:
        if predicate():
            return True
        elapsed = time.monotonic() - started
        if elapsed >= timeout_s:
            return False
        if on_wait is not None:
            on_wait(elapsed)
        time.sleep(interval_s)
