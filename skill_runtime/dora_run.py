"""Running development dataflows with `dora run` and the project's Dora settings.

Settings applied to every run: the shipped Zenoh overlay (no silent drops under bursts),
a private coordinator port (the default 6013 is machine-wide and ``dora down`` kills its
owner), and this interpreter's ``bin`` first on PATH with uv pinned to it
(:func:`node_interpreter_environment`) so ``path: python`` nodes run inside the project's
environment. The world node chooses its headless GL backend itself (EGL, else OSMesa)
unless ``MUJOCO_GL`` is set.

``dora run`` writes its ``out/`` logs next to the dataflow file, so a shipped dataflow
(package data, perhaps in a read-only ``site-packages``) runs from a :func:`private_copy`
in a run directory of its own (:func:`new_run_directory`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from doraforge.dataflows import ZENOH_OVERLAY
from doraforge.skill_runtime.dora import SHARED_DEFAULT_PORT

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
    """One ``dora run`` process group, stopped gracefully then forcibly."""

    def __init__(self, path: str | Path, env: Mapping[str, str], log: IO[bytes] | None = None):
        self.path = Path(path).resolve()
        self.env = dict(env)
        self._log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Dataflow:
        """Spawn ``dora run`` in its own session so the whole group can be stopped."""
        if not self.path.is_file():
            raise FileNotFoundError(f"dataflow {self.path} does not exist")
        self.process = subprocess.Popen(
            [dora_binary(), "run", str(self.path)],
            env=self.env,
            cwd=self.path.parent,
            stdout=self._log,
            stderr=subprocess.STDOUT if self._log else None,
            start_new_session=True,
        )
        return self

    def running(self) -> bool:
        """Whether ``dora run`` is still alive."""
        return self.process is not None and self.process.poll() is None

    def interrupt(self) -> None:
        """SIGINT to the group (Dora's graceful stop), without waiting: safe in a signal
        handler that interrupts a frame blocked in :meth:`wait`."""
        if self.process is not None and self.process.returncode is None:
            self._signal(signal.SIGINT)

    def kill(self) -> None:
        """SIGKILL to the whole group, without waiting."""
        if self.process is not None and self.process.returncode is None:
            self._signal(signal.SIGKILL)

    def stop(self, grace_s: float = 15.0) -> int:
        """SIGINT (Dora's graceful stop), then SIGKILL to the group after ``grace_s``."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self._signal(signal.SIGINT)
            try:
                return self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
        return self.process.wait(timeout=grace_s)

    def wait(self) -> int:
        """Block until ``dora run`` exits."""
        return 0 if self.process is None else self.process.wait()

    def _signal(self, signum: int) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def __enter__(self) -> Dataflow:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
