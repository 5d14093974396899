"""The Dora CLI (dora-rs 1.1) as the Skill Runtime uses it: a private coordinator per home
(with a daemon per machine id its skills name), or an existing one a skill attaches to.

Facts about dora 1.1 this module is built on (each checked against the real CLI):

* ``dora up`` cannot serve two homes: its coordinator keeps a machine-wide redb store
  (``~/.dora/coordinator.redb``, a second coordinator fails with "Database already open")
  and its daemon binds the fixed local listen port 53291. So this module starts
  ``dora coordinator --port P --store memory`` and ``dora daemon --coordinator-port P
  --local-listen-port Q`` itself, detached, with ports private to the home.
* The coordinator answering is not enough: ``dora start`` fails with "no unnamed daemon
  connections" until the daemon has registered. ``dora status -f json`` reports both.
* Nodes are spawned by the daemon with the DAEMON's environment, and ``path: python`` is
  looked up on the daemon's PATH: the daemon must be started with the project's PATH.
  ``dora start --env K=V`` adds variables per dataflow but refuses values with ``$``.
* ``dora start --detach`` prints ``dataflow started: <uuid>``; ``dora list -f json`` prints
  JSON lines ``{uuid, name, status, ...}`` and keeps finished and failed dataflows with the
  same name, so a dataflow is identified by its uuid. A running name cannot be reused.
* ``dora stop <uuid> --grace-duration Ns`` returns once the dataflow has finished
  (SIGTERM after N s, SIGKILL after 1.5 N s); ``--force`` kills at once.
* ``dora down`` refuses while dataflows run (no ``--force`` here: never kill what this
  module did not start) and tears down the coordinator and its daemons.
* ``dora logs <uuid>`` of a finished dataflow reads ``out/`` in the CURRENT directory.
* A node's environment holds ``DORA_NODE_CONFIG`` naming ``dataflow_id: <uuid>``: that is
  how leftover node processes of a dataflow are found.
* Every command takes ``--coordinator-port``; the default 6013 is machine-wide and
  ``dora down`` on it would kill someone else's coordinator, so a home never uses it.
* ``dora cluster status`` lists every connected daemon (``<machine id>-<uuid>``, a bare
  uuid for one without ``--machine-id``); ``dora status`` reports one daemon whatever their
  number. ``dora down`` destroys the coordinator and every daemon connected to it.
* A node pinned by ``deploy.working_dir`` writes its logs to ``<working_dir>/out/``, but a
  running daemon serves ``dora logs`` from its own ``_work/<session>/out/`` and fails;
  ``dora logs --local`` reads ``out/`` of the current directory, running or not.
* A coordinator a skill attached to (``owned=False``) may be on 6013 and is never brought
  up or down from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doraforge.skill_runtime.dora_generation import INSTALL_HINT, library_refusal
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.wire.files import PRIVATE_UMASK

if TYPE_CHECKING:
    from doraforge.skill_runtime.cluster import DoraProcess

# The cluster module (the one launcher of Dora services, the daemons' options) imports
# dora_run, which imports this module: its names are imported where they are used.

MIN_VERSION = (1, 1)
SHARED_DEFAULT_PORT = 6013
#: Where this home's own coordinator listens for the commands of this host.
LOOPBACK = "127.0.0.1"
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_STARTED = re.compile(r"dataflow start(?:ed| triggered): ([0-9a-f-]{36})")


def dora_version(
    binary: str, env: Mapping[str, str], *, minimum: tuple[int, int] | None = MIN_VERSION
) -> str:
    """``dora --version`` as ``X.Y.Z``.

    Raises :class:`RuntimeStateError` ``SKILL_PREFLIGHT_FAILED`` when it cannot run or is
    older than ``minimum`` (default :data:`MIN_VERSION`: ``start --env``, ``list -f json``
    and private coordinator ports are needed; ``None`` skips the check).
    """
    try:
        done = subprocess.run(
            [binary, "--version"], env=dict(env), capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _preflight(f"cannot run {binary} --version: {exc}", binary) from exc
    found = _VERSION.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise _preflight(f"{binary} --version failed: {done.stderr.strip()[-300:]}", binary)
    if minimum is not None:
        require_minimum(found.group(0), binary, minimum)
    return found.group(0)


#: Asks an interpreter for its ``dora-rs`` distribution without importing ``dora``.
_LIBRARY_VERSION = (
    "import importlib.metadata as m\n"
    "try:\n    print(m.version('dora-rs'))\n"
    "except m.PackageNotFoundError:\n    pass\n"
)


def node_library_version(python: str | Path, env: Mapping[str, str]) -> str | None:
    """The ``dora-rs`` node library version of the interpreter Dora runs ``path: python``
    nodes with, ``None`` when it is not installed there or ``python`` cannot run.

    The nodes' interpreter is not necessarily this process's, and a node library of
    another generation than the daemon fails only once the dataflow runs
    (``failed to deserialize DaemonRequest``), so the question goes to that interpreter.
    """
    try:
        done = subprocess.run(
            [str(python), "-c", _LIBRARY_VERSION],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip()
    return found if done.returncode == 0 and found else None


def require_node_library(cli_version: str, python: str | Path, env: Mapping[str, str]) -> None:
    """Raise ``SKILL_DORA_GENERATION`` when the nodes' ``dora-rs`` cannot talk to the
    daemon of the dora CLI ``cli_version`` (or is missing from ``python``, the interpreter
    Dora runs ``path: python`` nodes with: ``UV_PYTHON`` of
    :func:`~doraforge.skill_runtime.dora_run.node_interpreter_environment`)."""
    library = node_library_version(python, env)
    refused = library_refusal(cli_version, library)
    if refused is not None:
        raise RuntimeStateError(
            "SKILL_DORA_GENERATION",
            refused,
            details={"cli": cli_version, "node_library": library, "python": str(python)},
        )


def require_minimum(version: str, binary: str, minimum: tuple[int, int] = MIN_VERSION) -> None:
    """Raise ``SKILL_PREFLIGHT_FAILED`` (naming the fix) when ``version`` is below ``minimum``."""
    found = _VERSION.search(version)
    if found is None or tuple(int(part) for part in found.groups()[:2]) < minimum:
        raise _preflight(
            f"dora {version} is older than {minimum[0]}.{minimum[1]} (doraforge runs Dora 1.1; "
            f"PhyAgentOS's baseline 0.4.1 is another generation): {INSTALL_HINT}",
            binary,
        )


def _preflight(message: str, binary: str) -> RuntimeStateError:
    return RuntimeStateError(
        "SKILL_PREFLIGHT_FAILED", message, details={"missing": {"dora": [binary]}}
    )


def node_pids(dataflow_uuid: str) -> list[int]:
    """Processes whose Dora node config names ``dataflow_uuid`` (Linux ``/proc``)."""
    marker = f"dataflow_id: {dataflow_uuid}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            environ = (entry / "environ").read_bytes()
            if b"DORA_NODE_CONFIG=" in environ and marker in environ:
                found.append(int(entry.name))
    return found


def kill_pids(pids: list[int]) -> None:
    """SIGKILL each pid that still exists (they are node processes of our dataflow)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


