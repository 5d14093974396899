"""RuntimeManager: start, watch and stop installed skills on this home's own Dora.

A start is all or nothing. Preflight (Dora and its version, the dataflow, binaries, assets,
environment) and a free Gateway URL come first; then ``starting`` is persisted, the
bundle's ``start.sh`` hook runs, the dataflow is rendered into a launch copy, this home's
coordinator is brought up when needed, ``dora start`` launches the profile, and the
manager waits for the dataflow to run and for every required tool to be ready. Only then
is ``running`` persisted with the Gateway identity. Any failure on the way stops the
dataflow, checks that no node process is left, and persists ``failed`` with the error.

Every start writes a fresh Gateway bearer token (``runtime/tokens/<name>.token``, 0600)
and hands its Gateway node (only) its path in ``DORAFORGE_GATEWAY_TOKEN_FILE``, so a
skill's Gateway is authenticated even on loopback; every probe of it presents the token,
and a stop or a failed start removes the file. The hook, Dora's processes and the nodes
get an allowlisted environment (:mod:`~doraforge.skill_runtime.child_env`): no token of
the registry, the operator or any Gateway.

Every lifecycle command holds the skill's lock (``SKILL_RUNTIME_BUSY`` when taken). The
coordinator belongs to the home: its ports are chosen once and kept in
``runtime/dora.json``, and it is torn down when no skill of the home runs any more.

Across machines: a profile whose nodes name machines (``deploy: {machine: M}``) runs on the
home's coordinator with one local ``dora daemon --machine-id M`` per machine id (started
through :mod:`~doraforge.skill_runtime.cluster`, shared by the home's skills that name the
same machine, recorded in ``runtime/dora.json`` and in the state's ``machines``; stopped
once no live skill names it). ``start(coordinator=...)`` runs a skill on an existing
coordinator instead, whose daemons are someone else's: nothing of it is ever started or
brought down from here. ``start(port=AUTO_PORT)`` puts the Gateway on a free port.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from doraforge.paos.errors import PaosError
from doraforge.paos.gateway_auth import TOKEN_FILE_ENV
from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.skill_runtime import dora_generation, gateway_probe, node_logs, stop_guards
from doraforge.skill_runtime.catalog import current_bundle, not_installed
from doraforge.skill_runtime.child_env import declared_environment, skill_environment
from doraforge.skill_runtime.cluster import (
    CLUSTER_ZENOH_OVERLAY,
    CoordinatorAddress,
    DoraProcess,
    machine_ids,
    node_ids,
    unpinned_nodes,
    with_working_dirs,
)
from doraforge.skill_runtime.dora import (
    LOOPBACK,
    DoraControl,
    dora_version,
    require_minimum,
    require_node_library,
)
from doraforge.skill_runtime.dora_run import (
    dora_binary,
    free_port,
    port_in_use,
    refuse_busy_port,
)
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.gateway_tokens import (
    create_token_file,
    remove_token_file,
    runtime_token,
    token_path,
)
from doraforge.skill_runtime.launch import (
    environment_digest,
    placeholder_values,
    preflight_problems,
    render_placeholders,
    write_launch_copy,
)
from doraforge.skill_runtime.manifest import NAME_PATTERN, Profile, SkillManifest, load_manifest
from doraforge.skill_runtime.runtime_state import (
    MachineDaemon,
    RecordedError,
    RuntimeState,
    all_states,
    append_audit,
    home_lock,
    read_state,
    skill_lock,
    utc_now,
    write_state,
)
from doraforge.skill_runtime.sandbox import (
    SandboxPlaces,
    interpreter_places,
    require_bwrap,
    sandbox_launch_copy,
)
from doraforge.wire.files import PRIVATE_UMASK, atomic_write_text, private_file
from doraforge.wire.suggest import did_you_mean
from doraforge.wire.tokens import secret_name

__all__ = ["AUTO_PORT", "RuntimeManager", "RuntimeState"]

type Progress = Callable[[str, float], None]

#: Seconds Dora gets to stop nodes gracefully before SIGTERM (SIGKILL at 1.5x).
STOP_GRACE_S = 10.0
#: Seconds this home's coordinator and daemon get to come up.
SERVICES_TIMEOUT_S = 20.0
POLL_S = 0.1
#: ``start(port=AUTO_PORT)``: the skill's Gateway on a free port, recorded in the state URL.
AUTO_PORT = 0
# How many Dora log lines are read per line shown when Dora's diagnostics are filtered.
_DIAGNOSTICS_HEADROOM = 50


class _LocalDaemon(BaseModel):
    """A ``dora daemon --machine-id`` this home started: its process (pid and start time,
    so only that process is ever signalled) and its ports."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pid: int = Field(gt=0)
    started: str
    local_listen_port: int = Field(gt=0, lt=65536)
    zenoh_port: int = Field(gt=0, lt=65536)


