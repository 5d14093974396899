"""``doraforge run``: a development dataflow in the foreground, on a port the operator
chooses, stopped within seconds of Ctrl-C or SIGTERM.

Before ``dora run`` starts, the dataflow's Gateway port (``--port``, else
``$DORAFORGE_GATEWAY_PORT``, else its config's ``port``) is checked: a busy one is one line
(``GATEWAY_PORT_BUSY``) instead of a Gateway that Dora restarts on ``address already in
use``. Every run gets a directory of its own (:func:`new_run_directory`) that holds the
Gateway journal and, for a shipped dataflow, the private copy and its logs.
"""

from __future__ import annotations

import argparse
import itertools
import shlex
import signal
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doraforge import dataflows
from doraforge.cli.argtypes import coordinator_address, tcp_port
from doraforge.cli.context import Context
from doraforge.gateway.config import load_config
from doraforge.gateway.errors import ConfigError
from doraforge.paos.gateway_auth import dataflow_auth
from doraforge.skill_runtime import dora_generation
from doraforge.skill_runtime.cluster import (
    ClusterDataflow,
    LocalCluster,
    machine_ids,
    with_working_dirs,
)
from doraforge.skill_runtime.dora import dora_version, require_node_library
from doraforge.skill_runtime.dora_run import (
    STOP_GRACE_S,
    Dataflow,
    dora_binary,
    dora_environment,
    new_run_directory,
    private_copy,
    refuse_busy_port,
)
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.launch import GATEWAY_MODULE
from doraforge.wire import strict_yaml

PORT_ENV = "DORAFORGE_GATEWAY_PORT"
JOURNAL_ENV = "DORAFORGE_GATEWAY_JOURNAL"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser(
        "run",
        help="run a development dataflow in the foreground",
        description="Run a dataflow under `dora run`. Its Gateway listens on --port (else "
        "$DORAFORGE_GATEWAY_PORT, else its config's port; a busy port is refused before Dora "
        "starts) and requires the bearer token in $DORAFORGE_GATEWAY_TOKEN or the file "
        "$DORAFORGE_GATEWAY_TOKEN_FILE when set. Each run has its own directory under "
        "$XDG_STATE_HOME/doraforge/runs/ (else ~/.local/state/doraforge/runs/) holding the "
        "Gateway journal and, for a shipped dataflow, the private copy it runs with its "
        "logs. Ctrl-C or SIGTERM stops it within 5 s (nodes still running after "
        f"{STOP_GRACE_S:g} s are killed); a second one "
        "kills it at once. Exit 0 after a clean stop, 1 when it had to be killed.",
    )
    run.add_argument(
        "dataflow",
        help=f"a dataflow YAML file, or a shipped one: {', '.join(dataflows.names())} "
        "(also spelled dataflows/sim.yml)",
    )
    run.add_argument("--port", type=tcp_port, default=None, help="the dataflow's Gateway port")
    run.add_argument(
        "--coordinator",
        type=coordinator_address,
        default=None,
        metavar="HOST:PORT",
        help="start the dataflow on this running Dora coordinator (its daemons run the "
        "nodes, with their own environment) instead of on this host; without it a dataflow "
        "whose nodes name machines (deploy: {machine: ID}) gets a coordinator and one "
        "loopback daemon per machine id here",
    )
    run.set_defaults(handler=_run)


@dataclass(frozen=True)
class GatewayNode:
    """A Gateway node of a dataflow: its id, config file and the port flag its args fix."""

    node_id: str
    config: Path
    fixed_port: int | None


def gateway_nodes(dataflow: Path) -> list[GatewayNode]:
    """The ``python -m doraforge.gateway --config FILE`` nodes of ``dataflow`` (configs
    resolved against its folder, as Dora runs nodes there). Unreadable files have none:
    ``dora run`` reports them itself."""
    try:
        document = strict_yaml.load(dataflow.read_text(encoding="utf-8"), aliases=True)
    except (OSError, UnicodeDecodeError, strict_yaml.YAMLRefused):
        return []
    nodes = document.get("nodes") if isinstance(document, dict) else None
    return [node for raw in nodes or [] if (node := _gateway_node(raw, dataflow.parent))]


