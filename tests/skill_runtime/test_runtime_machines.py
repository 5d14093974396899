"""The Skill Runtime across machines without a dataflow: the state's new fields, the
refusals of a start on machines or on an existing coordinator (each before anything
starts), ``--port auto`` and ``--coordinator`` on the command line, and the shipped
sim-split profile. (Real daemons run in ``tests/e2e/skill_runtime/test_runtime_machines.py``.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from doraforge.cli import main
from doraforge.cli.skill_commands import _gateway_port, _placement
from doraforge.dataflows import DATAFLOWS
from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.cluster import (
    CoordinatorAddress,
    daemon_rows,
    machine_ids,
    unpinned_nodes,
)
from doraforge.skill_runtime.dora import SHARED_DEFAULT_PORT, DoraControl
from doraforge.skill_runtime.dora_run import dora_binary, free_port
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.runtime import AUTO_PORT
from doraforge.skill_runtime.runtime_state import MachineDaemon, read_state, state_path
from doraforge.skills import source as skill_source
from doraforge.wire import strict_yaml
from tests.skill_runtime.runtime_support import (
    MOCK_DATAFLOW,
    SKILL,
    make_bundle,
    manager,
    recorded_state,
    torn_down_home,
)

PICK_PLACE = skill_source("pick-place")
STATUS = """DAEMON ID                                   LAST HEARTBEAT  RESTARTS
01a2336f-9dea-70cf-a778-f5f4024305a1        2964ms ago      0
robot-01a2336f-9dea-70cf-a778-f5f310074c67  3007ms ago      0