class _Services(BaseModel):
    """``runtime/dora.json``: the private ports of this home's coordinator and daemon, and
    the daemon of each machine id a running skill's dataflow names (shared by every skill
    of the home that names it; ``machines`` is optional, so older files still read)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state_version: int = 1
    coordinator_port: int = Field(gt=0, lt=65536)
    daemon_listen_port: int = Field(gt=0, lt=65536)
    machines: dict[str, _LocalDaemon] = Field(default_factory=dict)


class RuntimeManager:
    """Lifecycle of the installed skills of one PAOS home on Dora.

    Every command raises :class:`~doraforge.skill_runtime.errors.RuntimeStateError` (a
    ``SkillError``)
    with a ``code``: ``SKILL_RUNTIME_BUSY`` (another command holds the skill's lock),
    ``SKILL_NOT_INSTALLED``, ``SKILL_PROFILE_UNKNOWN``/``SKILL_PROFILE_REQUIRED``,
    ``SKILL_PREFLIGHT_FAILED`` (``details["missing"]`` by kind), ``SKILL_GATEWAY_IN_USE``
    (something answers there), ``GATEWAY_PORT_BUSY`` (something holds the port),
    ``SKILL_ALREADY_RUNNING``, ``SKILL_START_HOOK_FAILED``, ``SKILL_DATAFLOW_FAILED``,
    ``SKILL_START_TIMEOUT``, ``SKILL_RUNTIME_IN_USE`` (stop refused), ``SKILL_NOT_RUNNING``,
    ``SKILL_RUNTIME_UNHEALTHY``. A manifest problem is a ``ManifestError``.
    """

    def __init__(
        self,
        home: PaosHome,
        *,
        dora: str | None = None,
        environ: Mapping[str, str] = os.environ,
        store: AgentTaskStore | None = None,
        progress: Progress | None = None,
        runtime_bin: Path | None = None,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.home = home.ensure()
        self.dora = dora or dora_binary()
        self.environ = dict(environ)
        self.store = store
        self.progress = progress or (lambda message, elapsed: None)
        self.runtime_bin = runtime_bin or Path(sys.executable).parent
        self.stop_grace_s = stop_grace_s
        # Absolute: its paths reach Dora's processes (the launch copy, the token file, the
        # journal), which run in other directories than a home named relative (`--home a`).
        self.runtime_dir = home.runtime_dir.absolute()

    # ------------------------------------------------------------------ public commands

    def start(
        self,
        name: str,
        profile: str | None = None,
        *,
        port: int | None = None,
        coordinator: CoordinatorAddress | None = None,
        sandbox: bool = False,
    ) -> RuntimeState:
        """Start ``name`` with ``profile`` (the only one, else ``default``) and wait until
        it is ready; returns the ``running`` state. On failure nothing is left running and
        ``failed`` is persisted with the error, which is raised.

        ``port`` moves the skill's Gateway off the manifest's ``gateway_url`` port
        (:data:`AUTO_PORT`: a free one): the dataflow gets it as ``DORAFORGE_GATEWAY_PORT``
        and the state records the URL, which every later command dials. A port already held
        is ``GATEWAY_PORT_BUSY``, raised before anything starts.

        A dataflow whose nodes name machines (``deploy: {machine: M}``) runs on this home's
        coordinator with one local daemon per machine id (``state.machines``). With
        ``coordinator`` it runs on that existing coordinator instead, whose daemons someone
        else started (``coordinator_attached``): refused before anything starts with
        ``SKILL_COORDINATOR_UNAVAILABLE`` when it does not answer and
        ``SKILL_MACHINE_MISSING`` when it has no daemon for a machine the dataflow names.

        ``sandbox`` runs every node in bubblewrap (:mod:`~doraforge.skill_runtime.sandbox`):
        ``SKILL_PREFLIGHT_FAILED`` without ``bwrap``, ``SKILL_SANDBOX_UNSUPPORTED`` on an
        attached coordinator (its daemons may be on other hosts) or for a node it cannot
        wrap."""
        _check_name(name)
        bwrap = self._sandboxing(coordinator) if sandbox else None
        with skill_lock(self.runtime_dir, name):
            bundle = self._bundle(name)
            manifest = load_manifest(bundle)
            profile_name = _choose_profile(manifest, profile)
            chosen = manifest.profiles[profile_name]
            self._refuse_live(name)
            self._preflight(bundle, manifest, chosen)
            machines = self._placement(bundle / chosen.dataflow, coordinator)
            url = gateway_url_on(manifest.gateway_url, free_port() if port == AUTO_PORT else port)
            _refuse_taken(url)
            fresh = self._new_state(manifest, profile_name, url, coordinator, machines)
            state = write_state(self.runtime_dir, fresh)
            self._log(name, f"starting {manifest.version} profile {profile_name}")
            try:
                return self._launch(state, bundle, manifest, chosen, bwrap)
            except BaseException as exc:
                replacement = self._abort(name, exc)
                if replacement is exc:
                    raise
                raise replacement from exc

    def stop(self, name: str, *, force: bool = False) -> RuntimeState:
        """Stop ``name``'s dataflow and persist ``stopped``.

        Refused with ``SKILL_RUNTIME_IN_USE`` (``details["blockers"]``) while a
        non-terminal task is bound to the skill or the Gateway has live invocations, unless
        ``force``: then cancel/stop is requested for every invocation PAOS knows and an
        audit event is appended to ``runtime/audit.log``. Stopping a runtime that is not
        live returns its state unchanged.
        """
        _check_name(name)
        with skill_lock(self.runtime_dir, name):
            state = read_state(self.runtime_dir, name)
            if state is None:
                raise RuntimeStateError(
                    "SKILL_NOT_RUNNING",
                    f"{name!r} has never been started, so there is nothing to stop; "
                    "`doraforge skill status` lists the started skills",
                )
            if not state.live and not self._dataflow_running(state):
                self._down_if_idle()  # e.g. after a lost dataflow left the coordinator up
                return self._forget_token(state)
            with self._store() as store:
                self._guard_stop(state, store, force)
            stopping = write_state(self.runtime_dir, state.moved("stopping"))
            self._log(name, f"stopping (force={force})")
            try:
                self._stop_dataflow(stopping)
            except PaosError as exc:
                write_state(self.runtime_dir, stopping.moved("failed", error=_recorded(exc)))
                raise
            remove_token_file(stopping.gateway_token_file)
            stopped = write_state(
                self.runtime_dir,
                stopping.moved("stopped", error=None, gateway_token_file=None),
            )
            self._log(name, "stopped")
            self._down_if_idle()
            return stopped

    def status(self, name: str) -> RuntimeState | None:
        """The recorded state of ``name`` checked against reality, or ``None``.

        A ``running`` record whose dataflow is gone is persisted and returned as
        ``failed`` (``SKILL_DATAFLOW_LOST``); one whose Gateway does not answer with the
        recorded identity is returned ``running`` with ``error`` set
        (``SKILL_RUNTIME_UNHEALTHY``).
        """
        _check_name(name)
        state = read_state(self.runtime_dir, name)
        return state if state is None else self._checked(state)

    def _checked(self, state: RuntimeState) -> RuntimeState:
        """``state`` checked against reality (see :meth:`status`)."""
        if state.state != "running":
            return state
        if not self._dataflow_running(state):
            return self._mark_lost(state)
        live = gateway_probe.listing(state.gateway_url, token=runtime_token(state))
        seen = gateway_probe.identity(live)
        if seen != state.gateway_identity:
            problem = "does not answer" if live is None else "answers with another identity"
            error = RecordedError(
                code="SKILL_RUNTIME_UNHEALTHY",
                message=f"the Gateway at {state.gateway_url} {problem}",
                details={"seen_identity": seen},
            )
            return state.model_copy(update={"error": error})
        return state

    def healthy_runtime(self, name: str) -> RuntimeState:
        """The running state of ``name`` when its dataflow runs and its Gateway answers
        with the identity recorded at start; raises ``SKILL_NOT_RUNNING`` or
        ``SKILL_RUNTIME_UNHEALTHY`` otherwise. This is what ``activate_skill`` offers."""
        state = self.status(name)
        if state is None or state.state != "running":
            known = f"is {state.state}" if state else "has never been started"
            raise RuntimeStateError(
                "SKILL_NOT_RUNNING",
                f"skill {name!r} {known}; start it with `doraforge skill start {name}`",
                details={"state": state.state if state else None},
            )
        if state.error is not None:
            raise RuntimeStateError(
                state.error.code, state.error.message, details=state.error.details
            )
        return state

    def running(self) -> list[RuntimeState]:
        """Every skill of this home whose runtime is running (live-checked)."""
        states = (self._checked(s) for s in all_states(self.runtime_dir))
        return [s for s in states if s.state == "running"]

    def logs(
        self, name: str, lines: int = 200, *, node: str | None = None, keep_dora: bool = True
    ) -> str:
        """The dataflow's node logs (``dora logs``; only ``node``'s when given) and, for all
        nodes, the runtime's own log, newest last. Without ``keep_dora`` Dora's own
        diagnostics are left out (see :mod:`node_logs`) and counted."""
        _check_name(name)
        state = read_state(self.runtime_dir, name)
        parts = []
        if state is not None and state.dataflow_uuid and state.launch_dataflow:
            _check_node(state, node)
            which = f" node {node}" if node else ""
            text = self._node_logs(state, lines, node, keep_dora)
            parts.append(f"== dataflow {state.dataflow_uuid}{which} ==\n{text}")
        log = self._log_path(name)
        if node is None and log.exists():
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"== runtime log {log} ==\n" + "\n".join(tail) + "\n")
        if not parts:
            raise RuntimeStateError("SKILL_NOT_RUNNING", f"{name!r} has no runtime logs")
        return "\n".join(parts)

    def follow_logs(self, name: str, *, node: str | None = None) -> subprocess.Popen[str]:
        """``dora logs --follow`` of ``name``'s dataflow as JSON lines (read them with
        :func:`node_logs.select`); the caller ends the process. Raises
        ``SKILL_NOT_RUNNING`` when the skill has no dataflow to follow."""
        _check_name(name)
        state = read_state(self.runtime_dir, name)
        if state is None or not state.live or not state.dataflow_uuid or not state.launch_dataflow:
            raise RuntimeStateError(
                "SKILL_NOT_RUNNING",
                f"skill {name!r} is not running, so there is nothing to follow; "
                f"`doraforge skill logs {name}` shows its last logs",
            )
        _check_node(state, node)
        dora = self._control_of(state)
        cwd = Path(state.launch_dataflow).parent
        return dora.follow_logs(state.dataflow_uuid, cwd=cwd, node=node, local=_local_logs(state))

    def _node_logs(self, state: RuntimeState, lines: int, node: str | None, keep_dora: bool) -> str:
        dataflow, launch = state.dataflow_uuid or "", Path(state.launch_dataflow or ".")
        dora, cwd, local = self._control_of(state), launch.parent, _local_logs(state)
        if keep_dora:
            return dora.logs(dataflow, lines=lines, cwd=cwd, node=node, local=local)
        # Diagnostics can outnumber the nodes' lines a hundred to one: read far enough back
        # that the last ``lines`` of the nodes' own are there.
        raw = dora.logs(
            dataflow,
            lines=lines * _DIAGNOSTICS_HEADROOM,
            cwd=cwd,
            node=node,
            json_lines=True,
            local=local,
        )
        shown, hidden = node_logs.select(raw.splitlines(), keep_dora=False, last=lines)
        which = f" --node {node}" if node else ""
        note = (
            f"({hidden} lines of Dora's own diagnostics hidden; "
            f"`doraforge skill logs {state.name}{which} --all` shows them)\n"
        )
        return "".join(f"{line}\n" for line in shown) + (note if hidden else "")

    # ------------------------------------------------------------------ start, step by step

    def _bundle(self, name: str) -> Path:
        bundle = current_bundle(self.home, name)
        if not (bundle / "skill.yaml").is_file():
            raise not_installed(self.home, name, RuntimeStateError)
        return bundle.resolve()

    def _refuse_live(self, name: str) -> None:
        previous = read_state(self.runtime_dir, name)
        if previous is None or not previous.live:
            return
        if self._dataflow_running(previous):
            raise RuntimeStateError(
                "SKILL_ALREADY_RUNNING",
                f"{name!r} is already {previous.state} with its Gateway at "
                f"{previous.gateway_url}; use it there, or stop it first with "
                f"`doraforge skill stop {name}`",
                details={
                    "runtime_instance_id": previous.runtime_instance_id,
                    "gateway_url": previous.gateway_url,
                },
            )
        # A record left live by a crashed command: make sure nothing of it survives.
        self._stop_dataflow(previous)

    def _preflight(self, bundle: Path, manifest: SkillManifest, profile: Profile) -> None:
        project_env = self._project_env()
        search_path = project_env["PATH"]
        locks = manifest.artifacts.nodes.values() if manifest.artifacts else []
        missing = preflight_problems(
            bundle,
            profile,
            self.environ,
            search_path,
            entrypoints=[lock.entrypoint for lock in locks],
        )
        if (bundle / "start.sh").is_file() and not _which("bash", search_path):
            missing.setdefault("binaries", []).append("bash")
        declared = declared_environment(profile.required_environment, self.environ)
        bad_env = sorted(k for k, v in {**profile.environment, **declared}.items() if "$" in v)
        if bad_env:
            # dora start --env refuses `$`: the daemon would expand it in ITS environment.
            missing["environment_values"] = bad_env
        if secrets := [v for v in profile.required_environment if secret_name(v)]:
            missing["environment_secret"] = secrets  # a token is never handed to a skill
        dora = self.dora if os.path.isabs(self.dora) else _which(self.dora, search_path)
        if dora is None:
            missing["dora"] = [self.dora]
        if missing:
            summary = "; ".join(f"{kind}: {', '.join(items)}" for kind, items in missing.items())
            raise RuntimeStateError(
                "SKILL_PREFLIGHT_FAILED", f"missing {summary}", details={"missing": missing}
            )
        # The dataflow's own generation first: its refusal names what it needs and why.
        installed = dora_version(self.dora, project_env, minimum=None)
        refused = dora_generation.refusal(bundle / profile.dataflow, installed)
        if refused is not None:
            raise RuntimeStateError(
                "SKILL_DORA_GENERATION",
                refused,
                details={"installed": installed, "dataflow": str(profile.dataflow)},
            )
        require_minimum(installed, self.dora)
        # The nodes' dora-rs must speak to this CLI's daemon, or every node dies at start.
        require_node_library(installed, project_env["UV_PYTHON"], project_env)

    def _placement(self, dataflow: Path, coordinator: CoordinatorAddress | None) -> list[str]:
        """The machine ids ``dataflow`` names, checked against where it will run.

        On this home's daemons every node must name a machine (a node without one would
        run on the home's own daemon, outside the machines' Zenoh links):
        ``SKILL_DEPLOY_PARTIAL``. On an existing ``coordinator``, it must answer and have
        a daemon for each machine (one without ``--machine-id`` for a dataflow that names
        none)."""
        machines = machine_ids(dataflow)
        if coordinator is not None:
            self._refuse_unfit(coordinator, machines)
        elif machines and (loose := unpinned_nodes(dataflow)):
            raise RuntimeStateError(
                "SKILL_DEPLOY_PARTIAL",
                f"nodes {', '.join(loose)} of {dataflow.name} name no machine while others "
                f"name {', '.join(machines)}; give every node deploy: {{machine: ...}}",
                details={"nodes": loose, "machines": machines},
            )
        return machines

    def _refuse_unfit(self, coordinator: CoordinatorAddress, machines: list[str]) -> None:
        rows = self._attached(coordinator.host, coordinator.port).daemons()
        if rows is None:
            raise RuntimeStateError(
                "SKILL_COORDINATOR_UNAVAILABLE",
                f"no Dora coordinator answers at {coordinator}; start it there "
                "(`dora coordinator`) or pass the right --coordinator HOST:PORT",
                retryable=True,
                details={"coordinator": str(coordinator)},
            )
        present = {machine for machine, _ in rows}
        missing = [m for m in machines if m not in present]
        if not machines and None not in present:
            missing = [""]  # a dataflow naming no machine runs on a daemon without an id
        if missing:
            first = f" --machine-id {missing[0]}" if missing[0] else ""
            which = ", ".join(missing) if missing[0] else "a daemon without --machine-id"
            raise RuntimeStateError(
                "SKILL_MACHINE_MISSING",
                f"coordinator {coordinator} has no daemon for {which}; start `dora daemon"
                f"{first} {' '.join(coordinator.cli_args())}` on that machine first",
                retryable=True,
                details={"coordinator": str(coordinator), "missing": missing},
            )

    def _new_state(
        self,
        manifest: SkillManifest,
        profile: str,
        url: str,
        coordinator: CoordinatorAddress | None,
        machines: list[str],
    ) -> RuntimeState:
        now = utc_now()
        instance, attached = uuid.uuid4().hex, coordinator is not None
        # On this home's coordinator the skill's name is unique; on a shared one another home
        # may run the same skill, and a dataflow is found again (and stopped) by its name.
        dataflow_name = f"{manifest.name}-{instance[:12]}" if attached else manifest.name
        if coordinator is None:
            with home_lock(self.runtime_dir):
                coordinator = CoordinatorAddress(LOOPBACK, self._services().coordinator_port)
        return RuntimeState(
            name=manifest.name,
            version=manifest.version,
            profile=profile,
            state="starting",
            runtime_instance_id=f"rt-{instance}",
            dataflow_name=dataflow_name,
            coordinator_port=coordinator.port,
            coordinator_host=coordinator.host,
            coordinator_attached=attached,
            # Recorded before any daemon starts: a stop of another skill meanwhile keeps them.
            machines={machine: MachineDaemon() for machine in machines},
            gateway_url=url,
            started_at=now,
            updated_at=now,
        )

    def _sandboxing(self, coordinator: CoordinatorAddress | None) -> str:
        """The ``bwrap`` that ``start(sandbox=True)`` wraps nodes in, checked first."""
        if coordinator is not None:
            raise RuntimeStateError(
                "SKILL_SANDBOX_UNSUPPORTED",
                "--sandbox runs nodes on this host's daemons only, not on --coordinator",
                details={"coordinator": str(coordinator)},
            )
        return require_bwrap(self._project_env()["PATH"])

    def _sandbox(self, launch: Path, bundle: Path, state: RuntimeState, bwrap: str) -> None:
        journal = self.runtime_dir / "journal"
        journal.mkdir(parents=True, exist_ok=True)  # bound into the Gateway's sandbox
        places = SandboxPlaces(
            home=self.home.root.absolute(),
            bundle=bundle,
            launch_dir=launch.parent,
            artifacts=self.home.artifacts_dir.absolute(),
            token_file=token_path(self.runtime_dir, state.name),
            journal_dir=journal,
            interpreter=interpreter_places(),
        )
        sandbox_launch_copy(launch, places, bwrap=bwrap, search_path=self._project_env()["PATH"])
        self._log(state.name, f"nodes sandboxed with {bwrap}")

    def _launch(
        self,
        state: RuntimeState,
        bundle: Path,
        manifest: SkillManifest,
        profile: Profile,
        bwrap: str | None = None,
    ) -> RuntimeState:
        self._run_hook(state, bundle, profile)
        values = placeholder_values(
            root=bundle, runtime_bin=self.runtime_bin, name=state.name, version=state.version
        )
        launch_dir = self.runtime_dir / "launch" / state.name
        # Only the Gateway node learns where its token is; the file is written just below.
        gateway_env = {TOKEN_FILE_ENV: str(token_path(self.runtime_dir, state.name))}
        launch = write_launch_copy(bundle / profile.dataflow, launch_dir, values, gateway_env)
        if state.machines and not state.coordinator_attached:
            # This host's daemons see the launch folder: nodes run there, as without machines.
            launch = with_working_dirs(launch, launch)
        if bwrap is not None:
            self._sandbox(launch, bundle, state, bwrap)
        digest = environment_digest(bundle, profile.dataflow, state.profile)
        # Recorded before it is written, so a failure from here on always removes it.
        token_file = str(create_token_file(self.runtime_dir, state.name))
        state = write_state(
            self.runtime_dir,
            state.moved(
                "starting",
                launch_dataflow=str(launch),
                environment_digest=digest,
                gateway_token_file=token_file,
            ),
        )
        dora, machines = self._coordinator_for(state)
        state = write_state(
            self.runtime_dir,
            state.moved("starting", coordinator_port=dora.port, machines=machines),
        )
        started = time.monotonic()
        self.progress("starting the dataflow", 0.0)
        env = self._dataflow_env(state, bundle, profile, values)
        dataflow_uuid = dora.start(launch, name=state.dataflow_name, env=env)
        state = write_state(self.runtime_dir, state.moved("starting", dataflow_uuid=dataflow_uuid))
        self._log(state.name, f"dora started dataflow {dataflow_uuid}")
        tools = set(manifest.required_tools) | set(profile.required_tools or [])
        identity = self._wait_ready(state, dora, tools, started, profile.startup_timeout_s)
        running = state.moved("running", gateway_identity=identity, error=None)
        self._log(state.name, f"running; Gateway identity {identity}")
        return write_state(self.runtime_dir, running)

    def _coordinator_for(self, state: RuntimeState) -> tuple[DoraControl, dict[str, MachineDaemon]]:
        """The coordinator ``state`` runs on, with the daemon of each of its machines: an
        attached one as it is (checked at start), else this home's, brought up."""
        if not state.coordinator_attached:
            return self._ensure_services(sorted(state.machines))
        dora = self._control_of(state)
        rows = dora.daemons() or []
        found = {machine: daemon for machine, daemon in rows if machine in state.machines}
        return dora, {m: MachineDaemon(daemon_id=found.get(m)) for m in state.machines}

    def _run_hook(self, state: RuntimeState, bundle: Path, profile: Profile) -> None:
        timeout_s = profile.startup_timeout_s
        hook = bundle / "start.sh"
        if not hook.is_file():
            return
        self.progress("running start.sh", 0.0)
        env = {
            **self._project_env(),
            **declared_environment(profile.required_environment, self.environ),
            **_skill_variables(state, bundle),
        }
        log = self._log_path(state.name)
        with open(private_file(log), "ab") as out:
            try:
                done = subprocess.run(
                    ["bash", str(hook), state.name, state.version],
                    cwd=bundle,
                    env=env,
                    umask=PRIVATE_UMASK,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                )
                status: int | str = done.returncode
            except subprocess.TimeoutExpired:
                status = f"timed out after {timeout_s:.0f} s"
        if status != 0:
            raise RuntimeStateError(
                "SKILL_START_HOOK_FAILED",
                f"start.sh failed ({status})",
                details={"exit_status": status, "log_tail": _tail(log, 20)},
            )

    def _wait_ready(
        self,
        state: RuntimeState,
        dora: DoraControl,
        tools: set[str],
        started: float,
        timeout_s: float,
    ) -> dict[str, object]:
        """Poll until the dataflow runs and every required tool is ready; the identity."""
        assert state.dataflow_uuid is not None
        waiting: list[str] = sorted(tools)
        token = runtime_token(state)
        while True:
            elapsed = time.monotonic() - started
            status = dora.dataflow_status(state.dataflow_uuid)
            if status is not None and status != "Running":
                raise RuntimeStateError(
                    "SKILL_DATAFLOW_FAILED",
                    f"the dataflow is {status} before it became ready",
                    details={"dataflow_uuid": state.dataflow_uuid, "dora_status": status},
                )
            listed, waiting = gateway_probe.readiness(state.gateway_url, tools, token=token)
            if status == "Running" and listed is not None and not waiting:
                return gateway_probe.identity(listed) or {}
            if elapsed > timeout_s:
                raise RuntimeStateError(
                    "SKILL_START_TIMEOUT",
                    f"not ready within {timeout_s:.0f} s",
                    details={"gateway_answers": listed is not None, "tools_waiting": waiting},
                )
            message = "waiting for the Gateway" if listed is None else "waiting for tools"
            self.progress(f"{message} ({len(waiting)} not ready)", elapsed)
            time.sleep(POLL_S)

    def _abort(self, name: str, exc: BaseException) -> BaseException:
        """Undo a failed start: stop the dataflow, persist ``failed``; the error to raise.

        A PAOS error is raised as it is; any other exception becomes
        ``SKILL_START_FAILED``; KeyboardInterrupt and friends propagate unchanged, after
        the same cleanup, and are recorded as ``SKILL_START_INTERRUPTED``.
        """
        raised: BaseException
        if isinstance(exc, PaosError) or not isinstance(exc, Exception):
            raised = exc
        else:
            raised = RuntimeStateError("SKILL_START_FAILED", f"{type(exc).__name__}: {exc}")
        recorded = (
            _recorded(raised)
            if isinstance(raised, PaosError)
            else RecordedError(code="SKILL_START_INTERRUPTED", message=type(exc).__name__)
        )
        state = read_state(self.runtime_dir, name)
        assert state is not None
        self._log(name, f"start failed: {type(exc).__name__}: {exc}")
        try:
            self._stop_dataflow(state)
        finally:
            remove_token_file(state.gateway_token_file)
            failed = state.moved("failed", error=recorded, gateway_token_file=None)
            write_state(self.runtime_dir, failed)
            self._down_if_idle()
        return raised

    # ------------------------------------------------------------------ stop helpers

    def _guard_stop(self, state: RuntimeState, store: AgentTaskStore | None, force: bool) -> None:
        token = runtime_token(state)
        found = stop_guards.blockers(store, state.name, state.gateway_url, token=token)
        if found and not force:
            raise RuntimeStateError(
                "SKILL_RUNTIME_IN_USE",
                stop_guards.refusal(state.name, found),
                details={"blockers": found},
            )
        if force:
            requests = stop_guards.request_stops(store, state.name, state.gateway_url, token=token)
            append_audit(
                self.runtime_dir,
                {
                    "event": "skill.force_stop",
                    "skill": state.name,
                    "version": state.version,
                    "runtime_instance_id": state.runtime_instance_id,
                    "blockers": found,
                    "stop_requests": requests,
                },
            )

    def _stop_dataflow(self, state: RuntimeState) -> None:
        """Stop whatever Dora runs for ``state`` and verify no node process survives."""
        dora = self._control_of(state)
        uuids = [state.dataflow_uuid] if state.dataflow_uuid else []
        if not uuids:
            # `dora start` may have started it without us learning the uuid; a running
            # dataflow of this name on this home's coordinator can only be ours.
            rows = dora.rows() or []
            uuids = [
                str(r["uuid"])
                for r in rows
                if r.get("name") == state.dataflow_name and r.get("status") == "Running"
            ]
        for dataflow_uuid in uuids:
            dora.stop(dataflow_uuid, grace_s=self.stop_grace_s)

    def _forget_token(self, state: RuntimeState) -> RuntimeState:
        """Remove the token file a failed stop kept (its dataflow is gone by now)."""
        if state.gateway_token_file is None:
            return state
        remove_token_file(state.gateway_token_file)
        return write_state(self.runtime_dir, state.model_copy(update={"gateway_token_file": None}))

    def _dataflow_running(self, state: RuntimeState) -> bool:
        if state.dataflow_uuid is None:
            return False
        return self._control_of(state).dataflow_status(state.dataflow_uuid) == "Running"

    def _mark_lost(self, state: RuntimeState) -> RuntimeState:
        error = RecordedError(
            code="SKILL_DATAFLOW_LOST",
            message="the dataflow is no longer running",
            details={"dataflow_uuid": state.dataflow_uuid},
        )
        failed = state.moved("failed", error=error, gateway_token_file=None)
        try:
            with skill_lock(self.runtime_dir, state.name):
                current = read_state(self.runtime_dir, state.name)
                if current is not None and current.runtime_instance_id == state.runtime_instance_id:
                    remove_token_file(current.gateway_token_file)
                    write_state(self.runtime_dir, failed)
                    self._down_if_idle()
        except RuntimeStateError:
            pass  # a lifecycle command is running; it owns the record
        return failed

    # ------------------------------------------------------------------ this home's Dora

    @property
    def _services_path(self) -> Path:
        return self.runtime_dir / "dora.json"

    def _services(self) -> _Services:
        """The persisted private ports, chosen (and persisted) on first use.

        Call with the home lock held, so two first starts agree on one coordinator.
        """
        try:
            return _Services.model_validate_json(self._services_path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValidationError):
            services = _Services(coordinator_port=free_port(), daemon_listen_port=free_port())
            self._save_services(services)
            return services

    def _control(self, port: int) -> DoraControl:
        """This home's own coordinator on ``port``."""
        return DoraControl(
            self.dora, port=port, env=self._project_env(), log_dir=self.runtime_dir / "logs"
        )

    def _attached(self, host: str, port: int) -> DoraControl:
        """A coordinator someone else runs: never brought up or down from here."""
        log_dir = self.runtime_dir / "logs"
        return DoraControl(
            self.dora, port=port, host=host, owned=False, env=self._project_env(), log_dir=log_dir
        )

    def _control_of(self, state: RuntimeState) -> DoraControl:
        """The coordinator ``state`` was started on."""
        if state.coordinator_attached:
            return self._attached(state.coordinator_host, state.coordinator_port)
        return self._control(state.coordinator_port)

    def _ensure_services(
        self, machines: list[str] | None = None
    ) -> tuple[DoraControl, dict[str, MachineDaemon]]:
        """This home's coordinator and daemon, started when they do not answer, and one
        local daemon per machine id in ``machines`` (started when not registered)."""
        with home_lock(self.runtime_dir):
            services = self._services()
            dora = self._control(services.coordinator_port)
            if not dora.services_up():
                dora, services = self._bring_up(dora, services)
            if not machines:
                return dora, {}
            return dora, self._ensure_machines(dora, services, machines)

    def _bring_up(self, dora: DoraControl, services: _Services) -> tuple[DoraControl, _Services]:
        """Start this home's coordinator and daemon (call with the home lock held)."""
        if dora.rows() is not None:
            dora.down()  # a coordinator whose daemon is gone cannot start anything
        _kill_daemons(self._daemon_log_dir, services.machines)  # they served the old one
        services = services.model_copy(update={"machines": {}})
        if port_in_use(dora.port) or port_in_use(services.daemon_listen_port):
            # Someone else took a port since it was chosen: choose again, for good.
            services = _Services(coordinator_port=free_port(), daemon_listen_port=free_port())
            dora = self._control(services.coordinator_port)
        self._save_services(services)
        self.progress("starting this home's Dora coordinator", 0.0)
        daemon_env = {**self._project_env(), "DORA_COORDINATOR_PORT": str(dora.port)}
        dora.up(
            listen_port=services.daemon_listen_port,
            daemon_env=daemon_env,
            timeout_s=SERVICES_TIMEOUT_S,
        )
        return dora, services

    def _ensure_machines(
        self, dora: DoraControl, services: _Services, machines: list[str]
    ) -> dict[str, MachineDaemon]:
        """A registered local daemon for every machine id in ``machines``; each new one
        dials those of the home already listening. Raises ``SKILL_DORA_UNAVAILABLE`` (with
        the log tails) when one does not register within :data:`SERVICES_TIMEOUT_S`."""
        registered = _by_machine(dora.daemons() or [])
        daemons = dict(services.machines)
        for machine in (m for m in machines if m not in registered):
            stale = daemons.pop(machine, None)  # alive, perhaps, but not registered
            if stale is not None:
                _kill_daemons(self._daemon_log_dir, {machine: stale})
            daemons[machine] = self._start_machine(dora, machine, daemons.values())
            # Recorded at once, so whatever happens next never loses track of the process.
            self._save_services(services.model_copy(update={"machines": daemons}))
        registered = self._wait_machines(dora, machines)
        pids = {machine: daemon.pid for machine, daemon in daemons.items()}
        return {m: MachineDaemon(daemon_id=registered[m], pid=pids.get(m)) for m in machines}

    def _start_machine(
        self, dora: DoraControl, machine: str, others: Iterable[_LocalDaemon]
    ) -> _LocalDaemon:
        self.progress(f"starting the Dora daemon of machine {machine}", 0.0)
        listen, zenoh = free_port(), free_port()
        process = dora.start_machine(
            machine,
            listen_port=listen,
            zenoh_port=zenoh,
            peers=[daemon.zenoh_port for daemon in others],
            daemon_env=self._project_env(),
        )
        return _LocalDaemon(
            pid=process.pid, started=process.started, local_listen_port=listen, zenoh_port=zenoh
        )

    def _wait_machines(self, dora: DoraControl, machines: list[str]) -> dict[str, str]:
        deadline = time.monotonic() + SERVICES_TIMEOUT_S
        while not set(machines) <= (registered := _by_machine(dora.daemons() or [])).keys():
            if time.monotonic() > deadline:
                missing = sorted(set(machines) - registered.keys())
                logs = self._daemon_log_dir
                raise RuntimeStateError(
                    "SKILL_DORA_UNAVAILABLE",
                    f"the Dora daemons of machines {', '.join(missing)} did not register with "
                    f"coordinator {dora.address}; see {logs}/dora-daemon-<machine>.log",
                    retryable=True,
                    details={
                        "logs": {m: _log_tail(logs / f"dora-daemon-{m}.log") for m in missing}
                    },
                )
            time.sleep(POLL_S)
        return registered

    @property
    def _daemon_log_dir(self) -> Path:
        return self.runtime_dir / "logs"

    def _save_services(self, services: _Services) -> None:
        atomic_write_text(self._services_path, services.model_dump_json(indent=2) + "\n")

    def _down_if_idle(self) -> None:
        """Stop the machine daemons no live skill of this home names, and ``dora down``
        this home's coordinator once none of its skills is live (a skill attached to
        another coordinator does not count: that one is never touched)."""
        with home_lock(self.runtime_dir):
            if not self._services_path.exists():
                return  # only attached skills ran here: this home has no services of its own
            live = [
                s for s in all_states(self.runtime_dir) if s.live and not s.coordinator_attached
            ]
            services = self._services()
            if not live:
                dora = self._control(services.coordinator_port)
                # Dora refuses `down` while dataflows run; checking first keeps the log quiet.
                if dora.services_up() and not dora.running_uuids():
                    dora.down()
            needed = {machine for state in live for machine in state.machines}
            unneeded = {m: d for m, d in services.machines.items() if m not in needed}
            if unneeded:
                _kill_daemons(self._daemon_log_dir, unneeded)
                kept = {m: d for m, d in services.machines.items() if m in needed}
                self._save_services(services.model_copy(update={"machines": kept}))

    # ------------------------------------------------------------------ environments

    def _project_env(self) -> dict[str, str]:
        """The allowlisted part of the caller's environment plus the project settings
        every Dora process needs (:func:`~doraforge.skill_runtime.child_env.skill_environment`):
        the daemon passes it to every node of every skill of the home."""
        return skill_environment(self.environ, self.runtime_bin)

    def _placement_env(self, state: RuntimeState) -> dict[str, str]:
        """``PATH`` and the Zenoh overlay for the nodes: this home's, with the cluster
        overlay when the nodes are split over machines; none on an attached coordinator,
        whose daemons (perhaps on other hosts) give their nodes their own."""
        if state.coordinator_attached:
            return {}
        project = self._project_env()
        env = {key: project[key] for key in ("PATH", "DORA_ZENOH_CONFIG_OVERLAY")}
        if state.machines:
            env["DORA_ZENOH_CONFIG_OVERLAY"] = str(CLUSTER_ZENOH_OVERLAY)
        return env

    def _dataflow_env(
        self, state: RuntimeState, bundle: Path, profile: Profile, values: Mapping[str, str]
    ) -> dict[str, str]:
        """What ``dora start --env`` passes: nodes get the DAEMON's environment otherwise."""
        env = self._placement_env(state)
        env["PYTHONUNBUFFERED"] = "1"
        # Each home keeps its own Gateway journal (the default is one file per gateway_id,
        # shared by every home on the machine).
        journal = self.runtime_dir / "journal" / f"{state.name}.journal"
        env["DORAFORGE_GATEWAY_JOURNAL"] = str(journal)
        env.update(_skill_variables(state, bundle))
        env.update(declared_environment(profile.required_environment, self.environ))
        for key, value in profile.environment.items():
            if secret_name(key):
                continue  # a profile never names a token: only the runtime's reaches the Gateway
            env[key] = render_placeholders(value, values, source=f"profile {state.profile}")
        # After the profile's: the Gateway listens where the state says every command dials.
        port = urlsplit(state.gateway_url).port
        if port is not None:
            env["DORAFORGE_GATEWAY_PORT"] = str(port)
        return env

    # ------------------------------------------------------------------ bookkeeping

    def _store(self) -> _StoreScope:
        return _StoreScope(self.store, self.home.store_path)

    def _log_path(self, name: str) -> Path:
        path = self.runtime_dir / "logs" / f"{name}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _log(self, name: str, message: str) -> None:
        with open(private_file(self._log_path(name)), "a", encoding="utf-8") as log:
            log.write(f"{utc_now().isoformat()} {message}\n")