def _gateway_node(raw: Any, folder: Path) -> GatewayNode | None:
    args = raw.get("args") if isinstance(raw, dict) else None
    words = shlex.split(args) if isinstance(args, str) else []
    if GATEWAY_MODULE not in words:
        return None
    options = dict(_options(words))
    if "--config" not in options:
        return None
    fixed = options.get("--port")
    return GatewayNode(
        str(raw.get("id")),
        folder / options["--config"],
        int(fixed) if fixed and fixed.isdigit() else None,
    )


def _options(words: list[str]) -> Iterator[tuple[str, str]]:
    for flag, value in itertools.pairwise(words):
        if flag.startswith("--"):
            yield flag, value
    for word in words:
        if word.startswith("--") and "=" in word:
            flag, value = word.split("=", 1)
            yield flag, value


def gateway_ports(
    dataflow: Path, chosen: int | None, environ: Mapping[str, str]
) -> list[tuple[str, int]]:
    """``(host, port)`` where each Gateway of ``dataflow`` will listen, as the Gateway
    itself decides (args ``--port``, then ``$DORAFORGE_GATEWAY_PORT``, then its config).

    Raises :class:`RuntimeStateError` ``GATEWAY_PORT_FIXED`` when ``chosen`` cannot apply
    because the node's own args fix another port, ``GATEWAY_CONFIG_INVALID`` when the
    config a Gateway node names cannot be read."""
    found = []
    for node in gateway_nodes(dataflow):
        if chosen is not None and node.fixed_port not in (None, chosen):
            raise RuntimeStateError(
                "GATEWAY_PORT_FIXED",
                f"node {node.node_id} of {dataflow} fixes --port {node.fixed_port} in its "
                "args; remove it there to choose the port with --port",
                details={"node": node.node_id, "port": node.fixed_port},
            )
        try:
            config = load_config(node.config)
        except ConfigError as exc:
            raise RuntimeStateError(
                "GATEWAY_CONFIG_INVALID",
                f"{exc}; fix the config node {node.node_id} of {dataflow} names",
                details={"node": node.node_id, "config": str(node.config)},
            ) from exc
        from_env = environ.get(PORT_ENV, "")
        port = node.fixed_port or chosen or (int(from_env) if from_env.isdigit() else None)
        found.append((config.host, port or config.port))
    return [(host, port) for host, port in found if port]


class _SignalStop:
    """SIGINT or SIGTERM stops ``dataflow`` gracefully, bounded by ``grace_s``
    (:meth:`Dataflow.settle`, in a thread); a second signal kills ``dora run`` and every
    node below it at once.

    The handler only sends signals and starts the thread: it interrupts the main frame
    inside :meth:`Dataflow.wait`, which holds the process's wait lock, so waiting here
    would never see Dora exit.
    """

    def __init__(self, ctx: Context, dataflow: Dataflow, grace_s: float = STOP_GRACE_S):
        self._ctx, self._dataflow, self._grace_s = ctx, dataflow, grace_s
        self._settling: threading.Thread | None = None
        self.killed = False

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self._settling is not None:
            self._ctx.out.say("killing the dataflow and its nodes (second signal)")
            self.killed = True
            self._dataflow.kill()
            return
        name = signal.Signals(signum).name
        self._ctx.out.say(f"stopping the dataflow ({name}; killed after {self._grace_s:g} s)")
        self._dataflow.interrupt()
        self._settling = threading.Thread(target=self._settle, name="settle", daemon=True)
        self._settling.start()

    @property
    def stopping(self) -> bool:
        """Whether a signal asked the dataflow to stop."""
        return self._settling is not None

    def _settle(self) -> None:
        if not self._dataflow.settle(self._grace_s):
            self.killed = True


def _refuse_other_generation(ctx: Context, path: Path) -> None:
    """Refuse, before ``dora run``, a dataflow of another Dora generation than the CLI's."""
    env = dora_environment(ctx.environ)
    installed = dora_version(dora_binary(), env, minimum=None)
    refused = dora_generation.refusal(path, installed)
    if refused is not None:
        raise RuntimeStateError("SKILL_DORA_GENERATION", refused)
    require_node_library(installed, env["UV_PYTHON"], env)


