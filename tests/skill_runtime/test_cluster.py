"""The pieces of :mod:`doraforge.skill_runtime.cluster` that need no Dora."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from doraforge.cli import main
from doraforge.dataflows import DATAFLOWS
from doraforge.skill_runtime.cluster import (
    CLUSTER_ZENOH_OVERLAY,
    ClusterDataflow,
    CoordinatorAddress,
    LocalCluster,
    MachineHost,
    machine_ids,
    registered_machines,
    with_working_dirs,
)
from doraforge.skill_runtime.dora import SHARED_DEFAULT_PORT
from doraforge.wire import strict_yaml

SPLIT = DATAFLOWS / "sim-split.yml"

STATUS = """DAEMON ID                                   LAST HEARTBEAT  RESTARTS  HEALTH KILLS
robot-01a232e9-09cd-75c6-bbbb-186c9c66c7e3  2467ms ago      0         0
work-station-01a232e9-09cd-75c6-bbbb-186c9c66c7e4  10ms ago      0         0

Active dataflows: 0
"""


def test_the_split_cell_names_two_machines_and_the_single_cell_none() -> None:
    assert machine_ids(SPLIT) == ["robot", "workstation"]
    assert machine_ids(DATAFLOWS / "sim.yml") == []
    assert machine_ids(Path("/nonexistent/flow.yml")) == []


def test_the_split_cell_has_the_nodes_and_args_of_the_single_cell() -> None:
    def nodes(path: Path) -> dict[str, dict[str, object]]:
        document = strict_yaml.load(path.read_text(), aliases=True)
        return {node["id"]: node for node in document["nodes"]}

    single, split = nodes(DATAFLOWS / "sim.yml"), nodes(SPLIT)
    assert split.keys() == single.keys()
    for node_id, node in split.items():
        deploy = node.pop("deploy")
        assert node == single[node_id], node_id
        robot_side = node_id in ("world", "arm", "gripper")
        assert deploy == {"machine": "robot" if robot_side else "workstation"}


def test_working_dirs_pin_every_deployed_node_to_the_dataflow_folder(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yml"
    flow.write_text(
        "nodes:\n"
        "  - {id: a, path: python, deploy: {machine: m1}}\n"
        "  - {id: b, path: python, deploy: {machine: m2, working_dir: /srv/b}}\n"
        "  - {id: c, path: python}\n"
    )
    pinned = with_working_dirs(flow, tmp_path / "out" / "pinned.yml")
    nodes = {n["id"]: n for n in yaml.safe_load(pinned.read_text())["nodes"]}
    assert nodes["a"]["deploy"] == {"machine": "m1", "working_dir": str(tmp_path)}
    assert nodes["b"]["deploy"]["working_dir"] == "/srv/b"  # the author's choice stays
    assert "deploy" not in nodes["c"]


def test_registered_machines_reads_machine_ids_from_daemon_ids() -> None:
    assert registered_machines(STATUS) == {"robot", "work-station"}
    assert registered_machines("DAEMON ID  LAST HEARTBEAT\n\nActive dataflows: 0\n") == set()


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [("192.168.1.10:6013", "192.168.1.10", 6013), ("[::1]:7000", "::1", 7000)],
)
def test_a_coordinator_address_is_host_and_port(text: str, host: str, port: int) -> None:
    address = CoordinatorAddress.parse(text)
    assert (address.host, address.port) == (host, port)
    assert address.cli_args() == ["--coordinator-addr", host, "--coordinator-port", str(port)]


@pytest.mark.parametrize("text", ["robot", "robot:", ":6013", "h:0", "h:70000", "h:x"])
def test_a_malformed_coordinator_address_is_refused_naming_the_form(text: str) -> None:
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        CoordinatorAddress.parse(text)


def test_a_local_cluster_uses_free_ports_and_the_cluster_zenoh_overlay(tmp_path: Path) -> None:
    cluster = LocalCluster(["robot", "workstation"], {"PATH": "/bin"}, tmp_path)
    assert cluster.address.host == "127.0.0.1"
    assert cluster.address.port != SHARED_DEFAULT_PORT
    assert cluster.env["DORA_ZENOH_CONFIG_OVERLAY"] == str(CLUSTER_ZENOH_OVERLAY)
    overlay = CLUSTER_ZENOH_OVERLAY.read_text()
    assert "max_wait_before_drop_fragments: 1000000" in overlay
    args = cluster._daemon_args("robot", {"robot": 41001, "workstation": 41002})
    assert args[:3] == ["daemon", "--machine-id", "robot"]
    assert args[args.index("--zenoh-listen") + 1] == "127.0.0.1:41001"
    assert args[args.index("--zenoh-connect") + 1] == "tcp/127.0.0.1:41002"
    assert "6013" not in args


def test_a_machine_on_a_host_of_its_own_listens_there_and_is_dialled_there(
    tmp_path: Path,
) -> None:
    hosts = {
        "robot": MachineHost("10.200.0.2", ("ip", "netns", "exec", "robot-host")),
        "workstation": MachineHost("10.200.0.1"),
    }
    cluster = LocalCluster(
        ["robot", "workstation"],
        {"PATH": "/bin"},
        tmp_path,
        hosts=hosts,
        coordinator_host="10.200.0.1",
    )
    assert cluster.address.host == "10.200.0.1"
    zenoh = {"robot": 41001, "workstation": 41002}
    robot = cluster._daemon_args("robot", zenoh)
    assert robot[robot.index("--zenoh-listen") + 1] == "10.200.0.2:41001"
    assert robot[robot.index("--zenoh-connect") + 1] == "tcp/10.200.0.1:41002"
    assert robot[robot.index("--coordinator-addr") + 1] == "10.200.0.1"
    workstation = cluster._daemon_args("workstation", zenoh)
    assert workstation[workstation.index("--zenoh-connect") + 1] == "tcp/10.200.0.2:41001"


def test_an_ipv6_host_is_bracketed_in_its_zenoh_endpoints(tmp_path: Path) -> None:
    hosts = {"robot": MachineHost("fd00::2"), "workstation": MachineHost("fd00::1")}
    cluster = LocalCluster(["robot", "workstation"], {}, tmp_path, hosts=hosts)
    args = cluster._daemon_args("robot", {"robot": 41001, "workstation": 41002})
    assert args[args.index("--zenoh-listen") + 1] == "[fd00::2]:41001"
    assert args[args.index("--zenoh-connect") + 1] == "tcp/[fd00::1]:41002"


@pytest.mark.parametrize(
    ("hosts", "coordinator", "message"),
    [
        # the workstation left on loopback, which the robot's host cannot reach
        (
            {"robot": MachineHost("10.200.0.2", ("ip", "netns", "exec", "r"))},
            "10.200.0.1",
            "loopback address of workstation",
        ),
        # the coordinator left on loopback
        (
            {
                "robot": MachineHost("10.200.0.2", ("ip", "netns", "exec", "r")),
                "workstation": MachineHost("10.200.0.1"),
            },
            "127.0.0.1",
            "loopback address of the coordinator",
        ),
        ({"arm": MachineHost("10.200.0.2")}, "127.0.0.1", "name no machine of the cluster: arm"),
    ],
    ids=["machine-on-loopback", "coordinator-on-loopback", "unknown-machine"],
)
def test_a_placement_no_daemon_could_connect_through_is_refused(
    tmp_path: Path, hosts: dict[str, MachineHost], coordinator: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        LocalCluster(
            ["robot", "workstation"], {}, tmp_path, hosts=hosts, coordinator_host=coordinator
        )


def test_a_cluster_needs_a_machine_and_a_dataflow_one_coordinator(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one machine"):
        LocalCluster([], {}, tmp_path)
    with pytest.raises(ValueError, match="exactly one"):
        ClusterDataflow(SPLIT, {})


def test_run_refuses_a_malformed_coordinator_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit):
        main(["--home", str(tmp_path), "run", "sim-split", "--coordinator", "robot"])
    assert "is not HOST:PORT" in capsys.readouterr().err


def test_run_on_a_coordinator_refuses_port_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["--home", str(tmp_path), "run", "sim-split", "--coordinator", "127.0.0.1:1"]
    code = main([*argv, "--port", "9100"])
    err = capsys.readouterr().err
    assert code != 0
    assert "RUN_PORT_REMOTE" in err
    assert len(err.strip().splitlines()) == 1
