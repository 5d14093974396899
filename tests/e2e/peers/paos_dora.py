"""The Dora services PhyAgentOS's own ``dora up`` starts for one test, found and ended.

PhyAgentOS 1.1.1's RuntimeManager runs ``dora check``/``up``/``start``/``list``/``stop`` with
no address flags and its own environment, and dora-rs 1.1 reads ``DORA_COORDINATOR_PORT``
in every one of them (``dora up`` passes it to the coordinator and daemon it spawns): a
private port keeps a test's coordinator apart from everyone else's. One port cannot move:
``dora up`` starts its daemon without ``--local-listen-port``, so the daemon binds
:data:`DAEMON_LISTEN_PORT` (53291). :func:`daemon_port_lock` serialises the tests that let
PhyAgentOS run ``dora up`` through a file lock in this checkout's pytest cache, and
:func:`require_free` fails, naming the holder, when something outside the lock has it.

:class:`PaosDora` finds the coordinator and daemon of one private port by their command
lines and their nodes as the daemon's children, and ends them by pid only.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import socket
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import psutil

from doraforge.skill_runtime.dora_run import dora_binary
from tests.support.waiting import eventually

DAEMON_LISTEN_PORT = 53291
LOCK_WAIT_S = 180.0
GONE_WITHIN_S = 15.0
#: psutil's process start times are rounded to clock ticks.
CLOCK_SLACK_S = 1.0


@contextlib.contextmanager
def daemon_port_lock(lock_dir: Path, *, within: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the lock of the daemon port ``dora up`` always binds, waiting up to ``within``
    seconds for another test of this checkout that holds it."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    with (lock_dir / f"dora-up-daemon-{DAEMON_LISTEN_PORT}.lock").open("w") as handle:

        def locked() -> bool:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        eventually(locked, within=within, what=f"the lock of port {DAEMON_LISTEN_PORT}")
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def require_free(port: int, what: str) -> None:
    """Fail (never skip) when something already listens on loopback ``port``.

    The probe binds as a listener does (``SO_REUSEADDR``), so a socket of an exited process
    in TIME_WAIT does not count as taken.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise AssertionError(
                f"PORT_IN_USE: {what} needs 127.0.0.1:{port}, held by {_holder(port)}; "
                "stop that Dora (dora down with its DORA_COORDINATOR_PORT) and rerun"
            ) from None


def _holder(port: int) -> str:
    for connection in psutil.net_connections(kind="tcp"):
        listening = connection.status == psutil.CONN_LISTEN
        if listening and getattr(connection.laddr, "port", None) == port:
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(connection.pid)
                return f"pid {process.pid} ({' '.join(process.cmdline())})"
    return "another process"


def alive(process: psutil.Process) -> bool:
    """Running and not a zombie (an exited child its parent has not reaped yet)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _runs(argv: list[str], role: str, flag: str, value: str) -> bool:
    """Whether ``argv`` is ``dora ROLE ... FLAG VALUE`` (run directly or by its script)."""
    is_dora = any(Path(word).name == "dora" for word in argv[:2])
    has_flag = any(pair == (flag, value) for pair in itertools.pairwise(argv))
    return is_dora and role in argv[:3] and has_flag


class PaosDora:
    """The coordinator on ``port`` and its daemon, as ``dora up`` started them.

    Only processes created after ``since`` (a ``time.time()`` taken before the start) are
    counted: should another coordinator have taken the free port first, it is never
    mistaken for this run's, so never brought down.
    """

    def __init__(self, env: Mapping[str, str], port: int, *, since: float) -> None:
        self.env = dict(env)
        self.port = port
        self.since = since - CLOCK_SLACK_S

    def _find(self, role: str, flag: str) -> list[psutil.Process]:
        found = []
        for process in psutil.process_iter(["cmdline"]):
            argv = process.info["cmdline"] or []
            if _runs(argv, role, flag, str(self.port)) and self._ours(process):
                found.append(process)
        return found

    def _ours(self, process: psutil.Process) -> bool:
        try:
            return alive(process) and process.create_time() >= self.since
        except psutil.NoSuchProcess:
            return False

    def coordinator(self) -> list[psutil.Process]:
        """``dora coordinator --port PORT`` processes (one while up)."""
        return self._find("coordinator", "--port")

    def daemon(self) -> list[psutil.Process]:
        """``dora daemon --coordinator-port PORT`` processes (one while up)."""
        return self._find("daemon", "--coordinator-port")

    def nodes(self) -> list[psutil.Process]:
        """The live processes the daemon spawned (the dataflow's nodes)."""
        found: list[psutil.Process] = []
        for daemon in self.daemon():
            with contextlib.suppress(psutil.NoSuchProcess):
                found.extend(child for child in daemon.children(recursive=True) if alive(child))
        return found

    def services(self) -> list[psutil.Process]:
        """Coordinator, daemon and nodes: everything of this port that runs."""
        return [*self.coordinator(), *self.daemon(), *self.nodes()]

    def down(self, *, force: bool = False) -> subprocess.CompletedProcess[str]:
        """``dora down`` against this port only (``--force`` also ends running dataflows)."""
        command = [dora_binary(), "down", "--coordinator-port", str(self.port)]
        return subprocess.run(
            command + (["--force"] if force else []),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def end(self, seen: list[psutil.Process]) -> None:
        """Teardown: ``dora down --force`` on this port, then SIGKILL whatever of it (or of
        ``seen``, the processes recorded while it ran) still runs, and wait until gone."""
        if self.coordinator():
            self.down(force=True)
        leftovers = [p for p in {*seen, *self.services()} if alive(p)]
        for process in leftovers:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        _gone, survivors = psutil.wait_procs(leftovers, timeout=GONE_WITHIN_S)
        assert not [p for p in survivors if alive(p)], f"processes survive SIGKILL: {survivors}"