class _StoreScope:
    """The injected store, or the home's store opened for one command and closed after."""

    def __init__(self, store: AgentTaskStore | None, path: Path) -> None:
        self._given = store
        self._path = path
        self._opened: AgentTaskStore | None = None

    def __enter__(self) -> AgentTaskStore | None:
        if self._given is not None:
            return self._given
        self._opened = stop_guards.open_store(self._path)
        return self._opened

    def __exit__(self, *exc: object) -> None:
        if self._opened is not None:
            self._opened.close()


def gateway_url_on(url: str, port: int | None) -> str:
    """``url`` (a manifest's ``gateway_url``) without a trailing ``/``, on ``port`` when
    one is given."""
    base = url.rstrip("/")
    if port is None:
        return base
    parts = urlsplit(base)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    return urlunsplit(parts._replace(netloc=f"{host}:{port}"))


def _refuse_taken(url: str) -> None:
    """Refuse a start whose Gateway port is already held, before anything starts."""
    if gateway_probe.gateway_answers(url):
        raise RuntimeStateError(
            "SKILL_GATEWAY_IN_USE",
            f"something already answers at {url}; pass --port N or stop what holds it",
            details={"gateway_url": url},
        )
    parts = urlsplit(url)
    if parts.port is not None and parts.hostname:
        refuse_busy_port(parts.port, parts.hostname)


