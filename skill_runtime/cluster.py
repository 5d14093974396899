"""A dataflow across several Dora daemons: the machines its nodes name in ``deploy``.

Dora's distributed mode is one ``dora coordinator`` plus one ``dora daemon --machine-id
ID`` per machine; a node runs on the daemon whose machine id its ``deploy: {machine: ID}``
names, and data between daemons goes over Zenoh. Facts of dora 1.1 this is built on
(each checked against the real CLI):

* A node with a ``deploy.machine`` runs in ``<daemon cwd>/_work/<session>/`` unless its
  ``deploy.working_dir`` names a folder, so configs named relative to the dataflow
  (``--config sim.gateway.yml``) are not found. Daemons on this host share its file
  system: :func:`with_working_dirs` pins every node to the dataflow's own folder.
* Daemons find each other by Zenoh multicast scouting unless told otherwise; containers
  and CI runners often have no multicast. Each local daemon here listens on a free port
  of its host's address (``--zenoh-listen``; loopback unless a :class:`MachineHost`
  places it elsewhere) and dials every other one (``--zenoh-connect``), the clique dora
  documents for Zenoh 1.9 (peers do not relay for each other).
* Every output sent to another daemon goes with Zenoh congestion control DROP: the
  daemons run with :data:`CLUSTER_ZENOH_OVERLAY` (its comments say what and why).
* ``dora start --attach`` stays in the foreground until the dataflow ends; SIGINT makes
  it stop the dataflow (STOP to every node, on every daemon). That process stands in
  for ``dora run`` in :class:`ClusterDataflow`, which so stops like :class:`Dataflow`.
* ``dora status`` reports one daemon whatever their number; ``dora start`` of a dataflow
  naming a machine no daemon has registered fails, so :meth:`LocalCluster.up` waits
  until ``dora cluster status`` lists every machine id.

Every process here starts in a session of its own, and stopping kills each group and
every node below each daemon, so nothing outlives a run (also on SIGTERM, through the
caller's handler, as :class:`Dataflow`).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from doraforge.dataflows import DATAFLOWS
from doraforge.skill_runtime.dora_run import (
    Dataflow,
    _same_live_process,
    _stat_fields,
    descendants,
    dora_binary,
    free_port,
    redeliver,
    stop_signals_held,
)
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.wire import strict_yaml
from doraforge.wire.files import PRIVATE_UMASK
from doraforge.wire.guard import is_loopback

#: The Zenoh settings of daemons that exchange data (no silent drop of a frame in transit).
CLUSTER_ZENOH_OVERLAY = DATAFLOWS / "zenoh-cluster-overlay.json5"
#: Seconds the coordinator and every daemon get to come up and register.
UP_TIMEOUT_S = 30.0
_POLL_S = 0.1
_DAEMON_ID = re.compile(
    r"^(?:(\S+)-)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\s", re.M
)


@dataclass(frozen=True)
class CoordinatorAddress:
    """Where a Dora coordinator listens (``HOST:PORT``)."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> CoordinatorAddress:
        """``HOST:PORT`` (IPv6 in brackets); raises :class:`ValueError` naming the form."""
        host, sep, port = text.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{text!r} is not HOST:PORT (e.g. 192.168.1.10:6013)")
        return cls(host, int(port))

    def cli_args(self) -> list[str]:
        """The options every ``dora`` client command takes to reach this coordinator."""
        return ["--coordinator-addr", self.host, "--coordinator-port", str(self.port)]

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def _document(dataflow: Path) -> dict[str, Any]:
    try:
        document = strict_yaml.load(dataflow.read_text(encoding="utf-8"), aliases=True)
    except (OSError, UnicodeDecodeError, strict_yaml.YAMLRefused):
        return {}
    return document if isinstance(document, dict) else {}


