"""The split cell with the robot on a computer of its own: a network namespace.

``tests/e2e/test_multi_daemon.py`` runs both daemons in this host's network stack; here
the robot machine's daemon (world, arm, gripper) runs in a Linux network namespace joined
to this host by a veth link (:mod:`tests.support.netns`), so it has its own loopback and
reaches the workstation only over that link, as the robot computer of the README's "On
real machines" does. The cell is started the way that section says: a coordinator on the
workstation's link address, one ``dora daemon`` per machine with ``--zenoh-listen`` on its
own address and ``--zenoh-connect`` to the other, then ``doraforge run DATAFLOW
--coordinator HOST:PORT``. The Gateway and the camera run on the workstation (this host),
where the tests talk to the Gateway.

Network namespaces need root: without it the module is skipped with that reason; as root
(CI) a failure to make one fails the module.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from doraforge.dataflows import DATAFLOWS
from doraforge.skill_runtime.cluster import (
    LocalCluster,
    MachineHost,
    machine_ids,
    with_working_dirs,
)
from doraforge.skill_runtime.dora_run import dora_environment, free_port, private_copy
from tests.e2e.conftest import GATEWAY_MARK, SIM_ENV, SIM_TOOLS, GatewayClient
from tests.paths import PROJECT_ROOT
from tests.support import netns
from tests.support.netns import RemoteHost
from tests.support.processes import processes_of, survivors
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(600)]

START_TIMEOUT_S = 180.0
STOP_GRACE_S = 15.0
#: A 640x480 RGB frame, the size of what the robot's world sends the workstation's camera.
FRAME_BYTES = 640 * 480 * 3
ROBOT_MARKS = ("-m doraforge.nodes.world", "-m doraforge.nodes.arm", "-m doraforge.nodes.gripper")
WORKSTATION_MARKS = (GATEWAY_MARK, "-m doraforge.nodes.camera")


def phase_in(*phases: str) -> Callable[[dict[str, Any]], bool]:
    """A :meth:`GatewayClient.poll` condition: the invocation is in one of ``phases``."""
    return lambda status: status["phase"] in phases


class LinkedCell(GatewayClient):
    """The split cell across the link: the robot host, the cluster, the ``doraforge run``
    that started the dataflow on it, and the Gateway's client."""

    def __init__(
        self,
        robot: RemoteHost,
        cluster: LocalCluster,
        run: subprocess.Popen[bytes],
        port: int,
        log_path: Path,
    ):
        super().__init__(port, log_path)
        self.robot = robot
        self.cluster = cluster
        self.run = run

    def nodes(self) -> dict[str, psutil.Process]:
        """Each node process by its command-line mark (below the daemons)."""
        found: dict[str, psutil.Process] = {}
        for pid in self.cluster.node_processes():
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                command = " ".join(process.cmdline())
                for mark in (*ROBOT_MARKS, *WORKSTATION_MARKS):
                    if mark in command:
                        found[mark] = process
        return found


def _daemon_env(tmp: Path, port: int) -> dict[str, str]:
    """What every daemon hands its nodes (the README: the nodes get the environment of the
    daemon of their machine)."""
    return dora_environment(
        os.environ,
        DORAFORGE_GATEWAY_PORT=str(port),
        DORAFORGE_GATEWAY_JOURNAL=str(tmp / "gateway.journal"),
        **SIM_ENV,
    )


def _doraforge_run(dataflow: Path, coordinator: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as output:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "doraforge.cli",
                "run",
                str(dataflow),
                "--coordinator",
                coordinator,
            ],
            cwd=PROJECT_ROOT,
            env=dora_environment(os.environ),
            stdout=output,
            stderr=subprocess.STDOUT,
        )


