"""The Skill Runtime across machines on real Dora: the shipped pick-place ``sim-split``
profile on this home's coordinator with one local daemon per machine id, a skill attached
to a coordinator someone else (the test, through :class:`LocalCluster`) runs, and two
skills side by side on ``--port auto``.

Daemons are told apart by machine id only, on this host's own network stack; their data
crosses through Zenoh over TCP on loopback (``tests/e2e/test_network_namespaces.py``
puts a daemon on a host of its own). Cameras render at 2 Hz and physics runs
unpaced, to keep the slow tier short. Every test ends with no coordinator, daemon or node
process of its own left (psutil).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from doraforge.cli import main
from doraforge.paos.gateway_auth import bearer
from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.archive import pack
from doraforge.skill_runtime.cluster import LocalCluster
from doraforge.skill_runtime.dora import node_pids
from doraforge.skill_runtime.dora_run import descendants, dora_environment, free_port
from doraforge.skill_runtime.errors import RuntimeStateError
from doraforge.skill_runtime.gateway_tokens import runtime_token
from doraforge.skill_runtime.installer import Installer
from doraforge.skill_runtime.runtime import AUTO_PORT, RuntimeManager
from doraforge.skill_runtime.runtime_state import RuntimeState, read_state
from doraforge.skills import source as skill_source
from tests.e2e.conftest import SIM_ENV
from tests.skill_runtime.runtime_support import (
    MOCK_DATAFLOW,
    dora_processes,
    make_bundle,
    torn_down_home,
)
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PICK_PLACE = "pick-place"
MACHINE_OF = {
    "-m doraforge.gateway": "workstation",
    "-m doraforge.nodes.camera": "workstation",
    "-m doraforge.nodes.world": "robot",
    "-m doraforge.nodes.arm": "robot",
    "-m doraforge.nodes.gripper": "robot",
}
CELL_ENV = {**SIM_ENV, "DORAFORGE_SIM_CAMERA_HZ": "2"}
# The mock cell split over two machines; its Gateway config by absolute path, as nodes on
# another coordinator's daemons run in those daemons' own working directories.
SPLIT_MOCK = (
    MOCK_DATAFLOW.replace(
        "--config gateway.yml", "--config ${PAOS_SKILL_ROOT}/profiles/mock/gateway.yml"
    )
    .replace("  - id: gateway\n", "  - id: gateway\n    deploy: {machine: workstation}\n")
    .replace("  - id: mock\n", "  - id: mock\n    deploy: {machine: robot}\n")
)
STOP_WAIT_S = 20.0


@pytest.fixture
def home(tmp_path: Path) -> Iterator[PaosHome]:
    with torn_down_home(tmp_path) as home:
        yield home


def _manager(home: PaosHome, **env: str) -> RuntimeManager:
    return RuntimeManager(
        home, environ=dora_environment(os.environ, **CELL_ENV, **env), stop_grace_s=3.0
    )


def _install_pick_place(home: PaosHome, tmp_path: Path) -> None:
    packed = pack(skill_source(PICK_PLACE), tmp_path / f"{PICK_PLACE}.tar.gz")
    Installer(home).install(str(packed.path), yes=True)


class Gateway:
    """A started skill's Gateway, dialled as every later command dials it (its state URL
    and its runtime's token)."""

    def __init__(self, state: RuntimeState):
        self.http = httpx.Client(
            base_url=state.gateway_url, headers=bearer(runtime_token(state)), timeout=10.0
        )

    def scene(self) -> dict[str, Any] | None:
        """The world's scene state, ``None`` until it has stepped once."""
        response = self.http.post("/tools/world/scene_state:invoke", json={"arguments": {}})
        result = response.json()["data"]["response"]["result"]
        return result["outputs"] if result["status"] == "succeeded" else None

    def admitted(self, tool_id: str) -> str | None:
        """Admit ``tool_id`` (no arguments); ``None`` while it is refused as retryable (the
        arm has no joint state from the other daemon yet)."""
        response = self.http.post(f"/tools/{tool_id}:invoke", json={"arguments": {}})
        if response.status_code == 422 and response.json()["error"]["retryable"]:
            return None
        assert response.status_code == 202, response.text
        return str(response.json()["data"]["invocation_id"])

    def status(self, invocation_id: str) -> dict[str, Any]:
        return dict(self.http.get(f"/invocations/{invocation_id}").json()["data"])

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()


def _machine_of(state: RuntimeState) -> dict[str, str]:
    """Each node's mark (see :data:`MACHINE_OF`) to the machine whose daemon it runs below."""
    found: dict[str, str] = {}
    for machine, daemon in state.machines.items():
        assert daemon.pid is not None
        for pid in descendants(daemon.pid):
            with contextlib.suppress(psutil.Error):
                line = " ".join(psutil.Process(pid).cmdline())
                found.update({mark: machine for mark in MACHINE_OF if mark in line})
    return found


