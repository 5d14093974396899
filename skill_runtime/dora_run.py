"""Running development dataflows with `dora run` and the project's Dora settings.

Settings applied to every run: the shipped Zenoh overlay (no silent drops under bursts),
a private coordinator port (the default 6013 is machine-wide and ``dora down`` kills its
owner), and this interpreter's ``bin`` first on PATH so ``path: python`` nodes run inside
the project's environment. The world node chooses its headless GL backend itself (EGL,
else OSMesa) unless ``MUJOCO_GL`` is set.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from doraforge.dataflows import ZENOH_OVERLAY


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def dora_binary() -> str:
    """The ``dora`` CLI installed beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).with_name("dora")
    return str(beside) if beside.exists() else "dora"


def dora_environment(base: Mapping[str, str], **overrides: str) -> dict[str, str]:
    """The environment for ``dora run``: project settings under explicit overrides."""
    env = dict(base)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env.setdefault("DORA_ZENOH_CONFIG_OVERLAY", str(ZENOH_OVERLAY))
    env.setdefault("DORA_COORDINATOR_PORT", str(free_port()))
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(overrides)
    return env


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
