"""RuntimeManager: real Dora runtimes of a mock skill, refusals, guards and the pure parts.

The e2e tests run the project's Gateway and mock provider under this home's own Dora
coordinator (a free port, never 6013). Every test home is torn down by the ``home``
fixture: dataflows stopped, the coordinator brought down, and no node, coordinator or
daemon process may outlive the test. A started skill's Gateway takes only its runtime's
token, so every request here presents it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml

from doraforge.dataflows import DATAFLOWS
from doraforge.paos.gateway_auth import bearer
from doraforge.paos.home import PaosHome, open_service
from doraforge.paos.store import AgentTaskStore, NewRecord
from doraforge.skill_runtime.activation import activate_skill
from doraforge.skill_runtime.dora import DoraControl, node_pids
from doraforge.skill_runtime.dora_run import dora_binary, free_port, wait_until
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.gateway_tokens import GatewayTokens, runtime_token, token_path
from doraforge.skill_runtime.launch import (
    environment_digest,
    render_placeholders,
    write_launch_copy,
)
from doraforge.skill_runtime.runtime import RuntimeManager
from doraforge.skill_runtime.runtime_state import all_states, read_state, skill_lock

SKILL = "mock-skill"
TOOLS = ["mock.echo", "mock.move", "mock.stream"]
OPERATOR_TOKEN = "operator-token-0123456789"

# ---------------------------------------------------------------------- builders


def make_bundle(
    home: PaosHome,
    *,
    gateway_port: int,
    name: str = SKILL,
    hook: str | None = None,
    required_tools: list[str] | None = None,
    profile: dict[str, Any] | None = None,
    dataflow: str | None = None,
) -> Path:
    """Install a mock skill as ``skills/<name>/current``: the project's Gateway and mock
    provider, with the Gateway config copied into the profile and a free port baked in."""
    bundle = home.skills_dir / name / "current"
    profile_dir = bundle / "profiles" / "mock"
    profile_dir.mkdir(parents=True)
    gateway = yaml.safe_load((DATAFLOWS / "mock.gateway.yml").read_text())
    gateway.update(port=gateway_port, gateway_id=f"test-{gateway_port}")
    (profile_dir / "gateway.yml").write_text(yaml.safe_dump(gateway, sort_keys=False))
    (profile_dir / "dataflow.yml").write_text(dataflow or MOCK_DATAFLOW)
    manifest = {
        "manifest_version": 2,
        "name": name,
        "version": "1.2.3",
        "description": "The mock provider behind the project's Gateway.",
        "gateway_url": f"http://127.0.0.1:{gateway_port}",
        "required_tools": required_tools or TOOLS,
        "profiles": {
            "mock": {
                "dataflow": "profiles/mock/dataflow.yml",
                "startup_timeout_s": 40,
                "required_binaries": ["python"],
                "environment": {"DORAFORGE_LOG_LEVEL": "INFO"},
                **(profile or {}),
            }
        },
    }
    (bundle / "skill.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    (bundle / "SKILL.md").write_text("# mock skill\n")
    if hook is not None:
        (bundle / "start.sh").write_text(hook)
    return bundle


# The Gateway finds its config by a relative path: the launch copy must keep it working.
MOCK_DATAFLOW = """\
nodes:
  - id: gateway
    path: python
    args: -m doraforge.gateway --config gateway.yml
    inputs:
      mock_in: {source: mock/tool_response, queue_size: 4096}
    outputs: [mock_out]
  - id: mock
    path: python
    args: -m doraforge.nodes.mock
    inputs:
      tool_request: {source: gateway/mock_out, queue_size: 4096}
    outputs: [tool_response]
"""

# Writes what the hook saw, so tests can assert on the arguments and the environment.
RECORDING_HOOK = """\
#!/usr/bin/env bash
set -eu
printf '%s\\n' "$1 $2 $PAOS_SKILL_NAME $PAOS_SKILL_VERSION $PAOS_SKILL_PROFILE $PAOS_SKILL_ROOT" \
  > "$PAOS_SKILL_ROOT/../hook-seen"
echo "hook says hello"
exit ${HOOK_EXIT:-0}
"""


# ---------------------------------------------------------------------- fixtures


def _dora_processes(port: int) -> list[psutil.Process]:
    """Coordinator and daemon processes serving ``port``."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if "dora" in line and (f"--port {port}" in line or f"--coordinator-port {port}" in line):
            found.append(process)
    return found


