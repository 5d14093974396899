"""RuntimeManager on real Dora: a mock skill's lifecycle, its token, startup failures, a
vanished dataflow and the stop guards.

Each test runs the project's Gateway and mock provider under its home's own Dora
coordinator; the ``home`` fixture tears everything down and fails the test if any process
outlives it. A started skill's Gateway takes only its runtime's token, so every request here
presents it.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.paos.gateway_auth import bearer
from doraforge.paos.home import PaosHome, open_service
from doraforge.paos.store import AgentTaskStore, NewRecord
from doraforge.skill_runtime import runtime as runtime_module
from doraforge.skill_runtime.activation import activate_skill
from doraforge.skill_runtime.dora import DoraControl
from doraforge.skill_runtime.dora_run import dora_binary, free_port
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.gateway_tokens import GatewayTokens, runtime_token, token_path
from doraforge.skill_runtime.launch import environment_digest
from doraforge.skill_runtime.runtime import RuntimeManager
from doraforge.skill_runtime.runtime_state import read_state
from tests.skill_runtime.runtime_support import (
    OPERATOR_TOKEN,
    RECORDING_HOOK,
    SKILL,
    TOOLS,
    assert_nothing_runs,
    make_bundle,
    manager,
    torn_down_home,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def home(tmp_path: Path) -> Iterator[PaosHome]:
    """A fresh PAOS home whose Dora services and dataflows are always torn down."""
    with torn_down_home(tmp_path) as home:
        yield home


# ---------------------------------------------------------------------- lifecycle


def test_start_runs_the_skill_until_its_tools_are_ready_and_stop_leaves_nothing(
    home: PaosHome,
) -> None:
    port = free_port()
    bundle = make_bundle(home, gateway_port=port, hook=RECORDING_HOOK)
    seen: list[tuple[str, float]] = []
    runtime = manager(home, progress=lambda message, elapsed: seen.append((message, elapsed)))

    state = runtime.start(SKILL)

    assert state.state == "running"
    assert (state.name, state.version, state.profile) == (SKILL, "1.2.3", "mock")
    auth = bearer(runtime_token(state))
    listing = httpx.get(f"http://127.0.0.1:{port}/tools", headers=auth).json()["data"]
    assert state.gateway_identity == listing["gateway"]
    for tool_id in TOOLS:
        context = httpx.get(f"http://127.0.0.1:{port}/tools/{tool_id}/context", headers=auth)
        assert context.json()["data"]["ready"] is True
    assert state.coordinator_port != 6013
    assert state.environment_digest == environment_digest(
        bundle.resolve(), "profiles/mock/dataflow.yml", "mock"
    )
    assert read_state(home.runtime_dir, SKILL) == state
    hook_seen = (bundle.parent / "hook-seen").read_text().split()
    assert hook_seen == [SKILL, "1.2.3", SKILL, "1.2.3", "mock", str(bundle.resolve())]
    assert seen
    assert all(elapsed >= 0 for _, elapsed in seen)
    # Each home keeps its own Gateway journal.
    assert (home.runtime_dir / "journal" / f"{SKILL}.journal").exists()

    assert runtime.status(SKILL) == state
    assert runtime.healthy_runtime(SKILL) == state
    assert [s.name for s in runtime.running()] == [SKILL]
    logs = runtime.logs(SKILL)
    assert "hook says hello" in logs
    assert f"gateway test-{port} starting HTTP" in logs
    assert f"dora started dataflow {state.dataflow_uuid}" in logs
    with pytest.raises(RuntimeStateError) as again:
        runtime.start(SKILL)
    assert again.value.code == "SKILL_ALREADY_RUNNING"
    # It says where the running one listens and how to stop it.
    assert f"with its Gateway at {state.gateway_url};" in again.value.message
    assert f"`doraforge skill stop {SKILL}`" in again.value.message

    stopped = runtime.stop(SKILL)

    assert stopped.state == "stopped"
    assert stopped.runtime_instance_id == state.runtime_instance_id
    # Node logs outlive the dataflow: Dora reads them from the launch directory's out/.
    assert f"gateway test-{port} starting HTTP" in runtime.logs(SKILL)
    assert read_state(home.runtime_dir, SKILL) == stopped
    assert_nothing_runs(home, state.dataflow_uuid)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/tools")
    assert runtime.running() == []
    with pytest.raises(RuntimeStateError) as unhealthy:
        runtime.healthy_runtime(SKILL)
    assert unhealthy.value.code == "SKILL_NOT_RUNNING"


async def _preview(home: PaosHome, runtime: RuntimeManager) -> dict[str, Any]:
    """What binding a task to the running skill reads, through PAOS's own client."""
    tokens = GatewayTokens(home.runtime_dir, operator=OPERATOR_TOKEN)
    service = open_service(home, token_for=tokens)
    try:
        return await service.activate(activate_skill(home, SKILL, runtime).candidate)
    finally:
        await service.aclose()
        service.store.close()