Active dataflows: 0
"""
# The mock cell with its provider pinned to a machine and its Gateway pinned to none.
PARTIAL = MOCK_DATAFLOW.replace("  - id: mock\n", "  - id: mock\n    deploy: {machine: robot}\n")
SPLIT_MOCK = PARTIAL.replace(
    "  - id: gateway\n", "  - id: gateway\n    deploy: {machine: workstation}\n"
)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[PaosHome]:
    with torn_down_home(tmp_path) as home:
        yield home


# ---------------------------------------------------------------------- the state


def test_a_state_written_before_machines_reads_as_this_homes_coordinator(home: PaosHome) -> None:
    written = recorded_state(home.runtime_dir, SKILL, "stopped")
    raw = json.loads(state_path(home.runtime_dir, SKILL).read_text())
    for key in ("coordinator_host", "coordinator_attached", "machines"):
        raw.pop(key)
    state_path(home.runtime_dir, SKILL).write_text(json.dumps(raw))

    state = read_state(home.runtime_dir, SKILL)

    assert state == written
    assert state is not None
    assert (state.coordinator_host, state.coordinator_attached, state.machines) == (
        "127.0.0.1",
        False,
        {},
    )


def test_a_state_on_machines_round_trips_and_refuses_unknown_daemon_fields(home: PaosHome) -> None:
    recorded = recorded_state(home.runtime_dir, SKILL, "running")
    machines = {"robot": MachineDaemon(daemon_id="robot-01a2", pid=4242)}
    moved = recorded.moved("running", machines=machines, coordinator_attached=True)
    path = state_path(home.runtime_dir, SKILL)
    path.write_text(moved.model_dump_json())
    assert read_state(home.runtime_dir, SKILL) == moved

    raw = json.loads(path.read_text())
    raw["machines"]["robot"]["host"] = "elsewhere"
    path.write_text(json.dumps(raw))
    with pytest.raises(RuntimeStateError) as invalid:
        read_state(home.runtime_dir, SKILL)
    assert invalid.value.code == "SKILL_RUNTIME_STATE_INVALID"


# ---------------------------------------------------------------------- Dora's answers


def test_cluster_status_rows_name_each_daemons_machine_or_none() -> None:
    assert daemon_rows(STATUS) == [
        (None, "01a2336f-9dea-70cf-a778-f5f4024305a1"),
        ("robot", "robot-01a2336f-9dea-70cf-a778-f5f310074c67"),
    ]
    assert daemon_rows("DAEMON ID  LAST HEARTBEAT\n\nActive dataflows: 0\n") == []


def test_an_attached_coordinator_may_be_on_6013_and_is_never_brought_down(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="machine-wide default"):
        DoraControl(dora_binary(), port=SHARED_DEFAULT_PORT, env={}, log_dir=tmp_path)
    attached = DoraControl(
        dora_binary(),
        port=SHARED_DEFAULT_PORT,
        host="192.0.2.7",
        owned=False,
        env={},
        log_dir=tmp_path,
    )
    assert attached.address == CoordinatorAddress("192.0.2.7", SHARED_DEFAULT_PORT)
    for refused in (attached.down, lambda: attached.up(listen_port=1, daemon_env={}, timeout_s=1)):
        with pytest.raises(ValueError, match="not this home's"):
            refused()
    assert not (tmp_path / "dora-coordinator.log").exists()


# ---------------------------------------------------------------------- start refusals


def test_a_dataflow_with_some_nodes_on_no_machine_is_refused_before_anything_starts(
    home: PaosHome,
) -> None:
    make_bundle(home, gateway_port=free_port(), dataflow=PARTIAL)

    with pytest.raises(RuntimeStateError) as raised:
        manager(home).start(SKILL)

    assert raised.value.code == "SKILL_DEPLOY_PARTIAL"
    assert raised.value.details == {"nodes": ["gateway"], "machines": ["robot"]}
    assert "give every node deploy: {machine: ...}" in raised.value.message
    assert read_state(home.runtime_dir, SKILL) is None
    assert not (home.runtime_dir / "dora.json").exists()


def test_a_coordinator_that_does_not_answer_is_refused_before_anything_starts(
    home: PaosHome,
) -> None:
    make_bundle(home, gateway_port=free_port(), dataflow=SPLIT_MOCK)
    nowhere = CoordinatorAddress("127.0.0.1", free_port())

    with pytest.raises(RuntimeStateError) as raised:
        manager(home).start(SKILL, coordinator=nowhere)

    assert raised.value.code == "SKILL_COORDINATOR_UNAVAILABLE"
    assert str(nowhere) in raised.value.message
    assert raised.value.retryable is True
    assert read_state(home.runtime_dir, SKILL) is None
    assert not (home.runtime_dir / "dora.json").exists()


@pytest.mark.parametrize(
    ("dataflow", "rows", "missing", "hint"),
    [
        (
            SPLIT_MOCK,
            [("robot", "robot-1")],
            ["workstation"],
            "dora daemon --machine-id workstation",
        ),
        (MOCK_DATAFLOW, [("robot", "robot-1")], [""], "dora daemon --coordinator-addr"),
    ],
)
def test_a_coordinator_without_a_daemon_for_a_machine_is_refused_naming_it(
    home: PaosHome,
    monkeypatch: pytest.MonkeyPatch,
    dataflow: str,
    rows: list[tuple[str | None, str]],
    missing: list[str],
    hint: str,
) -> None:
    make_bundle(home, gateway_port=free_port(), dataflow=dataflow)
    monkeypatch.setattr(DoraControl, "daemons", lambda self: rows)
    there = CoordinatorAddress("192.0.2.7", 7000)

    with pytest.raises(RuntimeStateError) as raised:
        manager(home).start(SKILL, coordinator=there)

    assert raised.value.code == "SKILL_MACHINE_MISSING"
    assert raised.value.details == {"coordinator": "192.0.2.7:7000", "missing": missing}
    assert hint in raised.value.message
    assert "--coordinator-port 7000" in raised.value.message
    assert read_state(home.runtime_dir, SKILL) is None


# ---------------------------------------------------------------------- the command line


def test_port_auto_is_the_runtimes_free_port_and_other_words_are_refused() -> None:
    assert _gateway_port("auto") == AUTO_PORT
    assert _gateway_port("9301") == 9301
    for text in ("0", "70000", "nine"):
        with pytest.raises(Exception, match="is not a TCP port"):
            _gateway_port(text)


def test_status_names_the_machines_and_an_attached_coordinator_only() -> None:
    plain = {"coordinator_host": "127.0.0.1", "coordinator_port": 4100, "machines": {}}
    assert _placement(plain) == ""
    split = {**plain, "machines": {"robot": {}, "workstation": {}}}
    assert _placement(split) == (
        "runs on machines robot, workstation of coordinator 127.0.0.1:4100 "
        "(this home's, local daemons)"
    )
    attached = {**plain, "coordinator_host": "10.0.0.5", "coordinator_attached": True}
    assert _placement(attached) == "runs on coordinator 10.0.0.5:4100 (attached: its own daemons)"


def _one_line_failure(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    return err.strip()


def test_skill_start_on_a_silent_coordinator_is_one_line_with_its_code(
    home: PaosHome, capsys: pytest.CaptureFixture[str]
) -> None:
    make_bundle(home, gateway_port=free_port(), dataflow=SPLIT_MOCK)
    nowhere = f"127.0.0.1:{free_port()}"
    argv = ["--home", str(home.root), "skill", "start", SKILL, "--coordinator", nowhere]

    line = _one_line_failure(capsys, argv)

    assert line.startswith(
        f"doraforge: SKILL_COORDINATOR_UNAVAILABLE: no Dora coordinator answers at {nowhere}"
    )


def test_a_malformed_coordinator_setting_is_one_line_with_its_code(
    home: PaosHome, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_bundle(home, gateway_port=free_port())
    monkeypatch.setenv("DORAFORGE_COORDINATOR", "robot")

    line = _one_line_failure(capsys, ["--home", str(home.root), "skill", "start", SKILL])

    assert line.startswith("doraforge: SKILL_COORDINATOR_INVALID: $DORAFORGE_COORDINATOR: ")
    assert "is not HOST:PORT" in line
    assert read_state(home.runtime_dir, SKILL) is None


# ---------------------------------------------------------------------- the shipped profile


def _nodes(path: Path) -> dict[str, dict[str, object]]:
    document = strict_yaml.load(path.read_text(), aliases=True)
    return {node["id"]: node for node in document["nodes"]}


def test_the_sim_split_profile_is_the_sim_profile_on_the_machines_of_sim_split() -> None:
    profile = PICK_PLACE / "profiles" / "sim-split" / "dataflow.yml"
    assert machine_ids(profile) == ["robot", "workstation"]
    assert unpinned_nodes(profile) == []
    split, single = _nodes(profile), _nodes(PICK_PLACE / "profiles" / "sim" / "dataflow.yml")
    shipped = _nodes(DATAFLOWS / "sim-split.yml")
    assert split.keys() == single.keys()
    for node_id, node in split.items():
        assert node.pop("deploy") == shipped[node_id]["deploy"], node_id
        assert node == single[node_id], node_id