def _check_name(name: str) -> None:
    # The name becomes file names under runtime/: only manifest-valid names get there.
    if not re.fullmatch(NAME_PATTERN, name):
        raise RuntimeStateError("SKILL_NAME_INVALID", f"{name!r} is not a valid skill name")


def _choose_profile(manifest: SkillManifest, profile: str | None) -> str:
    if profile is not None:
        if profile not in manifest.profiles:
            raise RuntimeStateError(
                "SKILL_PROFILE_UNKNOWN",
                f"{manifest.name} has no profile {profile!r} "
                f"(its profiles: {', '.join(sorted(manifest.profiles))})",
                details={"profiles": sorted(manifest.profiles)},
            )
        return profile
    if len(manifest.profiles) == 1:
        return next(iter(manifest.profiles))
    if "default" in manifest.profiles:
        return "default"
    raise RuntimeStateError(
        "SKILL_PROFILE_REQUIRED",
        f"{manifest.name} has several profiles: choose one with --profile "
        f"({', '.join(sorted(manifest.profiles))})",
        details={"profiles": sorted(manifest.profiles)},
    )


def _skill_variables(state: RuntimeState, bundle: Path) -> dict[str, str]:
    return {
        "PAOS_SKILL_NAME": state.name,
        "PAOS_SKILL_VERSION": state.version,
        "PAOS_SKILL_PROFILE": state.profile,
        "PAOS_SKILL_ROOT": str(bundle),
        "PAOS_RUNTIME_INSTANCE_ID": state.runtime_instance_id,
    }