def _runnable(ctx: Context, source: Path, run_dir: Path) -> Path:
    # A shipped dataflow may sit in a read-only site-packages, and `dora run` writes its
    # out/ logs next to the file: run a private copy. The user's own files run in place.
    if not dataflows.is_shipped(source):
        return source
    copy = private_copy(source, run_dir)
    ctx.out.say(f"the shipped dataflow {source.stem} runs from {copy.parent} (logs in its out/)")
    return copy


def _run(ctx: Context, args: argparse.Namespace) -> int:
    source = dataflows.locate(args.dataflow)
    _refuse_other_generation(ctx, source)
    if args.coordinator is not None:
        return _run_on_coordinator(ctx, source, args)
    ports = gateway_ports(source, args.port, ctx.environ)
    for host, port in ports:
        refuse_busy_port(port, host)
    run_dir = new_run_directory(ctx.environ, source.stem)
    path = _runnable(ctx, source, run_dir)
    overrides = {JOURNAL_ENV: ctx.environ.get(JOURNAL_ENV) or str(run_dir / "gateway.journal")}
    if args.port is not None:
        overrides[PORT_ENV] = str(args.port)
    machines = machine_ids(path)
    with dataflow_auth(ctx.environ) as auth:
        env = dora_environment(auth.environment(ctx.environ), **overrides)
        dataflow = _local_dataflow(ctx, path, env, machines, run_dir)
        ctx.out.say(f"running {dataflow.path} (Ctrl-C stops it)")
        for host, port in ports:
            ctx.out.say(f"Gateway on http://{host}:{port}")
        ctx.out.say(f"run directory {run_dir} (the Gateway journal, unless its config names one)")
        ctx.out.say(f"Gateway authentication: {auth.mode}")
        return _foreground(ctx, dataflow)


def _local_dataflow(
    ctx: Context, path: Path, env: Mapping[str, str], machines: list[str], run_dir: Path
) -> Dataflow:
    """``dora run`` for a one-machine dataflow; for one whose nodes name machines, a
    coordinator and one loopback daemon per machine id on this host (:class:`LocalCluster`)
    with the nodes pinned to the dataflow's folder."""
    if not machines:
        return Dataflow(path, env)
    pinned = with_working_dirs(path, run_dir / f"{path.stem}.cluster.yml")
    cluster = LocalCluster(machines, env, run_dir / "cluster")
    ctx.out.say(
        f"machines {', '.join(machines)}: one Dora daemon each on this host, coordinator "
        f"{cluster.address} (logs in {cluster.work_dir})"
    )
    return ClusterDataflow(pinned, env, cluster=cluster)


def _run_on_coordinator(ctx: Context, source: Path, args: argparse.Namespace) -> int:
    """Start ``source`` on an existing coordinator and stop it there with the run.

    Its daemons spawn the nodes with their own environment and files: this host's
    ``--port``, token file and journal mean nothing there, so ``--port`` is refused."""
    if args.port is not None:
        raise RuntimeStateError(
            "RUN_PORT_REMOTE",
            "--port cannot reach a Gateway on another machine's daemon; set port in its "
            "Gateway config or DORAFORGE_GATEWAY_PORT in that daemon's environment",
        )
    env = dora_environment(ctx.environ)
    dataflow = ClusterDataflow(source, env, address=args.coordinator)
    ctx.out.say(f"running {dataflow.path} on coordinator {args.coordinator} (Ctrl-C stops it)")
    ctx.out.say("its nodes run with the environment of the daemons of their machines")
    return _foreground(ctx, dataflow)


def _foreground(ctx: Context, dataflow: Dataflow) -> int:
    """Run ``dataflow`` until it ends or a signal stops it; the exit status of the run."""
    stopper = _SignalStop(ctx, dataflow)
    stopper.install()
    try:
        dataflow.start()
        # The token file (for a $DORAFORGE_GATEWAY_TOKEN value) lives until Dora exits.
        status = dataflow.wait()
    finally:
        dataflow.kill()  # a node Dora left behind goes with the run
    if stopper.killed:
        ctx.out.fail(f"RUN_KILLED: nodes still ran {STOP_GRACE_S:g} s after the stop; killed")
        return 1
    # Killed by settle once its nodes were done, dora run's own status says nothing.
    return 0 if stopper.stopping and status == -signal.SIGKILL else status