@contextlib.contextmanager
def _robot_host() -> Iterator[RemoteHost]:
    reason = netns.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with netns.remote_host() as host:
        yield host


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LinkedCell]:
    tmp = tmp_path_factory.mktemp("netns-cell")
    copy = private_copy(DATAFLOWS / "sim-split.yml", tmp / "flow")
    pinned = with_working_dirs(copy, tmp / "flow" / "sim-split.pinned.yml")
    port = free_port()
    with _robot_host() as robot:
        hosts = {
            "robot": MachineHost(robot.address, robot.launcher),
            "workstation": MachineHost(robot.local_address),
        }
        cluster = LocalCluster(
            machine_ids(copy),
            _daemon_env(tmp, port),
            tmp / "cluster",
            hosts=hosts,
            coordinator_host=robot.local_address,
        )
        try:
            cluster.up()
            log = tmp / "run.log"
            run = _doraforge_run(pinned, str(cluster.address), log)
            linked = LinkedCell(robot, cluster, run, port, log)
            try:
                eventually(
                    lambda: all(linked.ready(tool) for tool in SIM_TOOLS) or run.poll() is not None,
                    within=START_TIMEOUT_S,
                    what="the cell across the link to be ready",
                    detail=linked.tail,
                    interval=0.2,
                )
                assert run.poll() is None, f"doraforge run exited\n{linked.tail()}"
                yield linked
                _stop(linked)
            finally:
                linked.http.close()
                _end(run)
        finally:
            nodes = processes_of(cluster.node_processes())
            cluster.down()  # the daemons and the coordinator, whatever failed above
            assert survivors(nodes, STOP_GRACE_S) == []


def _end(run: subprocess.Popen[bytes]) -> None:
    """Stop ``doraforge run`` as an operator would (SIGTERM: it stops the dataflow and
    its ``dora start``), killed only if it does not end."""
    if run.poll() is None:
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()


def _stop(cell: LinkedCell) -> None:
    """SIGTERM the run: it stops the dataflow on both daemons and leaves the cluster up,
    with no node left on either host."""
    nodes = list(cell.nodes().values())
    cell.run.send_signal(signal.SIGTERM)
    # 0: a clean stop; 1 (RUN_KILLED): nodes outlived the grace on a loaded machine.
    assert cell.run.wait(timeout=60) in (0, 1), cell.tail()
    assert survivors(nodes, STOP_GRACE_S) == []
    assert cell.cluster.registered() == {"robot", "workstation"}


# ---------------------------------------------------------------------- the two hosts


def test_the_robot_nodes_run_in_the_robot_computers_network_stack(cell: LinkedCell) -> None:
    nodes = cell.nodes()
    assert set(nodes) == {*ROBOT_MARKS, *WORKSTATION_MARKS}, nodes
    for mark in ROBOT_MARKS:
        assert cell.robot.runs(nodes[mark].pid), mark
    for mark in WORKSTATION_MARKS:
        assert not cell.robot.runs(nodes[mark].pid), mark
    assert cell.robot.runs(cell.cluster.daemon("robot").pid)
    assert not cell.robot.runs(cell.cluster.daemon("workstation").pid)


def test_the_robot_computer_cannot_reach_the_workstations_loopback(cell: LinkedCell) -> None:
    """Its 127.0.0.1 is its own: the Gateway the workstation serves on loopback is not
    there (refused), while the robot daemon's own loopback listener is, so everything the
    robot's nodes exchange with the Gateway crossed the link."""
    gateway_port = cell.port
    command = cell.cluster.daemon("robot").command
    daemon_port = int(command[command.index("--local-listen-port") + 1])
    assert _connect_on_robot(cell, gateway_port) == errno.ECONNREFUSED
    assert _connect_on_robot(cell, daemon_port) == 0
    assert cell.ready("world.scene_state")  # while the workstation itself reaches it


def _connect_on_robot(cell: LinkedCell, port: int) -> int:
    """``connect_ex`` to ``127.0.0.1:port`` from the robot's host: 0 or the errno."""
    probe = (
        "import socket, sys\n"
        "s = socket.socket()\n"
        "s.settimeout(5)\n"
        f"sys.exit(s.connect_ex(('127.0.0.1', {port})))\n"
    )
    done = subprocess.run(
        [*cell.robot.launcher, sys.executable, "-c", probe], capture_output=True, timeout=30
    )
    assert done.stderr == b"", done.stderr
    return done.returncode