class DoraControl:
    """The lifecycle commands against one coordinator: this home's private one on
    ``port`` (``owned``), or one someone else runs at ``host:port`` that a skill attached
    to (not ``owned``: nothing here ever starts or ``dora down``s it, and its port may
    be Dora's default 6013)."""

    def __init__(
        self,
        binary: str,
        *,
        port: int,
        env: Mapping[str, str],
        log_dir: Path,
        host: str = LOOPBACK,
        owned: bool = True,
    ) -> None:
        if owned and port == SHARED_DEFAULT_PORT:
            raise ValueError("port 6013 is Dora's machine-wide default; a home never uses it")
        from doraforge.skill_runtime.cluster import CoordinatorAddress

        self.binary = binary
        self.address = CoordinatorAddress(host, port)
        self.owned = owned
        self.log_dir = log_dir
        # Plain one-line errors instead of Rust backtraces in our logs and error details.
        self._env = {**env, "RUST_BACKTRACE": "0", "RUST_LIB_BACKTRACE": "0"}

    @property
    def port(self) -> int:
        return self.address.port

    def _cli(
        self, *args: str, cwd: Path | None = None, timeout_s: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        command = [self.binary, *args, *self.address.cli_args()]
        try:
            return subprocess.run(
                command,
                env=self._env,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                umask=PRIVATE_UMASK,  # `dora start` writes its session file into the home
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeStateError(
                "SKILL_DORA_TIMEOUT",
                f"`dora {args[0]}` did not answer within {timeout_s:.0f} s",
                details={"command": command},
            ) from exc

    def services_up(self) -> bool:
        """Whether the coordinator answers and a daemon is connected to it."""
        done = self._cli("status", "--format", "json", timeout_s=10)
        try:
            report = json.loads(done.stdout)
        except ValueError:
            return False
        coordinator = report.get("coordinator") or {}
        daemon = report.get("daemon") or {}
        return coordinator.get("status") == "running" and daemon.get("status") == "running"

    def up(self, *, listen_port: int, daemon_env: Mapping[str, str], timeout_s: float) -> None:
        """Start this home's coordinator and daemon and wait until both answer.

        ``daemon_env`` becomes every node's base environment. Raises
        :class:`RuntimeStateError` ``SKILL_DORA_UNAVAILABLE`` with the log tails when they
        do not come up within ``timeout_s``.
        """
        self._require_owned("up")
        port = str(self.port)
        self._detach("coordinator", ["coordinator", "--quiet", "--port", port, "--store", "memory"])
        daemon = ["daemon", "--quiet", "--coordinator-port", port]
        self._detach("daemon", [*daemon, "--local-listen-port", str(listen_port)], daemon_env)
        deadline = time.monotonic() + timeout_s
        while not self.services_up():
            if time.monotonic() > deadline:
                raise RuntimeStateError(
                    "SKILL_DORA_UNAVAILABLE",
                    f"Dora coordinator/daemon on port {self.port} did not come up",
                    details={"logs": {n: self._log_tail(n) for n in ("coordinator", "daemon")}},
                )
            time.sleep(0.1)

    @property
    def _work_dir(self) -> Path:
        # The daemon creates `out/` in its working directory; keep it inside the home.
        return self.log_dir.parent / "dora"

    def _detach(
        self, role: str, args: list[str], env: Mapping[str, str] | None = None
    ) -> DoraProcess:
        from doraforge.skill_runtime.cluster import DoraProcess

        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._work_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"dora-{role}.log"
        command = [self.binary, *args]
        return DoraProcess.detached(
            role, command, {**self._env, **(env or {})}, self._work_dir, log
        )

    def _require_owned(self, action: str) -> None:
        if not self.owned:
            raise ValueError(f"coordinator {self.address} is not this home's: never {action} it")

    def start_machine(
        self,
        machine: str,
        *,
        listen_port: int,
        zenoh_port: int,
        peers: Iterable[int],
        daemon_env: Mapping[str, str],
    ) -> DoraProcess:
        """Start a ``dora daemon --machine-id MACHINE`` on this host for this home's
        coordinator, detached, in the Zenoh loopback clique of :func:`daemon_args` (with
        the cluster overlay of :data:`CLUSTER_ZENOH_OVERLAY`). It registers in the
        background: :meth:`daemons` lists it once it has."""
        from doraforge.skill_runtime.cluster import (
            CLUSTER_ZENOH_OVERLAY,
            LOOPBACK,
            daemon_args,
            zenoh_endpoint,
        )

        self._require_owned("add a daemon to")
        args = daemon_args(
            machine,
            self.address,
            listen_port=listen_port,
            zenoh=zenoh_endpoint(LOOPBACK, zenoh_port),
            peers=[zenoh_endpoint(LOOPBACK, port) for port in peers],
        )
        env = {**daemon_env, "DORA_ZENOH_CONFIG_OVERLAY": str(CLUSTER_ZENOH_OVERLAY)}
        return self._detach(f"daemon-{machine}", args, env)

    def daemons(self) -> list[tuple[str | None, str]] | None:
        """``(machine id or None, daemon id)`` of every daemon connected to the coordinator
        (``dora cluster status``), ``None`` when it does not answer."""
        from doraforge.skill_runtime.cluster import cluster_status

        return cluster_status(self.binary, self.address, self._env)

    def _log_tail(self, role: str, limit: int = 2000) -> str:
        with contextlib.suppress(OSError):
            return (self.log_dir / f"dora-{role}.log").read_text(errors="replace")[-limit:]
        return ""

    def start(self, dataflow: Path, *, name: str, env: Mapping[str, str]) -> str:
        """``dora start DATAFLOW --name NAME --detach --env K=V...``; return its uuid.

        Raises :class:`RuntimeStateError` ``SKILL_DORA_START_FAILED`` with Dora's message.
        """
        pairs = [item for key, value in sorted(env.items()) for item in ("--env", f"{key}={value}")]
        done = self._cli(
            "start", str(dataflow), "--name", name, "--detach", *pairs, cwd=dataflow.parent
        )
        found = _STARTED.search(done.stdout)
        if done.returncode != 0 or found is None:
            raise RuntimeStateError(
                "SKILL_DORA_START_FAILED",
                f"dora start failed: {_last_error(done)}",
                details={"dataflow": str(dataflow)},
            )
        return found.group(1)

    def rows(self) -> list[dict[str, Any]] | None:
        """``dora list -f json`` rows, or ``None`` when the coordinator does not answer."""
        done = self._cli("list", "--format", "json", timeout_s=10)
        if done.returncode != 0:
            return None
        rows = []
        for line in done.stdout.splitlines():
            with contextlib.suppress(ValueError):
                row = json.loads(line)
                if isinstance(row, dict):
                    rows.append(row)
        return rows

    def dataflow_status(self, dataflow_uuid: str) -> str | None:
        """Dora's status of the dataflow (``Running``, ``Finished``, ``Failed``...) or
        ``None`` when the coordinator does not know it (or does not answer)."""
        for row in self.rows() or []:
            if row.get("uuid") == dataflow_uuid:
                return str(row.get("status"))
        return None

    def running_uuids(self) -> list[str]:
        """Uuids of this coordinator's running dataflows (empty when it is down)."""
        return [str(r["uuid"]) for r in self.rows() or [] if r.get("status") == "Running"]

    def stop(self, dataflow_uuid: str, *, grace_s: float) -> None:
        """Stop the dataflow gracefully, then by force; kill node processes left over.

        Raises :class:`RuntimeStateError` ``SKILL_STOP_FAILED`` when node processes of
        the dataflow survive even SIGKILL.
        """
        if self.dataflow_status(dataflow_uuid) == "Running":
            grace = f"{max(1, round(grace_s))}s"
            self._cli("stop", dataflow_uuid, "--grace-duration", grace, timeout_s=grace_s * 2 + 15)
        if self.dataflow_status(dataflow_uuid) == "Running":
            self._cli("stop", dataflow_uuid, "--force", timeout_s=15)
        # The daemon may be gone (crashed, torn down) while its nodes live on: they are
        # ours by their dataflow id, and nothing of a stopped runtime may keep running.
        deadline = time.monotonic() + 5.0
        while leftovers := node_pids(dataflow_uuid):
            if time.monotonic() > deadline:
                kill_pids(leftovers)
                if not _wait_gone(dataflow_uuid, 5.0):
                    raise RuntimeStateError(
                        "SKILL_STOP_FAILED",
                        f"node processes of dataflow {dataflow_uuid} survive SIGKILL",
                        details={"pids": node_pids(dataflow_uuid)},
                    )
                return
            time.sleep(0.1)

    def down(self) -> bool:
        """``dora down`` (refused by Dora while anything runs); ``True`` once it is down.
        Only ever for this home's own coordinator (``ValueError`` otherwise)."""
        self._require_owned("dora down")
        done = self._cli("down", timeout_s=30)
        return done.returncode == 0

    def logs(
        self,
        dataflow_uuid: str,
        *,
        lines: int,
        cwd: Path,
        node: str | None = None,
        json_lines: bool = False,
        local: bool = False,
    ) -> str:
        """``dora logs UUID --all-nodes --tail N`` (``--node NODE`` for one node; JSON
        lines with ``json_lines``) run in the launch directory.

        For a dataflow that is no longer running Dora reads ``out/`` under ``cwd``; with
        ``local`` it always does (``--local``). That is how the logs of nodes pinned to
        ``cwd`` by ``deploy.working_dir`` are read: they write to ``cwd/out/``, while a
        running machine daemon looks for them under its own ``_work/`` and fails.
        """
        args = _log_args(dataflow_uuid, node, json_lines, local)
        done = self._cli(*args, "--tail", str(lines), cwd=cwd, timeout_s=15)
        return done.stdout if done.returncode == 0 else f"(dora logs: {_last_error(done)})\n"

    def follow_logs(
        self, dataflow_uuid: str, *, cwd: Path, node: str | None = None, local: bool = False
    ) -> subprocess.Popen[str]:
        """``dora logs UUID --follow --tail 0 --log-format json``: the lines written from
        now on, on the returned process's stdout (``local`` as for :meth:`logs`). The
        caller ends the process."""
        command = [self.binary, *_log_args(dataflow_uuid, node, True, local), "--follow"]
        command += ["--tail", "0", *self.address.cli_args()]
        return subprocess.Popen(
            command,
            env=self._env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )


def _log_args(dataflow_uuid: str, node: str | None, json_lines: bool, local: bool) -> list[str]:
    args = ["logs", dataflow_uuid, *(["--node", node] if node else ["--all-nodes"])]
    args += ["--local"] if local else []
    return args + (["--log-format", "json"] if json_lines else [])


def _wait_gone(dataflow_uuid: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while node_pids(dataflow_uuid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _last_error(done: subprocess.CompletedProcess[str]) -> str:
    """The ``[ERROR]`` paragraph of Dora's output, else its last line."""
    text = (done.stderr or "") + (done.stdout or "")
    after = text.split("[ERROR]", 1)[-1].strip()
    message = after.split("\n\n", 1)[0].strip() or text.strip()
    return " ".join(message.split())[:500] or f"exit status {done.returncode}"