@pytest.fixture
def home(tmp_path: Path) -> Iterator[PaosHome]:
    """A fresh PAOS home whose Dora services and dataflows are always torn down."""
    home = PaosHome(tmp_path / "home")
    yield home
    services = home.runtime_dir / "dora.json"
    if not services.exists():
        return
    port = json.loads(services.read_text())["coordinator_port"]
    dora = DoraControl(dora_binary(), port=port, env=os.environ, log_dir=tmp_path / "teardown")
    uuids = [state.dataflow_uuid for state in all_states(home.runtime_dir) if state.dataflow_uuid]
    for dataflow_uuid in uuids:
        dora.stop(dataflow_uuid, grace_s=2)
    if dora.services_up():  # `dora down` against nothing waits 5 s for a connection
        dora.down()
    leftovers = [pid for u in uuids for pid in node_pids(u)]
    if not wait_until(lambda: not _dora_processes(port), 10.0):
        for process in _dora_processes(port):
            process.kill()
        pytest.fail(f"Dora services on port {port} outlived the test")
    assert leftovers == [], "node processes outlived the test"


def manager(home: PaosHome, **kwargs: Any) -> RuntimeManager:
    return RuntimeManager(home, stop_grace_s=3.0, **kwargs)


def assert_nothing_runs(home: PaosHome, dataflow_uuid: str | None) -> None:
    """No node of the dataflow and no Dora service of the home is alive."""
    if dataflow_uuid is not None:
        assert node_pids(dataflow_uuid) == []
    services = home.runtime_dir / "dora.json"
    if services.exists():
        port = json.loads(services.read_text())["coordinator_port"]
        assert wait_until(lambda: not _dora_processes(port), 10.0)


# ---------------------------------------------------------------------- e2e lifecycle


@pytest.mark.e2e
def test_start_runs_the_skill_until_its_tools_are_ready_and_stop_leaves_nothing(
    home: PaosHome,
):
    port = free_port()
    bundle = make_bundle(home, gateway_port=port, hook=RECORDING_HOOK)
    seen: list[tuple[str, float]] = []
    runtime = manager(home, progress=lambda message, elapsed: seen.append((message, elapsed)))

    state = runtime.start(SKILL)

    assert state.state == "running"
    assert (state.name, state.version, state.profile) == (SKILL, "1.2.3", "mock")
    auth = bearer(runtime_token(state))
    listing = httpx.get(f"http://127.0.0.1:{port}/tools", headers=auth).json()["data"]
    assert state.gateway_identity == listing["gateway_identity"]
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


@pytest.mark.e2e
def test_a_started_skill_gateway_answers_only_its_runtime_token_which_stop_removes(
    home: PaosHome,
):
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
    assert answered.json()["data"]["gateway_identity"] == state.gateway_identity
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


@pytest.mark.e2e
def test_a_dataflow_that_dies_during_startup_is_recorded_failed_with_nothing_left(
    home: PaosHome,
):
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


@pytest.mark.e2e
def test_a_required_tool_that_never_becomes_ready_times_out_and_stops_the_dataflow(
    home: PaosHome,
):
    make_bundle(
        home,
        gateway_port=free_port(),
        required_tools=["mock.echo", "mock.not_in_the_catalog"],
        profile={"startup_timeout_s": 4},
    )

    with pytest.raises(RuntimeStateError) as raised:
        manager(home).start(SKILL)

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


@pytest.mark.e2e
def test_an_interrupt_while_waiting_for_readiness_still_stops_the_dataflow(home: PaosHome):
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


@pytest.mark.e2e
def test_a_running_record_whose_dataflow_vanished_reads_as_failed(home: PaosHome):
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


@pytest.mark.e2e
def test_stop_is_refused_while_a_task_is_bound_and_force_stops_with_an_audit_event(
    home: PaosHome,
):
    make_bundle(home, gateway_port=free_port())
    store = AgentTaskStore(home.store_path)
    runtime = manager(home, store=store)
    state = runtime.start(SKILL)
    task_id = _bind_task(store, SKILL)
    invocation_id = _admit_hanging_move(store, task_id, state.gateway_url, runtime_token(state))

    with pytest.raises(RuntimeStateError) as refused:
        runtime.stop(SKILL)

    assert refused.value.code == "SKILL_RUNTIME_IN_USE"
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


# ---------------------------------------------------------------------- start refusals