def test_a_started_skill_gateway_answers_only_its_runtime_token_which_stop_removes(
    home: PaosHome,
) -> None:
    port = free_port()
    # Neither the profile nor the operator's own token may decide the skill's token.
    environment = {"DORAFORGE_GATEWAY_TOKEN_FILE": "/nonexistent/token"}
    make_bundle(home, gateway_port=port, profile={"environment": environment})
    runtime = manager(home, environ={**os.environ, "DORAFORGE_GATEWAY_TOKEN": OPERATOR_TOKEN})

    state = runtime.start(SKILL)

    assert state.gateway_token_file == str(token_path(home.runtime_dir, SKILL))
    token_file = Path(state.gateway_token_file)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = runtime_token(state)
    assert token is not None
    tools = f"{state.gateway_url}/tools"
    for refused in ({}, bearer(OPERATOR_TOKEN), bearer(token + "x")):
        assert httpx.get(tools, headers=refused).status_code == 401
    answered = httpx.get(tools, headers=bearer(token))
    assert answered.status_code == 200
    assert answered.json()["data"]["gateway"] == state.gateway_identity
    assert runtime.healthy_runtime(SKILL) == state  # the runtime's own probe presents it
    # A task bound to the skill reaches its Gateway with the runtime's token, not the
    # operator's.
    preview = asyncio.run(_preview(home, runtime))
    assert preview["gateway_identity"] == state.gateway_identity
    assert set(preview["tools"]) == set(TOOLS)

    stopped = runtime.stop(SKILL)

    assert stopped.gateway_token_file is None
    assert not token_file.exists()
    assert_nothing_runs(home, state.dataflow_uuid)


def test_a_dataflow_that_dies_during_startup_is_recorded_failed_with_nothing_left(
    home: PaosHome,
) -> None:
    broken = "nodes:\n  - id: gateway\n    path: python\n    args: -m no_such_module_here\n"
    make_bundle(home, gateway_port=free_port(), dataflow=broken)

    with pytest.raises(RuntimeStateError) as raised:
        manager(home).start(SKILL)

    assert raised.value.code == "SKILL_DATAFLOW_FAILED"
    state = read_state(home.runtime_dir, SKILL)
    assert state is not None
    assert state.state == "failed"
    assert state.error is not None
    assert state.error.code == "SKILL_DATAFLOW_FAILED"
    assert state.gateway_token_file is None
    assert not token_path(home.runtime_dir, SKILL).exists()
    assert_nothing_runs(home, state.dataflow_uuid)


