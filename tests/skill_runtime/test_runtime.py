"""RuntimeManager without a dataflow: start refusals, preflight, locking, the state file,
the launch copy and the environment digest. (Real Dora runs are in
``tests/e2e/skill_runtime/test_runtime.py``.)

The ``home`` fixture still tears down whatever Dora services a refused start left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.cluster import CoordinatorAddress
from doraforge.skill_runtime.dora_run import free_port
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.launch import (
    environment_digest,
    render_placeholders,
    write_launch_copy,
)
from doraforge.skill_runtime.runtime_state import read_state, skill_lock
from doraforge.skill_runtime.sandbox import SandboxPlaces, sandbox_launch_copy
from tests.skill_runtime.runtime_support import (
    MOCK_DATAFLOW,
    OPERATOR_TOKEN,
    RECORDING_HOOK,
    SKILL,
    assert_nothing_runs,
    make_bundle,
    manager,
    recorded_state,
    torn_down_home,
)
from tests.support.live_server import serving
from tests.support.waiting import eventually


@pytest.fixture
def home(tmp_path: Path) -> Iterator[PaosHome]:
    """A fresh PAOS home whose Dora services and dataflows are always torn down."""
    with torn_down_home(tmp_path) as home:
        yield home


# ---------------------------------------------------------------------- start refusals


def test_a_failing_start_hook_aborts_cleanly_before_dora_starts(home: PaosHome) -> None:
    # The hook sees only what the profile declares of the operator's environment.
    declared = {"required_environment": ["HOOK_EXIT"]}
    bundle = make_bundle(home, gateway_port=free_port(), hook=RECORDING_HOOK, profile=declared)
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
) -> None:
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


def test_the_environment_every_skill_process_starts_from_is_an_allowlist(
    home: PaosHome,
) -> None:
    given = {
        "PATH": "/usr/bin",
        "HOME": "/home/op",
        "LC_ALL": "C.UTF-8",
        "MUJOCO_GL": "egl",
        "DORA_RUNTIME_FLAG": "1",
        "DORAFORGE_SIM_SEED": "7",
        "DORAFORGE_LOG_LEVEL": "INFO",
        "DORAFORGE_OPERATOR_TOKEN": OPERATOR_TOKEN,
        "DORAFORGE_REGISTRY_TOKEN": OPERATOR_TOKEN,
        "DORAFORGE_GATEWAY_TOKEN": OPERATOR_TOKEN,
        "DORAFORGE_GATEWAY_TOKEN_FILE": "/op/gateway.token",
        "LAB_REGISTRY_TOKEN": OPERATOR_TOKEN,  # a `serve --token-env` of any name
        "AWS_SECRET_ACCESS_KEY": "secret",
    }

    env = manager(home, environ=given)._project_env()

    kept = {"HOME", "LC_ALL", "MUJOCO_GL", "DORA_RUNTIME_FLAG", "DORAFORGE_SIM_SEED"}
    assert {key: env[key] for key in kept} == {key: given[key] for key in kept}
    assert env["PATH"].endswith("/usr/bin")
    assert OPERATOR_TOKEN not in env.values()
    assert not {"AWS_SECRET_ACCESS_KEY", "DORAFORGE_GATEWAY_TOKEN_FILE"} & env.keys()


def test_only_the_gateway_node_of_the_launch_copy_gets_the_gateway_environment(
    tmp_path: Path,
) -> None:
    source = tmp_path / "bundle" / "dataflow.yml"
    source.parent.mkdir()
    source.write_text(
        MOCK_DATAFLOW.replace("    inputs:\n", "    env: {OWN: '1'}\n    inputs:\n", 1)
    )

    launch = write_launch_copy(source, tmp_path / "launch", VALUES, {"TOKEN_AT": "/t"})

    nodes = {node["id"]: node for node in yaml.safe_load(launch.read_text())["nodes"]}
    assert nodes["gateway"]["env"] == {"OWN": "1", "TOKEN_AT": "/t"}
    assert "env" not in nodes["mock"]


@pytest.mark.parametrize(
    ("profile", "environ", "kind", "missing"),
    [
        # PhyAgentOS's meaning: an entrypoint of a node-artifact lock; `python` is none.
        ({"required_binaries": ["python"]}, {}, "binaries", "python"),
        # What the dataflow runs from PATH is read from its bare node `path:` entries.
        (
            {"dataflow": "profiles/mock/commands.yml"},
            {},
            "commands",
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
        # A token of the operator's is never handed to a skill, even when it asks for one.
        (
            {"required_environment": ["DORAFORGE_REGISTRY_TOKEN"]},
            {"DORAFORGE_REGISTRY_TOKEN": OPERATOR_TOKEN},
            "environment_secret",
            "DORAFORGE_REGISTRY_TOKEN",
        ),
    ],
)
def test_preflight_names_what_is_missing_and_writes_no_state(
    home: PaosHome, profile: dict[str, Any], environ: dict[str, str], kind: str, missing: str
) -> None:
    bundle = make_bundle(home, gateway_port=free_port(), profile=profile)
    (bundle / "profiles" / "mock" / "commands.yml").write_text(
        MOCK_DATAFLOW.replace("path: python", "path: no-such-binary-xyz", 1)
    )
    env = {k: v for k, v in os.environ.items() if k != "ROBOT_SERIAL"} | environ

    with pytest.raises(RuntimeStateError) as raised:
        manager(home, environ=env).start(SKILL)

    assert raised.value.code == "SKILL_PREFLIGHT_FAILED"
    assert missing in raised.value.details["missing"][kind]
    assert missing in raised.value.message
    assert read_state(home.runtime_dir, SKILL) is None


def test_preflight_finds_required_binaries_among_the_node_artifact_locks(home: PaosHome) -> None:
    bundle = make_bundle(
        home,
        gateway_port=free_port(),
        profile={"required_binaries": ["adapter"], "dataflow": "profiles/mock/missing.yml"},
    )
    manifest = yaml.safe_load((bundle / "skill.yaml").read_text())
    manifest["artifacts"] = {"resolver": "local", "nodes": {"adapter": ADAPTER_LOCK}}
    (bundle / "skill.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))

    with pytest.raises(RuntimeStateError) as raised:
        manager(home).start(SKILL)

    # Only the deliberately missing dataflow is reported; the lock provides the binary.
    assert raised.value.details["missing"] == {"dataflow": ["profiles/mock/missing.yml"]}


ADAPTER_LOCK = {
    "artifact_id": "adapter",
    "version": "0.1.0",
    "platform": "linux",
    "arch": "x86_64",
    "artifact_type": "executable_tar_gz",
    "entrypoint": "adapter",
    "sha256": "a" * 64,
}


def test_a_missing_dora_cli_fails_preflight(home: PaosHome) -> None:
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

    with serving(ThreadingHTTPServer(("127.0.0.1", port), Handler)):
        yield


def test_start_is_refused_when_something_already_answers_at_the_gateway_url(home: PaosHome) -> None:
    port = free_port()
    make_bundle(home, gateway_port=port)

    with _answering(port), pytest.raises(RuntimeStateError) as raised:
        manager(home).start(SKILL)

    assert raised.value.code == "SKILL_GATEWAY_IN_USE"
    assert read_state(home.runtime_dir, SKILL) is None


def test_unknown_skills_and_profiles_are_refused(home: PaosHome) -> None:
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


def test_running_checks_the_listed_states_without_reading_each_again(
    home: PaosHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    import doraforge.skill_runtime.runtime as runtime_module

    for name, recorded in [("stopped-skill", "stopped"), ("failed-skill", "failed")]:
        recorded_state(home.runtime_dir, name, recorded)

    def read_again(*_args: object) -> None:
        raise AssertionError("running() read a state file a second time")

    monkeypatch.setattr(runtime_module, "read_state", read_again)
    assert manager(home).running() == []


# ---------------------------------------------------------------------- locking


def test_a_second_manager_is_refused_while_the_first_holds_the_skill(
    home: PaosHome, tmp_path: Path
) -> None:
    """Manager A blocks inside start.sh (on a FIFO) while manager B tries to start and stop."""
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    hook = (
        '#!/usr/bin/env bash\ntouch "$HOOK_DIR/started"\n'
        'read -r verdict < "$HOOK_DIR/go"\n[ "$verdict" = ok ]\n'
    )
    profile = {"startup_timeout_s": 20, "required_environment": ["HOOK_DIR"]}
    make_bundle(home, gateway_port=free_port(), hook=hook, profile=profile)
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
        eventually((tmp_path / "started").exists, within=20.0, what="the first start hook")
        commands: tuple[Callable[[], object], ...] = (
            lambda: second.start(SKILL),
            lambda: second.stop(SKILL),
        )
        for command in commands:
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


def test_the_skill_lock_is_exclusive_across_open_files(tmp_path: Path) -> None:
    with skill_lock(tmp_path, SKILL):
        with pytest.raises(RuntimeStateError) as busy, skill_lock(tmp_path, SKILL):
            pass
        assert busy.value.code == "SKILL_RUNTIME_BUSY"
        with skill_lock(tmp_path, "another-skill"):
            pass
    with skill_lock(tmp_path, SKILL):
        pass


# ---------------------------------------------------------------------- state file


def test_the_state_file_is_strict_and_versioned(home: PaosHome) -> None:
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


def test_placeholders_render_and_foreign_variables_are_left_for_dora() -> None:
    text = (
        "args: --config ${PAOS_SKILL_ROOT}/g.yml --tag ${PAOS_SKILL_NAME}@${PAOS_SKILL_VERSION}\n"
        "path: ${FORGE_RUNTIME_BIN}/python\nenv: {HOME_DIR: ${HOME}}\n"
    )

    rendered = render_placeholders(text, VALUES, source="dataflow.yml")

    assert rendered == (
        "args: --config /opt/skills/demo/g.yml --tag demo@2.0.0\n"
        "path: /opt/venv/bin/python\nenv: {HOME_DIR: ${HOME}}\n"
    )


def test_an_unknown_placeholder_in_our_namespace_is_refused() -> None:
    with pytest.raises(RuntimeStateError) as raised:
        render_placeholders("args: ${PAOS_SKILL_RUT}/x", VALUES, source="dataflow.yml")

    assert raised.value.code == "SKILL_PLACEHOLDER_UNKNOWN"
    assert raised.value.details["placeholder"] == "PAOS_SKILL_RUT"


def test_the_launch_copy_keeps_relative_references_working(tmp_path: Path) -> None:
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


def test_the_environment_digest_follows_the_profile_files_and_the_dataflow_path(
    tmp_path: Path,
) -> None:
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


def test_a_sandboxed_start_needs_bwrap_and_this_homes_own_coordinator(home: PaosHome) -> None:
    make_bundle(home, gateway_port=free_port())
    no_bwrap = manager(home, environ={"PATH": "/nonexistent", "HOME": str(home.root)})

    with pytest.raises(RuntimeStateError) as missing:
        no_bwrap.start(SKILL, sandbox=True)
    with pytest.raises(RuntimeStateError) as attached:
        manager(home).start(SKILL, sandbox=True, coordinator=CoordinatorAddress("10.0.0.2", 6013))

    assert missing.value.code == "SKILL_PREFLIGHT_FAILED"
    assert missing.value.details == {"missing": {"binaries": ["bwrap"]}}
    assert attached.value.code == "SKILL_SANDBOX_UNSUPPORTED"
    assert read_state(home.runtime_dir, SKILL) is None


def test_the_sandbox_wraps_each_node_and_shows_the_gateway_alone_its_token(
    tmp_path: Path,
) -> None:
    launch = tmp_path / "launch" / "dataflow.yml"
    launch.parent.mkdir()
    launch.write_text(MOCK_DATAFLOW)
    places = SandboxPlaces(
        home=tmp_path / "home",
        bundle=tmp_path / "home" / "skills" / "s" / "current",
        launch_dir=launch.parent,
        artifacts=tmp_path / "home" / "artifacts",
        token_file=tmp_path / "home" / "runtime" / "tokens" / "s.token",
        journal_dir=tmp_path / "home" / "runtime" / "journal",
    )

    sandbox_launch_copy(launch, places, bwrap="/usr/bin/bwrap", search_path=os.environ["PATH"])

    nodes = {node["id"]: node for node in yaml.safe_load(launch.read_text())["nodes"]}
    assert {node["path"] for node in nodes.values()} == {"/usr/bin/bwrap"}
    gateway, mock = (shlex.split(nodes[n]["args"]) for n in ("gateway", "mock"))
    assert str(places.token_file) in gateway
    assert str(places.token_file) not in mock
    assert mock[mock.index("--") + 2 :] == ["-m", "doraforge.nodes.mock"]
    assert "--unshare-net" not in mock  # Dora's nodes dial their daemon over loopback TCP
    launch.write_text("nodes:\n  - id: attached\n    path: dynamic\n")
    with pytest.raises(RuntimeStateError) as dynamic:
        sandbox_launch_copy(launch, places, bwrap="bwrap", search_path="")
    assert dynamic.value.code == "SKILL_SANDBOX_UNSUPPORTED"
