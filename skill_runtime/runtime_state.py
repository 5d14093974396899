"""The persisted state of a skill runtime, its lifecycle lock and its audit trail.

``runtime/<name>.json`` is strict (unknown keys refused) and versioned (``state_version``);
it is written atomically (temporary file, fsync, ``os.replace``), so a reader sees the old
or the new state, never a torn one. ``runtime/<name>.lock`` serialises lifecycle commands
for one skill across processes; ``runtime/audit.log`` collects forced actions as JSON lines.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.wire.files import atomic_write_text, private_file

STATE_VERSION: Final = 1
#: Lifecycle states that mean "this runtime may own live Dora processes".
LIVE_STATES = frozenset({"starting", "running", "stopping"})

type LifecycleState = Literal["starting", "running", "stopping", "stopped", "failed"]


def utc_now() -> datetime:
    """Aware UTC now (the timestamps of the state file)."""
    return datetime.now(UTC)


class RecordedError(BaseModel):
    """Why a runtime failed: the code, message and details of the error raised."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class MachineDaemon(BaseModel):
    """The Dora daemon one machine id of a skill's dataflow runs on.

    ``daemon_id`` is Dora's (``dora cluster status``: ``<machine>-<uuid>``); ``pid`` is the
    local process this home started for it, ``None`` on a coordinator the skill attached to
    (its daemons are someone else's, possibly on other hosts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    daemon_id: str | None = None
    pid: int | None = Field(default=None, gt=0)


class RuntimeState(BaseModel):
    """One skill's runtime as last recorded (``runtime/<name>.json``, version 1).

    ``runtime_instance_id`` is new for every start; ``dataflow_uuid`` is Dora's id of the
    dataflow started for it (``None`` before ``dora start`` answered). ``gateway_identity``
    is the Gateway's identity document (``GET /tools``' ``gateway``) seen when the runtime
    became ``running``.
    ``gateway_token_file`` is the 0600 file holding this start's Gateway bearer token
    (``None`` once removed, and in records written before Gateways had tokens: the field
    is optional, so those still read as version 1).

    The coordinator is ``coordinator_host:coordinator_port``: this home's own on loopback,
    or, with ``coordinator_attached``, an existing one the skill was started on (its stop
    stops only the dataflow there). ``machines`` maps each machine id the dataflow's nodes
    name in ``deploy.machine`` to its daemon; empty for a one-machine dataflow. All three
    are optional, so records written before them still read as version 1.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    state_version: Literal[1] = STATE_VERSION
    name: str
    version: str
    profile: str
    state: LifecycleState
    runtime_instance_id: str
    dataflow_name: str
    dataflow_uuid: str | None = None
    coordinator_port: int = Field(gt=0, lt=65536)
    coordinator_host: str = Field(default="127.0.0.1", min_length=1, max_length=255)
    coordinator_attached: bool = False
    machines: dict[str, MachineDaemon] = Field(default_factory=dict)
    gateway_url: str
    gateway_identity: dict[str, Any] | None = None
    gateway_token_file: str | None = None
    environment_digest: str | None = None
    launch_dataflow: str | None = None
    started_at: datetime
    updated_at: datetime
    error: RecordedError | None = None

    def moved(self, state: LifecycleState, **changes: Any) -> RuntimeState:
        """A copy in ``state`` with ``changes`` applied and ``updated_at`` set to now."""
        return self.model_copy(update={"state": state, "updated_at": utc_now(), **changes})

    @property
    def live(self) -> bool:
        """Whether this record says Dora processes may exist for it."""
        return self.state in LIVE_STATES


def state_path(runtime_dir: Path, name: str) -> Path:
    """``runtime/<name>.json``."""
    return runtime_dir / f"{name}.json"


def read_state(runtime_dir: Path, name: str) -> RuntimeState | None:
    """The recorded state of ``name``, or ``None`` when it never ran.

    Raises :class:`RuntimeStateError` ``SKILL_RUNTIME_STATE_INVALID`` when the file is not
    a valid version-1 state (it is never guessed at or silently replaced).
    """
    path = state_path(runtime_dir, name)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return RuntimeState.model_validate_json(text)
    except ValidationError as exc:
        raise RuntimeStateError(
            "SKILL_RUNTIME_STATE_INVALID",
            f"{path} is not a valid runtime state: {exc.errors(include_url=False)[0]['msg']}",
            details={"path": str(path)},
        ) from exc


def write_state(runtime_dir: Path, state: RuntimeState) -> RuntimeState:
    """Persist ``state`` atomically and return it."""
    atomic_write_text(state_path(runtime_dir, state.name), state.model_dump_json(indent=2) + "\n")
    return state


def all_states(runtime_dir: Path) -> list[RuntimeState]:
    """Every readable state file in ``runtime_dir`` (invalid ones are skipped)."""
    found = []
    for path in sorted(runtime_dir.glob("*.json")):
        with contextlib.suppress(RuntimeStateError, OSError):
            state = read_state(runtime_dir, path.stem)
            if state is not None and state.name == path.stem:
                found.append(state)
    return found


@contextlib.contextmanager
def skill_lock(runtime_dir: Path, name: str) -> Iterator[None]:
    """Hold ``runtime/<name>.lock`` for one lifecycle command, without waiting.

    Raises :class:`RuntimeStateError` ``SKILL_RUNTIME_BUSY`` (retryable) when another
    process, or another manager in this one, holds it. ``flock`` locks belong to the open
    file description, so two opens conflict even inside one process, and the kernel drops
    the lock when its holder dies: a crashed command never wedges the skill.
    """
    runtime_dir.mkdir(parents=True, exist_ok=True)
    with open(runtime_dir / f"{name}.lock", "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RuntimeStateError(
                "SKILL_RUNTIME_BUSY",
                f"another lifecycle command for {name!r} is in progress",
                retryable=True,
                details={"skill": name},
            ) from exc
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def home_lock(runtime_dir: Path) -> Iterator[None]:
    """Hold the home-wide Dora lock (blocking): bringing services up or down is serialised."""
    runtime_dir.mkdir(parents=True, exist_ok=True)
    with open(runtime_dir / "dora.lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def append_audit(runtime_dir: Path, event: Mapping[str, Any]) -> None:
    """Append one event to ``runtime/audit.log`` (a JSON line, fsynced; the file 0600)."""
    runtime_dir.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"at": utc_now().isoformat(), **event}, sort_keys=True, default=str)
    with open(private_file(runtime_dir / "audit.log"), "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())