class _LeapingClock:
    """The runtime's ``time`` module with a monotonic clock that leaps ahead on demand:
    the readiness timeout then passes at a moment the test chooses, not one a loaded
    machine's scheduling chooses."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_a_required_tool_that_never_becomes_ready_times_out_and_stops_the_dataflow(
    home: PaosHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_bundle(
        home,
        gateway_port=free_port(),
        required_tools=["mock.echo", "mock.not_in_the_catalog"],
        profile={"startup_timeout_s": 60},
    )
    clock = _LeapingClock()
    monkeypatch.setattr(runtime_module, "time", clock)

    def leap_once_echo_is_ready(message: str, elapsed: float) -> None:
        # Only the unknown tool is waiting: mock.echo is ready, so the readiness probe's
        # token was accepted. Now let the startup timeout pass.
        if message == "waiting for tools (1 not ready)":
            clock.offset = 10_000.0

    with pytest.raises(RuntimeStateError) as raised:
        manager(home, progress=leap_once_echo_is_ready).start(SKILL)

    assert raised.value.code == "SKILL_START_TIMEOUT"
    # Only the unknown tool is waiting: the readiness probe's token was accepted.
    assert raised.value.details["tools_waiting"] == ["mock.not_in_the_catalog"]
    state = read_state(home.runtime_dir, SKILL)
    assert state is not None
    assert state.state == "failed"
    assert state.gateway_token_file is None
    assert not token_path(home.runtime_dir, SKILL).exists()
    assert state.dataflow_uuid
    assert_nothing_runs(home, state.dataflow_uuid)


def test_an_interrupt_while_waiting_for_readiness_still_stops_the_dataflow(home: PaosHome) -> None:
    make_bundle(home, gateway_port=free_port())

    def interrupt(message: str, elapsed: float) -> None:
        if message.startswith("waiting"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        manager(home, progress=interrupt).start(SKILL)

    state = read_state(home.runtime_dir, SKILL)
    assert state is not None
    assert state.state == "failed"
    assert state.error is not None
    assert state.error.code == "SKILL_START_INTERRUPTED"
    assert state.dataflow_uuid is not None
    assert_nothing_runs(home, state.dataflow_uuid)


def test_a_running_record_whose_dataflow_vanished_reads_as_failed(home: PaosHome) -> None:
    make_bundle(home, gateway_port=free_port())
    runtime = manager(home)
    state = runtime.start(SKILL)
    assert state.dataflow_uuid is not None
    dora = DoraControl(
        dora_binary(), port=state.coordinator_port, env=os.environ, log_dir=home.root / "x"
    )
    dora.stop(state.dataflow_uuid, grace_s=2)

    observed = runtime.status(SKILL)

    assert observed is not None
    assert observed.state == "failed"
    assert observed.error is not None
    assert observed.error.code == "SKILL_DATAFLOW_LOST"
    assert read_state(home.runtime_dir, SKILL) == observed
    assert observed.gateway_token_file is None
    assert not token_path(home.runtime_dir, SKILL).exists()
    with pytest.raises(RuntimeStateError) as raised:
        runtime.healthy_runtime(SKILL)
    assert raised.value.code == "SKILL_NOT_RUNNING"
    # Nothing of the home runs any more, so its coordinator is gone too.
    assert_nothing_runs(home, state.dataflow_uuid)


# ---------------------------------------------------------------------- stop guards


def _bind_task(store: AgentTaskStore, skill: str) -> str:
    binding_id = f"binding-{uuid.uuid4().hex}"
    store.put_binding(binding_id, "0" * 64, {"skill": skill, "version": "1.2.3"})
    task_id = f"task-{uuid.uuid4().hex}"
    store.create_task(
        task_id=task_id,
        revision_id=f"rev-{uuid.uuid4().hex}",
        binding_id=binding_id,
        goal="hold the runtime",
        contract={"mode": "off"},
    )
    return task_id


def _admit_hanging_move(
    store: AgentTaskStore, task_id: str, gateway_url: str, token: str | None
) -> str:
    """A real Action that never ends on its own, recorded as PAOS would record it."""
    caller_id = f"paos:{task_id}:move"
    record = store.record_intent(
        NewRecord(
            record_id="rec-move",
            task_id=task_id,
            revision_id=store.current_revision(task_id).revision_id,
            tool_id="mock.move",
            semantics="action",
            caller_id=caller_id,
            arguments_sha256="0" * 64,
            spec_sha256="0" * 64,
        )
    )
    admitted = httpx.post(
        f"{gateway_url}/tools/mock.move:invoke",
        json={"arguments": {"duration_s": 600, "behaviour": "hang"}, "caller_id": caller_id},
        headers=bearer(token),
    )
    assert admitted.status_code == 202, admitted.text
    data = admitted.json()["data"]
    store.record_admitted(record.record_id, data["invocation_id"], data["attempt_id"], "accepted")
    return str(data["invocation_id"])


def test_stop_is_refused_while_a_task_is_bound_and_force_stops_with_an_audit_event(
    home: PaosHome,
) -> None:
    make_bundle(home, gateway_port=free_port())
    store = AgentTaskStore(home.store_path)
    runtime = manager(home, store=store)
    state = runtime.start(SKILL)
    task_id = _bind_task(store, SKILL)
    invocation_id = _admit_hanging_move(store, task_id, state.gateway_url, runtime_token(state))

    with pytest.raises(RuntimeStateError) as refused:
        runtime.stop(SKILL)

    assert refused.value.code == "SKILL_RUNTIME_IN_USE"
    # The refusal names the task and the commands that clear it.
    assert f"bound to task {task_id} " in refused.value.message
    assert f"`doraforge task cancel {task_id}`" in refused.value.message
    assert f"`doraforge skill stop {SKILL} --force`" in refused.value.message
    kinds = {blocker["kind"] for blocker in refused.value.details["blockers"]}
    # gateway_invocations: the Gateway's live count was read with the runtime's token.
    assert {"task_binding", "invocation", "gateway_invocations"} <= kinds
    assert runtime.healthy_runtime(SKILL).state == "running"

    stopped = runtime.stop(SKILL, force=True)

    assert stopped.state == "stopped"
    assert_nothing_runs(home, state.dataflow_uuid)
    audit = (home.runtime_dir / "audit.log").read_text().splitlines()
    events = [json.loads(line) for line in audit]
    assert [e["event"] for e in events] == ["skill.force_stop"]
    assert events[0]["runtime_instance_id"] == state.runtime_instance_id
    [request] = events[0]["stop_requests"]
    assert request["invocation_id"] == invocation_id
    assert request["command"] == "cancel"
    assert request["http_status"] in (200, 202)  # not 401: the cancel carried the token
    # Force does not change execution truth: the record is still what PAOS last knew.
    assert store.record("rec-move").state == "accepted"
    store.close()