def test_queries_actions_joint_state_and_frames_cross_the_link(cell: LinkedCell) -> None:
    scene = cell.http.post("/tools/world/scene_state:invoke", json={"arguments": {}})
    assert cell.data(scene)["response"]["result"]["status"] == "succeeded"
    invocation_id = cell.admit("arm.home", {})
    assert cell.poll(invocation_id, phase_in("completed"), 60.0)["phase"] == "completed"
    joints = cell.data(cell.http.get("/observations/state"))["joint_state"]
    assert len(joints["position"]) >= 6

    received = cell.robot.bytes_received()
    first = cell.http.get("/observations/images/scene/latest")
    assert first.status_code == 200, first.text

    def later_frame() -> bool:
        latest = cell.http.get("/observations/images/scene/latest")
        return int(latest.headers["X-Frame-Seq"]) >= int(first.headers["X-Frame-Seq"]) + 3

    eventually(later_frame, within=30.0, what="three newer scene frames", detail=cell.tail)
    # Frames travel the link one after another, and none after the first had arrived when
    # the count was read: the later ones crossed the veth whole (served as JPEGs).
    assert cell.robot.bytes_received() - received >= FRAME_BYTES
    capture = cell.http.post(
        "/tools/camera/capture:invoke", json={"arguments": {"source": "scene"}}
    )
    assert cell.data(capture)["response"]["result"]["status"] == "succeeded"


# ---------------------------------------------------------------------- a partition, last


def test_a_partition_mid_action_ends_it_unknown_and_the_same_robot_returns_with_the_link(
    cell: LinkedCell,
) -> None:
    """The link goes down while the arm moves; both computers and every process keep
    running. The Action ends ``unknown`` (the arm may well have finished), the robot's
    tools are unavailable, and when the link is back the same provider instances register
    again: no restart, new work runs, the lost invocation stays ``unknown``."""
    before = cell.context("arm.move_joints")["endpoint_status"]["endpoint_instance_id"]
    robot_pids = {mark: cell.nodes()[mark].pid for mark in ROBOT_MARKS}
    slow = {"positions": {"shoulder_pan": 1.5}, "speed": 0.1}
    invocation_id = cell.admit("arm.move_joints", slow)
    cell.poll(invocation_id, phase_in("running"), 30.0)

    cell.robot.disconnect()
    try:
        final = cell.poll(invocation_id, phase_in("unknown", "completed", "failed"), 60.0)
        assert final["phase"] == "unknown", final
        assert final["result"]["status"] == "unknown", final
        error = final["result"]["error"]
        assert error["code"] == "FORGE_TOOL_ENDPOINT_INSTANCE_LOST", final
        assert error["details"]["reason"] == "lease_expired", final  # nothing said goodbye
        eventually(
            lambda: not cell.ready("world.scene_state"),
            within=60.0,
            what="the robot's tools to become unavailable",
        )
        refused = cell.http.post("/tools/world/scene_state:invoke", json={"arguments": {}})
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "FORGE_TOOL_ENDPOINT_UNAVAILABLE"
        assert refused.json()["error"]["retryable"] is True
    finally:
        cell.robot.reconnect()

    eventually(
        lambda: all(cell.ready(tool) for tool in SIM_TOOLS),
        within=120.0,
        what="the robot's tools to return with the link",
        detail=cell.tail,
    )
    after = cell.context("arm.move_joints")["endpoint_status"]["endpoint_instance_id"]
    assert after == before  # the same process: a partition, not a restart
    assert {mark: cell.nodes()[mark].pid for mark in ROBOT_MARKS} == robot_pids
    home = cell.admit("arm.home", {})
    assert cell.poll(home, phase_in("completed"), 60.0)["phase"] == "completed"
    assert cell.status(invocation_id)["phase"] == "unknown"  # never retried, never rewritten