def _still_alive(pids: list[int]) -> list[psutil.Process]:
    processes = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            processes.append(psutil.Process(pid))
    _, alive = psutil.wait_procs(processes, timeout=STOP_WAIT_S)
    return [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def test_a_profile_on_machines_runs_one_local_daemon_each_and_stop_leaves_nothing(
    home: PaosHome, tmp_path: Path
) -> None:
    _install_pick_place(home, tmp_path)
    runtime = _manager(home)

    state = runtime.start(PICK_PLACE, "sim-split", port=AUTO_PORT)

    assert state.state == "running"
    assert not state.coordinator_attached
    assert sorted(state.machines) == ["robot", "workstation"]
    for machine, daemon in state.machines.items():
        assert daemon.daemon_id is not None
        assert daemon.daemon_id.startswith(f"{machine}-")
    assert state.gateway_url != "http://127.0.0.1:9201"  # auto: not the manifest's port
    assert _machine_of(state) == MACHINE_OF
    assert runtime.status(PICK_PLACE) == state
    with Gateway(state) as gateway:
        scene = eventually(gateway.scene, within=60.0, what="the world on robot to step")
        assert scene["sim_time"] >= 0
        invocation = eventually(
            lambda: gateway.admitted("arm.home"), within=60.0, what="arm.home to be admitted"
        )
        final = eventually(
            lambda: (s := gateway.status(invocation))["terminal"] and s,
            within=60.0,
            what="arm.home to end",
        )
        assert final["phase"] == "completed", final
    # The logs of a node on either machine are read while it runs (from the launch folder,
    # where the daemons run them; a daemon asked for them looks in its own folder).
    for node in ("gateway", "world"):
        logs = runtime.logs(PICK_PLACE, 50, node=node, keep_dora=True)
        assert logs.startswith(f"== dataflow {state.dataflow_uuid} node {node} ==")
        assert "(dora logs:" not in logs, logs
    coordinator = {p.pid for p in dora_processes(state.coordinator_port)}
    daemons = [d.pid for d in state.machines.values() if d.pid is not None]
    nodes = node_pids(state.dataflow_uuid or "")
    assert set(daemons) <= coordinator
    assert len(nodes) >= 5

    stopped = runtime.stop(PICK_PLACE)

    assert stopped.state == "stopped"
    assert _still_alive([*coordinator, *daemons, *nodes]) == []
    services = json.loads((home.runtime_dir / "dora.json").read_text())
    assert services["machines"] == {}
    # The node logs outlive the dataflow (Dora reads them from the launch folder).
    assert f"== dataflow {state.dataflow_uuid}" in runtime.logs(PICK_PLACE, 50)


@contextlib.contextmanager
def _cluster(tmp_path: Path, machines: list[str]) -> Iterator[LocalCluster]:
    """A coordinator and daemons the test runs itself, as a lab's machines would."""
    env = dora_environment(os.environ, **CELL_ENV)
    cluster = LocalCluster(machines, env, tmp_path / "cluster").up()
    try:
        yield cluster
    finally:
        cluster.down()
        assert [p.role for p in cluster.processes.values() if p.alive()] == []


def test_a_skill_attached_to_an_existing_coordinator_leaves_it_up_when_stopped(
    home: PaosHome, tmp_path: Path
) -> None:
    make_bundle(home, gateway_port=free_port(), dataflow=SPLIT_MOCK)
    make_bundle(home, gateway_port=free_port(), name="on-camera", dataflow=_on_machine("camera"))
    runtime = _manager(home)
    with _cluster(tmp_path, ["robot", "workstation"]) as cluster:
        with pytest.raises(RuntimeStateError) as missing:
            runtime.start("on-camera", coordinator=cluster.address)
        assert missing.value.code == "SKILL_MACHINE_MISSING"
        assert missing.value.details["missing"] == ["camera"]
        assert read_state(home.runtime_dir, "on-camera") is None

        state = runtime.start("mock-skill", port=AUTO_PORT, coordinator=cluster.address)

        assert state.coordinator_attached
        # Another home may run the same skill on a shared coordinator: a name of its own.
        assert state.dataflow_name.startswith("mock-skill-")
        assert (state.coordinator_host, state.coordinator_port) == (
            cluster.address.host,
            cluster.address.port,
        )
        assert {m: d.pid for m, d in state.machines.items()} == {"robot": None, "workstation": None}
        assert all(d.daemon_id for d in state.machines.values())
        nodes = cluster.node_processes()
        assert len(nodes) >= 2  # the Gateway and the provider, below the cluster's daemons
        answered = httpx.get(f"{state.gateway_url}/tools", headers=bearer(runtime_token(state)))
        assert answered.status_code == 200
        assert not (home.runtime_dir / "dora.json").exists()  # no coordinator of its own

        stopped = runtime.stop("mock-skill")

        assert stopped.state == "stopped"
        assert _still_alive(list(nodes)) == []
        assert cluster.registered() == {"robot", "workstation"}
        assert [p.role for p in cluster.processes.values() if not p.alive()] == []
        assert cluster.node_processes() == {}
        assert not (home.runtime_dir / "dora.json").exists()


def _on_machine(machine: str) -> str:
    return SPLIT_MOCK.replace("machine: workstation", f"machine: {machine}").replace(
        "machine: robot", f"machine: {machine}"
    )


def test_two_skills_with_port_auto_run_side_by_side_from_one_manifest_port(
    home: PaosHome, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()  # both manifests name this one port
    for name in ("cell-a", "cell-b"):
        make_bundle(home, gateway_port=port, name=name)
    runtime = _manager(home)

    code = main(["--home", str(home.root), "--json", "skill", "start", "cell-a", "--port", "auto"])
    assert code == 0, capsys.readouterr().err
    first = read_state(home.runtime_dir, "cell-a")
    second = runtime.start("cell-b", port=AUTO_PORT)

    assert first is not None
    assert first.state == "running"
    urls = {first.gateway_url, second.gateway_url}
    assert len(urls) == 2
    assert f"http://127.0.0.1:{port}" not in urls
    for state in (first, second):
        listing = httpx.get(f"{state.gateway_url}/tools", headers=bearer(runtime_token(state)))
        assert listing.json()["data"]["gateway"] == state.gateway_identity
    assert [s.name for s in runtime.running()] == ["cell-a", "cell-b"]

    for name in ("cell-a", "cell-b"):
        assert runtime.stop(name).state == "stopped"
    for state in (first, second):
        assert node_pids(state.dataflow_uuid or "") == []