def _nodes(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    nodes = document.get("nodes")
    return [node for node in nodes if isinstance(node, dict)] if isinstance(nodes, list) else []


def _machine(node: Mapping[str, Any]) -> str | None:
    deploy = node.get("deploy")
    machine = deploy.get("machine") if isinstance(deploy, dict) else None
    return machine if isinstance(machine, str) and machine else None


def machine_ids(dataflow: Path) -> list[str]:
    """The machine ids the nodes of ``dataflow`` name in ``deploy.machine``, sorted; empty
    for a one-machine dataflow (or a file Dora will refuse itself)."""
    return sorted({m for node in _nodes(_document(dataflow)) if (m := _machine(node))})


def node_ids(dataflow: Path) -> list[str]:
    """The ids of the nodes of ``dataflow``, in file order (none for an unreadable file)."""
    return [str(node.get("id")) for node in _nodes(_document(dataflow)) if node.get("id")]


def unpinned_nodes(dataflow: Path) -> list[str]:
    """The ids of the nodes of ``dataflow`` that name no machine."""
    return [str(node.get("id")) for node in _nodes(_document(dataflow)) if not _machine(node)]


def with_working_dirs(dataflow: Path, target: Path) -> Path:
    """Write ``dataflow`` to ``target`` with each node's ``deploy.working_dir`` set to the
    dataflow's folder where it names none, and return ``target``.

    For daemons on this host only: they see this folder, and a node's configs named
    relative to the dataflow are found as under ``dora run``. A node without ``deploy``
    gets none (it runs on the daemon without a machine id, as Dora decides)."""
    document = _document(dataflow)
    folder = str(dataflow.resolve().parent)
    for node in _nodes(document):
        deploy = node.get("deploy")
        if isinstance(deploy, dict) and _machine(node):
            deploy.setdefault("working_dir", folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return target


#: Spawns a process detached from its caller (a new session, re-parented once this helper
#: exits), so a home's coordinator and daemons outlive the command that started them and
#: never become its zombies. Prints the pid.
_DETACH = (
    "import subprocess, sys\n"
    "log = open(sys.argv[1], 'ab')\n"
    "child = subprocess.Popen(sys.argv[3:], cwd=sys.argv[2], stdin=subprocess.DEVNULL,"
    " stdout=log, stderr=log, start_new_session=True)\n"
    "print(child.pid)\n"
)


class DoraProcess:
    """One ``dora coordinator``/``daemon`` in a session of its own, its start time kept
    so it is only ever signalled while the pid still names it.

    The one launcher of Dora services: :class:`LocalCluster` keeps its processes as
    children (:meth:`spawn`); the Skill Runtime starts its home's services
    :meth:`detached`, as they outlive the command, and a later command finds one again
    by its recorded pid and start time (:meth:`adopt`)."""

    def __init__(
        self,
        role: str,
        pid: int,
        started: str,
        log_path: Path,
        command: list[str],
        popen: subprocess.Popen[bytes] | None = None,
    ):
        self.role = role
        self.pid = pid
        self.started = started
        self.log_path = log_path
        self.command = command
        self.popen = popen

    @classmethod
    def spawn(cls, role: str, command: list[str], env: Mapping[str, str], cwd: Path) -> DoraProcess:
        """Start ``command`` as a child of this process, its output to ``cwd/dora-ROLE.log``."""
        log_path = cwd / f"dora-{role}.log"
        # The child keeps its own descriptor of the log.
        with log_path.open("ab") as log, stop_signals_held() as held:
            popen = subprocess.Popen(
                command,
                env=dict(env),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # Ctrl-C or SIGTERM mid-spawn: the command's handler decides, never leaving it unowned.
        redeliver(held, lambda: _reap(popen))
        return cls(role, popen.pid, _start_time(popen.pid), log_path, command, popen)

    @classmethod
    def detached(
        cls, role: str, command: list[str], env: Mapping[str, str], cwd: Path, log_path: Path
    ) -> DoraProcess:
        """Start ``command`` detached from this process (see :data:`_DETACH`).

        Raises :class:`RuntimeStateError` ``SKILL_DORA_UNAVAILABLE`` when it cannot start."""
        helper = [sys.executable, "-c", _DETACH, str(log_path), str(cwd), *command]
        # Inherited by the service and every node it spawns: their logs and files are 0600.
        done = subprocess.run(
            helper, env=dict(env), capture_output=True, text=True, timeout=30, umask=PRIVATE_UMASK
        )
        if done.returncode != 0 or not done.stdout.strip().isdigit():
            raise RuntimeStateError(
                "SKILL_DORA_UNAVAILABLE",
                f"cannot start dora {role}: {done.stderr.strip()[-300:]}",
            )
        pid = int(done.stdout.strip())
        return cls(role, pid, _start_time(pid), log_path, command)

    @classmethod
    def adopt(cls, role: str, pid: int, started: str, log_path: Path) -> DoraProcess:
        """The process an earlier command started and recorded (``pid``, ``started``)."""
        return cls(role, pid, started, log_path, [])

    def alive(self) -> bool:
        return _same_live_process(self.pid, self.started)

    def below(self) -> dict[int, str]:
        return descendants(self.pid) if self.alive() else {}

    def kill(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=5)

    def log_tail(self, limit: int = 1500) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-limit:]
        return ""


def _start_time(pid: int) -> str:
    fields = _stat_fields(pid)
    return fields[19] if fields else ""


def _reap(popen: subprocess.Popen[bytes]) -> None:
    popen.kill()
    popen.wait()


def daemon_args(
    machine: str,
    address: CoordinatorAddress,
    *,
    listen_port: int,
    zenoh: str,
    peers: Iterable[str],
) -> list[str]:
    """``dora daemon`` options for ``machine``: its coordinator, a free local listen port
    (for its own nodes), a Zenoh listener on ``zenoh`` (``HOST:PORT``) that other daemons
    dial, and a dial to every daemon already listening at ``peers`` (``HOST:PORT`` each:
    the clique Zenoh 1.9 needs)."""
    args = ["daemon", "--machine-id", machine, *address.cli_args()]
    args += ["--local-listen-port", str(listen_port)]
    args += ["--zenoh-listen", zenoh]
    for peer in peers:
        args += ["--zenoh-connect", f"tcp/{peer}"]
    return args


#: The address of a daemon on this host's loopback.
LOOPBACK = "127.0.0.1"


def zenoh_endpoint(address: str, port: int) -> str:
    """``HOST:PORT`` as Dora's ``--zenoh-listen`` reads it (an IPv6 address in brackets)."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


@dataclass(frozen=True)
class MachineHost:
    """Where one machine's daemon runs: the address its Zenoh listener binds and other
    daemons dial, and the command prefix that starts a process there. The default is this
    host's loopback; the tests stand another computer in with a network namespace of its
    own (``address`` its veth address, ``launcher`` ``ip netns exec NAME``)."""

    address: str = LOOPBACK
    launcher: tuple[str, ...] = ()


def cluster_status(
    binary: str, address: CoordinatorAddress, env: Mapping[str, str]
) -> list[tuple[str | None, str]] | None:
    """The daemons ``dora cluster status`` lists (see :func:`daemon_rows`), ``None`` when
    the coordinator does not answer."""
    command = [binary, "cluster", "status", *address.cli_args()]
    try:
        done = subprocess.run(command, env=dict(env), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return daemon_rows(done.stdout) if done.returncode == 0 else None


def _placed(
    machines: Sequence[str], hosts: Mapping[str, MachineHost], coordinator_host: str
) -> dict[str, MachineHost]:
    """Each machine's host (loopback unless ``hosts`` names one). Refused with
    ``ValueError``: a host for no machine of the cluster, and a machine on a host of its
    own (a ``launcher``) beside a loopback address, which that host's daemon cannot reach."""
    unknown = sorted(set(hosts) - set(machines))
    if unknown:
        raise ValueError(f"hosts name no machine of the cluster: {', '.join(unknown)}")
    placed = {machine: hosts.get(machine, MachineHost()) for machine in machines}
    elsewhere = [machine for machine, host in placed.items() if host.launcher]
    addresses = {
        **{m: host.address for m, host in placed.items()},
        "the coordinator": coordinator_host,
    }
    on_loopback = [name for name, address in addresses.items() if is_loopback(address)]
    if elsewhere and on_loopback:
        raise ValueError(
            f"{', '.join(elsewhere)} runs on a host of its own, which cannot reach the loopback "
            f"address of {', '.join(on_loopback)}: give every machine and the coordinator an "
            "address all the hosts reach"
        )
    return placed


class LocalCluster:
    """A coordinator and one daemon per machine id on this host, all on free ports.

    ``env`` is every node's base environment (daemons hand theirs to the nodes they
    spawn); logs and the daemons' ``out/`` go to ``work_dir``. ``hosts`` places a
    machine's daemon elsewhere than loopback (:class:`MachineHost`); the coordinator then
    listens on ``coordinator_host``, an address every host reaches."""

    def __init__(
        self,
        machines: Sequence[str],
        env: Mapping[str, str],
        work_dir: Path,
        *,
        hosts: Mapping[str, MachineHost] | None = None,
        coordinator_host: str = LOOPBACK,
    ):
        if not machines:
            raise ValueError("a cluster needs at least one machine id")
        self.machines = list(machines)
        self.hosts = _placed(self.machines, hosts or {}, coordinator_host)
        self.env = {
            **env,
            "RUST_BACKTRACE": "0",
            "DORA_ZENOH_CONFIG_OVERLAY": str(CLUSTER_ZENOH_OVERLAY),
        }
        self.work_dir = work_dir
        self.address = CoordinatorAddress(coordinator_host, free_port())
        self.processes: dict[str, DoraProcess] = {}
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Make a :meth:`up` under way (another thread, or the frame a signal handler
        interrupted) stop waiting and take down what it started."""
        self._cancelled.set()

    def up(self, timeout_s: float = UP_TIMEOUT_S) -> LocalCluster:
        """Start the coordinator and the daemons; return once every machine registered.

        Raises :class:`RuntimeStateError` ``RUN_CLUSTER_UNAVAILABLE`` (with the log
        tails) when they do not within ``timeout_s``; whatever started is stopped, as after
        :meth:`cancel` (which returns at once, nothing left running)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        binary = dora_binary()
        coordinator = [binary, "coordinator", "--interface", self.address.host]
        coordinator += ["--port", str(self.address.port), "--store", "memory"]
        self._spawn("coordinator", coordinator)
        zenoh = {machine: free_port() for machine in self.machines}
        for machine in self.machines:
            command = [binary, *self._daemon_args(machine, zenoh)]
            self._spawn(f"daemon-{machine}", [*self.hosts[machine].launcher, *command])
        try:
            self._wait_registered(timeout_s)
        except BaseException:
            self.down()
            raise
        if self._cancelled.is_set():
            self.down()
        return self

    def _daemon_args(self, machine: str, zenoh: Mapping[str, int]) -> list[str]:
        """A free Zenoh port per machine is picked on this host; a machine on a host of its
        own binds the same port number at its own address."""
        endpoints = {m: zenoh_endpoint(self.hosts[m].address, port) for m, port in zenoh.items()}
        peers = [endpoint for other, endpoint in endpoints.items() if other != machine]
        return daemon_args(
            machine,
            self.address,
            listen_port=free_port(),
            zenoh=endpoints[machine],
            peers=peers,
        )

    def _spawn(self, role: str, command: list[str]) -> None:
        self.processes[role] = DoraProcess.spawn(role, command, self.env, self.work_dir)

    def registered(self) -> set[str]:
        """The machine ids ``dora cluster status`` lists as connected right now."""
        rows = cluster_status(dora_binary(), self.address, self.env)
        return {machine for machine, _ in rows or [] if machine}

    def _wait_registered(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not self._cancelled.is_set() and self.registered() != set(self.machines):
            dead = [p.role for p in self.processes.values() if not p.alive()]
            if dead or time.monotonic() > deadline:
                raise RuntimeStateError(
                    "RUN_CLUSTER_UNAVAILABLE",
                    f"Dora coordinator {self.address} and daemons {', '.join(self.machines)} "
                    f"did not come up (dead: {', '.join(dead) or 'none'}); see the logs in "
                    f"{self.work_dir}",
                    retryable=True,
                    details={"logs": {p.role: p.log_tail() for p in self.processes.values()}},
                )
            time.sleep(_POLL_S)

    def daemon(self, machine: str) -> DoraProcess:
        """The daemon process of ``machine`` (a test kills it to lose that machine)."""
        return self.processes[f"daemon-{machine}"]

    def restart_daemon(self, machine: str) -> None:
        """Start ``machine``'s daemon again (after it died) and wait until it registered."""
        old = self.daemon(machine)
        old.kill()
        self._spawn(f"daemon-{machine}", old.command)
        self._wait_registered(UP_TIMEOUT_S)

    def node_processes(self) -> dict[int, str]:
        """Every live process below a daemon (the nodes), with its start time."""
        found: dict[int, str] = {}
        for process in self.processes.values():
            found.update(process.below())
        return found

    def down(self) -> None:
        """SIGKILL every daemon's group, every node below it, then the coordinator."""
        nodes = self.node_processes()
        for process in self.processes.values():
            if process.role != "coordinator":
                process.kill()
        _kill(nodes)
        if "coordinator" in self.processes:
            self.processes["coordinator"].kill()


def daemon_rows(status: str) -> list[tuple[str | None, str]]:
    """``(machine id, daemon id)`` of each daemon a ``dora cluster status`` table lists:
    a daemon id is ``<machine id>-<uuid>``, a bare ``<uuid>`` for a daemon started without
    ``--machine-id`` (machine ``None``)."""
    return [(found.group(1), found.group(0).strip()) for found in _DAEMON_ID.finditer(status)]


def registered_machines(status: str) -> set[str]:
    """The machine ids of the daemons a ``dora cluster status`` table lists."""
    return {machine for machine, _ in daemon_rows(status) if machine}


def _kill(processes: Mapping[int, str]) -> None:
    for pid, started in processes.items():
        if _same_live_process(pid, started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


class ClusterDataflow(Dataflow):
    """A dataflow run by ``dora start --attach`` on a coordinator: a :class:`LocalCluster`
    this object starts and stops, or an existing one (``address``) it only starts the
    dataflow on and stops it from.

    It stops like :class:`Dataflow` (SIGINT to the foreground ``dora start``, which stops
    the dataflow on every daemon; then SIGKILL): with a local cluster the daemons, their
    nodes and the coordinator go too. On an existing coordinator :meth:`kill` ends with
    ``dora stop --force``, as remote nodes are not this host's processes.
    """

    def __init__(
        self,
        path: str | Path,
        env: Mapping[str, str],
        log: IO[bytes] | None = None,
        *,
        cluster: LocalCluster | None = None,
        address: CoordinatorAddress | None = None,
        name: str | None = None,
    ):
        super().__init__(path, env, log)
        if (cluster is None) == (address is None):
            raise ValueError("give exactly one of cluster (started here) or address")
        self.cluster = cluster
        self.address = cluster.address if cluster is not None else address
        self.name = name or f"{self.path.stem}-{os.getpid()}-{time.time_ns() % 10**9}"
        self._stopped_remote = False
        # A stop before `dora start` runs (Ctrl-C while the daemons come up) cancels the
        # start; re-entrant, as a signal handler may call kill() in the starting thread.
        self._starting = threading.RLock()
        self._cancelled = False

    def start(self) -> ClusterDataflow:
        """Bring the local cluster up (if any), then ``dora start --attach`` in a session
        of its own; neither when :meth:`kill` came first."""
        if not self.path.is_file():
            raise FileNotFoundError(f"dataflow {self.path} does not exist")
        if self.cluster is not None:
            self.cluster.up()
        with self._starting:
            if not self._cancelled:
                self._attach()
        return self

    def _attach(self) -> None:
        assert self.address is not None
        command = [dora_binary(), "start", str(self.path), "--attach", "--name", self.name]
        self._spawn([*command, *self.address.cli_args()])

    def restart(self) -> None:
        """Force-stop the dataflow on its coordinator, kill what is left of its nodes, and
        start the same descriptor again under a new name, the cluster left up.

        This is the recovery Dora 1.1 allows once a lost machine's daemon is back: a
        daemon that registers again gets no nodes of a dataflow that was running, so the
        dataflow is started anew (its Gateway with a new instance id, its invocations
        journalled as they ended)."""
        if self.process is None:
            raise RuntimeError("restart() before start()")
        self._remember_nodes()
        if self._dora_alive():
            self._signal(signal.SIGKILL)
        self.process.wait()
        self._force_stop_remote()
        _kill({pid: started for pid, started in self._below.items()})
        self._below.clear()
        self.name = f"{self.name.split('~')[0]}~{time.time_ns() % 10**9}"
        self._attach()

    def _remember_nodes(self) -> None:
        super()._remember_nodes()
        if self.cluster is not None:
            self._below.update(self.cluster.node_processes())

    def kill(self) -> None:
        """SIGKILL ``dora start`` and every node; the local cluster goes down, a remote
        dataflow is force-stopped on its coordinator. Before ``dora start`` ran, the start
        is cancelled instead (the cluster coming up goes down)."""
        with self._starting:
            if self.process is None:
                self._cancelled = True
                if self.cluster is not None:
                    self.cluster.cancel()
                return
        super().kill()
        if self.cluster is not None:
            self.cluster.down()
        elif not self._stopped_remote:
            self._stopped_remote = True
            self._force_stop_remote()

    def _force_stop_remote(self) -> None:
        assert self.address is not None
        command = [dora_binary(), "stop", self.name, "--force", *self.address.cli_args()]
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(command, env=self.env, capture_output=True, timeout=15)