def test_a_failing_start_hook_aborts_cleanly_before_dora_starts(home: PaosHome):
    bundle = make_bundle(home, gateway_port=free_port(), hook=RECORDING_HOOK)
    runtime = manager(home, environ={**os.environ, "HOOK_EXIT": "3"})

    with pytest.raises(RuntimeStateError) as raised:
        runtime.start(SKILL)

    assert raised.value.code == "SKILL_START_HOOK_FAILED"
    assert raised.value.details["exit_status"] == 3
    assert "hook says hello" in raised.value.details["log_tail"]
    state = read_state(home.runtime_dir, SKILL)
    assert state is not None
    assert state.state == "failed"
    assert state.dataflow_uuid is None
    assert state.error is not None
    assert state.error.code == "SKILL_START_HOOK_FAILED"
    assert (bundle.parent / "hook-seen").read_text().split()[:2] == [SKILL, "1.2.3"]
    assert_nothing_runs(home, None)


def test_the_operators_token_variables_reach_no_process_the_runtime_starts(
    home: PaosHome, tmp_path: Path
):
    token_file = tmp_path / "operator.token"
    token_file.write_text(OPERATOR_TOKEN)
    hook = (
        'printf "%s %s" "${DORAFORGE_GATEWAY_TOKEN:-unset}" '
        '"${DORAFORGE_GATEWAY_TOKEN_FILE:-unset}" > "$PAOS_SKILL_ROOT/../hook-env"\nexit 1\n'
    )
    bundle = make_bundle(home, gateway_port=free_port(), hook=hook)
    environ = {
        **os.environ,
        "DORAFORGE_GATEWAY_TOKEN": OPERATOR_TOKEN,
        "DORAFORGE_GATEWAY_TOKEN_FILE": str(token_file),
    }

    with pytest.raises(RuntimeStateError):
        manager(home, environ=environ).start(SKILL)

    # The hook gets the same environment as this home's Dora daemon, whose environment
    # every node of every skill inherits.
    assert (bundle.parent / "hook-env").read_text() == "unset unset"


@pytest.mark.parametrize(
    ("profile", "environ", "kind", "missing"),
    [
        (
            {"required_binaries": ["python", "no-such-binary-xyz"]},
            {},
            "binaries",
            "no-such-binary-xyz",
        ),
        ({"required_environment": ["ROBOT_SERIAL"]}, {}, "environment", "ROBOT_SERIAL"),
        (
            {"required_environment": ["ROBOT_SERIAL"]},
            {"ROBOT_SERIAL": ""},
            "environment",
            "ROBOT_SERIAL",
        ),
        (
            {"required_assets": ["profiles/mock/weights.bin"]},
            {},
            "assets",
            "profiles/mock/weights.bin",
        ),
        ({"dataflow": "profiles/mock/missing.yml"}, {}, "dataflow", "profiles/mock/missing.yml"),
        ({"environment": {"GREETING": "a$b"}}, {}, "environment_values", "GREETING"),
    ],
)
def test_preflight_names_what_is_missing_and_writes_no_state(
    home: PaosHome, profile: dict[str, Any], environ: dict[str, str], kind: str, missing: str
):
    make_bundle(home, gateway_port=free_port(), profile=profile)
    env = {k: v for k, v in os.environ.items() if k != "ROBOT_SERIAL"} | environ

    with pytest.raises(RuntimeStateError) as raised:
        manager(home, environ=env).start(SKILL)

    assert raised.value.code == "SKILL_PREFLIGHT_FAILED"
    assert missing in raised.value.details["missing"][kind]
    assert missing in raised.value.message
    assert read_state(home.runtime_dir, SKILL) is None


def test_preflight_finds_binaries_shipped_in_the_bundle(home: PaosHome):
    bundle = make_bundle(
        home,
        gateway_port=free_port(),
        profile={"required_binaries": ["bin/adapter"], "dataflow": "profiles/mock/missing.yml"},
    )
    (bundle / "bin").mkdir()
    (bundle / "bin" / "adapter").write_text("#!/bin/sh\n")
    (bundle / "bin" / "adapter").chmod(0o755)

    with pytest.raises(RuntimeStateError) as raised:
        manager(home).start(SKILL)

    # Only the deliberately missing dataflow is reported; the shipped binary was found.
    assert raised.value.details["missing"] == {"dataflow": ["profiles/mock/missing.yml"]}


def test_a_missing_dora_cli_fails_preflight(home: PaosHome):
    make_bundle(home, gateway_port=free_port())

    with pytest.raises(RuntimeStateError) as raised:
        manager(home, dora="no-such-dora-cli").start(SKILL)

    assert raised.value.code == "SKILL_PREFLIGHT_FAILED"
    assert raised.value.details["missing"]["dora"] == ["no-such-dora-cli"]