def _recorded(error: PaosError) -> RecordedError:
    return RecordedError(code=error.code, message=error.message, details=error.details)


def _which(name: str, search_path: str) -> str | None:
    return shutil.which(name, path=search_path)


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _check_node(state: RuntimeState, node: str | None) -> None:
    """Refuse a ``--node`` that is not a node of ``state``'s dataflow (``SKILL_NODE_NOT_FOUND``,
    offering the closest ids and listing them all); any node passes when none can be read."""
    ids = node_ids(Path(state.launch_dataflow or "")) if node else []
    if node and ids and node not in ids:
        raise RuntimeStateError(
            "SKILL_NODE_NOT_FOUND",
            f"skill {state.name!r} has no node {node!r}{did_you_mean(node, ids)}; "
            f"its nodes: {', '.join(ids)}",
            details={"node": node, "nodes": ids},
        )


def _local_logs(state: RuntimeState) -> bool:
    """Whether the node logs are read from the launch folder's ``out/`` (``dora logs
    --local``): for nodes this home's machine daemons run there (``deploy.working_dir``)."""
    return bool(state.machines) and not state.coordinator_attached


def _by_machine(rows: list[tuple[str | None, str]]) -> dict[str, str]:
    """Machine id to daemon id, of the daemons that have one."""
    return {machine: daemon for machine, daemon in rows if machine}


def _kill_daemons(log_dir: Path, daemons: Mapping[str, _LocalDaemon]) -> None:
    """SIGKILL each recorded machine daemon's group while its pid still names it (its
    nodes are gone by then: every dataflow on it was stopped, or its coordinator is)."""
    for machine, daemon in daemons.items():
        log = log_dir / f"dora-daemon-{machine}.log"
        DoraProcess.adopt(f"daemon-{machine}", daemon.pid, daemon.started, log).kill()


def _log_tail(path: Path, limit: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""
