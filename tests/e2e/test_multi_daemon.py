"""The simulated cell split across two Dora daemons (``dataflows/sim-split.yml``).

A real coordinator and two real daemons with distinct machine ids (``robot``: world, arm,
gripper; ``workstation``: Gateway, camera) on this host over loopback: the daemons are told
apart by machine id, and their data crosses through Zenoh over TCP on 127.0.0.1.
``tests/e2e/test_network_namespaces.py`` runs the same cell with the robot daemon in a
network namespace of its own, across a veth link. Driven over HTTP only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import psutil
import pytest

from doraforge.dataflows import DATAFLOWS
from doraforge.skill_runtime.cluster import (
    ClusterDataflow,
    LocalCluster,
    machine_ids,
    with_working_dirs,
)
from doraforge.skill_runtime.dora_run import dora_environment, free_port, private_copy
from tests.e2e.conftest import GATEWAY_MARK, SIM_ENV, SIM_TOOLS, MockStack
from tests.paths import PROJECT_ROOT
from tests.support.processes import descendants, survivors
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SPLIT = DATAFLOWS / "sim-split.yml"
START_TIMEOUT_S = 180.0
STOP_GRACE_S = 15.0
ROBOT_MARKS = ("-m doraforge.nodes.world", "-m doraforge.nodes.arm", "-m doraforge.nodes.gripper")


class SplitCell(MockStack):
    """A :class:`MockStack` whose nodes are below two daemons, not below ``dora run``."""

    def __init__(self, dataflow: ClusterDataflow, cluster: LocalCluster, **kw: Any):
        super().__init__(dataflow, **kw)
        self.cluster = cluster
        self.split = dataflow
        self.seen: dict[int, str] = {}
        self.log: IO[bytes] | None = None

    def nodes(self, mark: str) -> list[psutil.Process]:
        found = []
        for pid in self.cluster.node_processes():
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                process = psutil.Process(pid)
                alive = process.status() != psutil.STATUS_ZOMBIE
                if alive and mark in " ".join(process.cmdline()):
                    found.append(process)
        return found

    def machine_of(self, mark: str) -> str:
        """The machine id of the daemon the ``mark`` node runs below."""
        node = self.node(mark).pid
        for machine in self.cluster.machines:
            if node in self.cluster.daemon(machine).below():
                return machine
        raise AssertionError(f"{mark} runs below no daemon")

    def everything(self) -> list[psutil.Process]:
        """The coordinator, the daemons and every node: what must be gone after the run."""
        pids = []
        for process in self.cluster.processes.values():
            assert process.popen is not None  # spawned by this cluster
            pids.append(process.popen.pid)
        pids += [*self.cluster.node_processes(), *self.seen]
        if self.dataflow.process is not None:
            pids.append(self.dataflow.process.pid)
        found = []
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                found.append(psutil.Process(pid))
        return found

    def close(self) -> None:
        self.http.close()
        processes = self.everything()
        self.dataflow.stop(grace_s=STOP_GRACE_S)
        self.dataflow.kill()
        if self.log is not None:
            self.log.close()
        alive = survivors(processes, STOP_GRACE_S)
        assert not alive, f"processes outlived the split cell: {alive}\n{self.tail()}"


def _launch(directory: Path, attempt: int) -> SplitCell:
    run_dir = directory / f"run-{attempt}"
    run_dir.mkdir(parents=True)
    copy = private_copy(SPLIT, run_dir)
    pinned = with_working_dirs(copy, run_dir / "sim-split.cluster.yml")
    port = free_port()
    journal = run_dir / "gateway.journal"
    env = dora_environment(
        os.environ,
        DORAFORGE_GATEWAY_PORT=str(port),
        DORAFORGE_GATEWAY_JOURNAL=str(journal),
        **SIM_ENV,
    )
    cluster = LocalCluster(machine_ids(copy), env, run_dir / "cluster")
    log_path = run_dir / "dora-start.log"
    log = log_path.open("wb")  # open while the cell lives: a restart writes to it too
    cell = SplitCell(
        ClusterDataflow(pinned, env, log, cluster=cluster),
        cluster,
        port=port,
        log_path=log_path,
        journal=journal,
    )
    cell.log = log
    try:
        cell.split.start()
    except BaseException:
        log.close()
        raise
    return cell


@contextlib.contextmanager
def split_cell(directory: Path) -> Iterator[SplitCell]:
    """The split cell, ready when its robot tools are (retried once on a lost port)."""
    for attempt in (1, 2):
        cell = _launch(directory, attempt)

        def settled(c: SplitCell = cell) -> bool:
            return (
                all(c.ready(t) for t in SIM_TOOLS) or c.port_conflict() or not c.dataflow.running()
            )

        try:
            eventually(
                settled,
                within=START_TIMEOUT_S,
                what="the split cell to be ready, lose its port or exit",
                detail=cell.tail,
                interval=0.2,
            )
            if all(cell.ready(t) for t in SIM_TOOLS) and cell.owns_port():
                yield cell
                return
            if not cell.port_conflict() or attempt == 2:
                pytest.fail(f"the split cell did not become ready\n{cell.tail()}")
        finally:
            cell.close()


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SplitCell]:
    with split_cell(tmp_path_factory.mktemp("sim-split")) as running:
        yield running


def scene(cell: MockStack) -> dict[str, Any]:
    response = cell.http.post("/tools/world/scene_state:invoke", json={"arguments": {}})
    result = cell.data(response)["response"]["result"]
    assert result["status"] == "succeeded", result
    return dict(result["outputs"])


# ------------------------------------------------------------------ doraforge run


def _cli_env(tmp_path: Path, port: int) -> dict[str, str]:
    return dora_environment(
        {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)},
        DORAFORGE_GATEWAY_PORT=str(port),
        DORAFORGE_GATEWAY_JOURNAL=str(tmp_path / "gateway.journal"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        **SIM_ENV,
    )


def _scene_answers(port: int) -> bool:
    with contextlib.suppress(Exception):
        response = httpx.post(
            f"http://127.0.0.1:{port}/tools/world/scene_state:invoke",
            json={"arguments": {}},
            timeout=2.0,
        )
        result = response.json()["data"]["response"]["result"]
        return bool(result["status"] == "succeeded")
    return False


def _below(root: psutil.Process, seen: dict[int, psutil.Process]) -> bool:
    """Remember every process below ``root`` (daemons, coordinator, nodes); always True."""
    for child in descendants(root):
        seen.setdefault(child.pid, child)
    return True


def _doraforge_run(arguments: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``doraforge run ARGUMENTS`` from the project folder, its output to ``log``."""
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "doraforge.cli", "run", *arguments],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def test_doraforge_run_starts_daemons_per_machine_and_sigterm_stops_everything(
    tmp_path: Path,
) -> None:
    port = free_port()
    log = tmp_path / "run.log"
    process = _doraforge_run(["dataflows/sim-split.yml"], _cli_env(tmp_path, port), log)
    root = psutil.Process(process.pid)
    seen: dict[int, psutil.Process] = {}
    try:
        eventually(
            lambda: _below(root, seen) and _scene_answers(port),
            within=START_TIMEOUT_S,
            what="the split cell under doraforge run to answer",
            detail=lambda: log.read_text(errors="replace")[-3000:],
        )
        _below(root, seen)
        commands = [" ".join(p.cmdline()) for p in seen.values() if p.is_running()]
        daemons = [c for c in commands if " daemon " in f" {c} "]
        assert len(daemons) == 2, commands
        assert any("--machine-id robot" in c for c in daemons)
        assert any("--machine-id workstation" in c for c in daemons)
        assert all("6013" not in c.split() for c in commands)
        process.send_signal(signal.SIGTERM)
        # 0: a clean stop; 1 (RUN_KILLED): nodes outlived the 3 s grace on a loaded
        # machine and were killed. Either way nothing may be left (checked below).
        assert process.wait(timeout=30) in (0, 1), log.read_text(errors="replace")[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert survivors(seen.values(), STOP_GRACE_S) == []
    text = log.read_text(errors="replace")
    assert "machines robot, workstation: one Dora daemon each on this host" in text


def test_doraforge_run_on_an_existing_coordinator_starts_and_stops_only_the_dataflow(
    tmp_path: Path,
) -> None:
    port = free_port()
    env = _cli_env(tmp_path, port)
    copy = private_copy(SPLIT, tmp_path / "flow")
    # On real machines the Gateway node's deploy.working_dir names where its config is.
    pinned = with_working_dirs(copy, tmp_path / "flow" / "sim-split.pinned.yml")
    cluster = LocalCluster(machine_ids(copy), env, tmp_path / "cluster").up()
    try:
        log = tmp_path / "run.log"
        process = _doraforge_run([str(pinned), "--coordinator", str(cluster.address)], env, log)
        try:
            eventually(
                lambda: _scene_answers(port),
                within=START_TIMEOUT_S,
                what="the split cell on the existing coordinator to answer",
                detail=lambda: log.read_text(errors="replace")[-3000:],
            )
            # doraforge started no coordinator or daemon of its own.
            own = descendants(process.pid)
            assert not [p for p in own if "dora daemon" in " ".join(p.cmdline())]
            nodes = [psutil.Process(pid) for pid in cluster.node_processes()]
            assert len(nodes) >= 5
            process.send_signal(signal.SIGTERM)
            # 0: a clean stop; 1 (RUN_KILLED): nodes outlived the 3 s grace on a loaded
            # machine and were killed. Either way nothing may be left (checked below).
            assert process.wait(timeout=30) in (0, 1), log.read_text(errors="replace")[-3000:]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert survivors(nodes, STOP_GRACE_S) == []
        # The cluster it attached to is still there, with nothing of the run left.
        assert cluster.registered() == {"robot", "workstation"}
        assert cluster.node_processes() == {}
    finally:
        cluster.down()
    assert [p.role for p in cluster.processes.values() if p.alive()] == []


def test_sigterm_while_the_daemons_come_up_leaves_nothing_running(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "run.log"
    process = _doraforge_run(["dataflows/sim-split.yml"], _cli_env(tmp_path, port), log)
    root = psutil.Process(process.pid)
    seen: dict[int, psutil.Process] = {}

    def coordinator_started() -> bool:
        _below(root, seen)
        for child in list(seen.values()):
            with contextlib.suppress(psutil.Error):
                if "coordinator" in child.cmdline():
                    return True
        return False

    try:
        eventually(coordinator_started, within=60.0, what="the coordinator to start")
        process.send_signal(signal.SIGTERM)  # the daemons are registering (or just did)
        # 0: a clean stop; 1 (RUN_KILLED): nodes outlived the 3 s grace on a loaded
        # machine and were killed. Either way nothing may be left (checked below).
        assert process.wait(timeout=30) in (0, 1), log.read_text(errors="replace")[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert survivors(seen.values(), STOP_GRACE_S) == []
    assert not _scene_answers(port)


# ------------------------------------------------------------------ the module's split cell
# (after the doraforge run rows, so its unpaced world does not run beside their cells)


def test_the_nodes_run_on_the_daemons_their_machines_name(cell: SplitCell) -> None:
    assert machine_ids(SPLIT) == ["robot", "workstation"]
    assert cell.machine_of(GATEWAY_MARK) == "workstation"
    assert cell.machine_of("-m doraforge.nodes.camera") == "workstation"
    for mark in ROBOT_MARKS:
        assert cell.machine_of(mark) == "robot"


def test_a_query_and_an_action_reach_the_robot_daemon(cell: SplitCell) -> None:
    # Ready includes world.scene_state's endpoint_ready: the world has stepped.
    state = scene(cell)
    assert state["sim_time"] >= 0
    final = cell.terminal(cell.admit("arm.home", {}), timeout_s=60.0)
    assert final["phase"] == "completed", final
    # Joint state crossed daemons: the Gateway's observation cache holds a fresh one.
    joints = cell.data(cell.http.get("/observations/state"))["joint_state"]
    assert len(joints["position"]) >= 6


def test_a_camera_frame_crosses_daemons(cell: SplitCell) -> None:
    latest = cell.http.get("/observations/images/scene/latest")
    assert latest.status_code == 200, latest.text
    assert latest.headers["content-type"] == "image/jpeg"
    assert latest.content[:2] == b"\xff\xd8"  # a JPEG, rendered on the robot machine
    capture = cell.http.post(
        "/tools/camera/capture:invoke", json={"arguments": {"source": "scene"}}
    )
    result = cell.data(capture)["response"]["result"]
    assert result["status"] == "succeeded", result


def _zenoh_segments(pid: int) -> set[str]:
    """The Zenoh shared-memory segments a process maps (``/dev/shm/<id>.zenoh``)."""
    maps = Path(f"/proc/{pid}/maps").read_text(encoding="utf-8", errors="replace")
    return {line.split()[-1] for line in maps.splitlines() if line.endswith(".zenoh")}


def test_frames_cross_daemons_over_the_network_path_not_shared_memory(cell: SplitCell) -> None:
    """Two computers share no memory: on one host the daemons must not either (the cluster
    overlay turns Zenoh's shared-memory transport off), or the test would not be the one
    deployments run."""
    latest = cell.http.get("/observations/images/scene/latest")
    assert latest.status_code == 200, latest.text  # frames have crossed by now
    robot = _zenoh_segments(cell.cluster.daemon("robot").pid)
    workstation = _zenoh_segments(cell.cluster.daemon("workstation").pid)
    assert robot & workstation == set()


def _kill_machine(cell: SplitCell, machine: str) -> None:
    """The robot computer goes away: its daemon and every node below it, SIGKILL."""
    daemon = cell.cluster.daemon(machine)
    nodes = daemon.below()
    cell.seen.update(nodes)
    daemon.kill()
    for pid in nodes:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    psutil.wait_procs([psutil.Process(p) for p in nodes if psutil.pid_exists(p)], timeout=10)


# The module's cell, last: the robot machine dies and the cell is recovered by a restart.
def test_the_robot_daemon_dying_mid_action_ends_it_unknown_and_recovers(cell: SplitCell) -> None:
    run = cell.admit("arm.home", {})
    assert cell.terminal(run, timeout_s=60.0)["phase"] == "completed"
    origin = scene(cell)["gripper"]["tool_position"]
    target = [origin[0], origin[1] - 0.25, origin[2] - 0.1]
    admitted = cell.start("arm.move_to_pose", {"position": target, "speed": 0.02})
    invocation_id = admitted["invocation_id"]
    cell.poll(invocation_id, lambda s: s["phase"] == "running", 30.0)
    _kill_machine(cell, "robot")

    final = cell.terminal(invocation_id, timeout_s=60.0)
    assert final["phase"] == "unknown", final
    assert final["result"]["status"] == "unknown", final
    # The robot's tools report themselves unavailable, with a structured error.
    eventually(
        lambda: not cell.ready("arm.move_to_pose"),
        within=60.0,
        what="arm.move_to_pose to become unavailable",
    )
    refused = cell.invoke("arm.home", {})
    assert refused.status_code == 503, refused.text
    error = refused.json()["error"]
    assert error["code"] == "FORGE_TOOL_ENDPOINT_UNAVAILABLE", error
    assert error["retryable"] is True
    assert error["details"] == {"endpoint_id": "arm"}
    query = cell.http.post("/tools/world/scene_state:invoke", json={"arguments": {}})
    assert query.status_code == 503, query.text
    assert query.json()["error"]["code"] == "FORGE_TOOL_ENDPOINT_UNAVAILABLE"
    assert cell.context("arm.move_to_pose")["readiness"]["endpoint_registered"] is False

    # Recovery in Dora 1.1: the robot daemon comes back, and the dataflow is
    # started again on the same coordinator (a returning daemon gets no nodes of a
    # dataflow that was running).
    cell.cluster.restart_daemon("robot")
    assert cell.cluster.registered() == {"robot", "workstation"}
    assert cell.cluster.daemon("robot").below() == {}  # no node came back with it
    assert not cell.ready("arm.move_to_pose")
    cell.seen.update(cell.cluster.node_processes())
    cell.split.restart()
    eventually(
        lambda: all(cell.ready(tool) for tool in SIM_TOOLS),
        within=START_TIMEOUT_S,
        what="the restarted split cell to be ready",
        detail=cell.tail,
    )
    run = cell.admit("arm.home", {})
    assert cell.terminal(run, timeout_s=60.0)["phase"] == "completed"
    # The invocation lost with the robot stays unknown across the restart.
    assert cell.status(invocation_id)["phase"] == "unknown"