@contextlib.contextmanager
def _answering(port: int) -> Iterator[None]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_start_is_refused_when_something_already_answers_at_the_gateway_url(home: PaosHome):
    port = free_port()
    make_bundle(home, gateway_port=port)

    with _answering(port), pytest.raises(RuntimeStateError) as raised:
        manager(home).start(SKILL)

    assert raised.value.code == "SKILL_GATEWAY_IN_USE"
    assert read_state(home.runtime_dir, SKILL) is None


def test_unknown_skills_and_profiles_are_refused(home: PaosHome):
    make_bundle(home, gateway_port=free_port())
    runtime = manager(home)

    for name, profile, code in [
        ("not-installed", None, "SKILL_NOT_INSTALLED"),
        (SKILL, "hardware", "SKILL_PROFILE_UNKNOWN"),
        ("../escape", None, "SKILL_NAME_INVALID"),
    ]:
        with pytest.raises(RuntimeStateError) as raised:
            runtime.start(name, profile)
        assert raised.value.code == code
    assert runtime.status("not-installed") is None
    with pytest.raises(RuntimeStateError) as never:
        runtime.stop(SKILL)
    assert never.value.code == "SKILL_NOT_RUNNING"


# ---------------------------------------------------------------------- locking


def test_a_second_manager_is_refused_while_the_first_holds_the_skill(home: PaosHome, tmp_path):
    """Manager A blocks inside start.sh (on a FIFO) while manager B tries to start and stop."""
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    hook = (
        '#!/usr/bin/env bash\ntouch "$HOOK_DIR/started"\n'
        'read -r verdict < "$HOOK_DIR/go"\n[ "$verdict" = ok ]\n'
    )
    make_bundle(home, gateway_port=free_port(), hook=hook, profile={"startup_timeout_s": 20})
    env = {**os.environ, "HOOK_DIR": str(tmp_path)}
    first, second = manager(home, environ=env), manager(home, environ=env)
    outcome: list[BaseException] = []

    def run_first() -> None:
        try:
            first.start(SKILL)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run_first)
    thread.start()
    try:
        assert wait_until(lambda: (tmp_path / "started").exists(), 20.0)
        for command in (lambda: second.start(SKILL), lambda: second.stop(SKILL)):
            with pytest.raises(RuntimeStateError) as busy:
                command()
            assert busy.value.code == "SKILL_RUNTIME_BUSY"
            assert busy.value.retryable
    finally:
        # Non-blocking: if the hook is already gone, opening a FIFO for writing would hang.
        with contextlib.suppress(OSError):
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.write(writer, b"no\n")
            os.close(writer)
        thread.join(timeout=30)
    [error] = outcome
    assert isinstance(error, RuntimeStateError)
    assert error.code == "SKILL_START_HOOK_FAILED"


def test_the_skill_lock_is_exclusive_across_open_files(tmp_path: Path):
    with skill_lock(tmp_path, SKILL):
        with pytest.raises(RuntimeStateError) as busy, skill_lock(tmp_path, SKILL):
            pass
        assert busy.value.code == "SKILL_RUNTIME_BUSY"
        with skill_lock(tmp_path, "another-skill"):
            pass
    with skill_lock(tmp_path, SKILL):
        pass


# ---------------------------------------------------------------------- state file


def test_the_state_file_is_strict_and_versioned(home: PaosHome):
    make_bundle(home, gateway_port=free_port(), hook="exit 1\n")
    with pytest.raises(RuntimeStateError):
        manager(home).start(SKILL)
    path = home.runtime_dir / f"{SKILL}.json"
    document = json.loads(path.read_text())
    assert document["state_version"] == 1
    assert [p.name for p in home.runtime_dir.iterdir() if p.name.startswith(".")] == []

    for change in ({"surprise": 1}, {"state_version": 2}, {"state": "paused"}):
        path.write_text(json.dumps({**document, **change}))
        with pytest.raises(RuntimeStateError) as raised:
            read_state(home.runtime_dir, SKILL)
        assert raised.value.code == "SKILL_RUNTIME_STATE_INVALID"


# ---------------------------------------------------------------------- launch copy, digest

VALUES = {
    "PAOS_SKILL_ROOT": "/opt/skills/demo",
    "FORGE_RUNTIME_BIN": "/opt/venv/bin",
    "PAOS_SKILL_NAME": "demo",
    "PAOS_SKILL_VERSION": "2.0.0",
}


def test_placeholders_render_and_foreign_variables_are_left_for_dora():
    text = (
        "args: --config ${PAOS_SKILL_ROOT}/g.yml --tag ${PAOS_SKILL_NAME}@${PAOS_SKILL_VERSION}\n"
        "path: ${FORGE_RUNTIME_BIN}/python\nenv: {HOME_DIR: ${HOME}}\n"
    )

    rendered = render_placeholders(text, VALUES, source="dataflow.yml")

    assert rendered == (
        "args: --config /opt/skills/demo/g.yml --tag demo@2.0.0\n"
        "path: /opt/venv/bin/python\nenv: {HOME_DIR: ${HOME}}\n"
    )


def test_an_unknown_placeholder_in_our_namespace_is_refused():
    with pytest.raises(RuntimeStateError) as raised:
        render_placeholders("args: ${PAOS_SKILL_RUT}/x", VALUES, source="dataflow.yml")

    assert raised.value.code == "SKILL_PLACEHOLDER_UNKNOWN"
    assert raised.value.details["placeholder"] == "PAOS_SKILL_RUT"


def test_the_launch_copy_keeps_relative_references_working(tmp_path: Path):
    source = tmp_path / "bundle" / "profiles" / "sim"
    (source / "nodes").mkdir(parents=True)
    (source / "gateway.yml").write_text("port: 1\n")
    (source / "nodes" / "adapter.py").write_text("print('hi')\n")
    (tmp_path / "bundle" / "shared.py").write_text("")
    (source / "dataflow.yml").write_text(
        "nodes:\n"
        "  - id: gateway\n    path: ${FORGE_RUNTIME_BIN}/python\n"
        "    args: -m doraforge.gateway --config gateway.yml --root ${PAOS_SKILL_ROOT}\n"
        "  - id: adapter\n    path: nodes/adapter.py\n"
        "  - id: shared\n    path: ../../shared.py\n"
        "  - id: tool\n    path: dora-echo\n"
    )
    launch_dir = tmp_path / "runtime" / "launch" / "demo"
    (launch_dir / "out").mkdir(parents=True)
    (launch_dir / "out" / "old.log").write_text("kept")
    (launch_dir / "stale.yml").write_text("gone")

    launch = write_launch_copy(source / "dataflow.yml", launch_dir, VALUES)

    nodes = {node["id"]: node for node in yaml.safe_load(launch.read_text())["nodes"]}
    assert nodes["gateway"]["path"] == "/opt/venv/bin/python"
    assert (
        nodes["gateway"]["args"]
        == "-m doraforge.gateway --config gateway.yml --root /opt/skills/demo"
    )
    assert nodes["adapter"]["path"] == str((source / "nodes" / "adapter.py").resolve())
    assert nodes["shared"]["path"] == str((tmp_path / "bundle" / "shared.py").resolve())
    assert nodes["tool"]["path"] == "dora-echo"
    # Dora runs nodes in the dataflow's directory: siblings are reachable from the copy.
    assert (launch_dir / "gateway.yml").read_text() == "port: 1\n"
    assert (launch_dir / "out" / "old.log").read_text() == "kept"
    assert not (launch_dir / "stale.yml").exists()
    assert (source / "dataflow.yml").read_text().count("${") == 2  # the source is untouched


def _digest_bundle(root: Path) -> Path:
    profile = root / "profiles" / "sim"
    (profile / "config").mkdir(parents=True)
    (profile / "dataflow.yml").write_text("nodes: []\n")
    (profile / "gateway.yml").write_text("port: 1\n")
    (profile / "config" / "robot.yml").write_text("joints: 6\n")
    (root / "README.md").write_text("not a profile file\n")
    return root


def test_the_environment_digest_follows_the_profile_files_and_the_dataflow_path(tmp_path):
    bundle = _digest_bundle(tmp_path / "a")
    dataflow = "profiles/sim/dataflow.yml"
    first = environment_digest(bundle, dataflow, "sim")

    assert environment_digest(_digest_bundle(tmp_path / "b"), dataflow, "sim") == first
    (bundle / "README.md").write_text("changed outside the profile\n")
    assert environment_digest(bundle, dataflow, "sim") == first

    (bundle / "profiles" / "sim" / "config" / "robot.yml").write_text("joints: 7\n")
    changed = environment_digest(bundle, dataflow, "sim")
    assert changed != first

    (bundle / "profiles" / "sim" / "other.yml").write_text("nodes: []\n")
    assert environment_digest(bundle, "profiles/sim/other.yml", "sim") != changed
    (bundle / "profiles" / "sim" / "dataflow.yml").write_text("nodes: [] # edited\n")
    assert environment_digest(bundle, dataflow, "sim") not in (first, changed)
