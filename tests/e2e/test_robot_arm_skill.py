"""The shipped robot-arm skill on a forge-robot driver, through the ``doraforge`` CLI.

Its ``forge-robot-fake`` profile replaces the simulated world by a forge-robot driver node
(the fake-backend driver the bundle carries) with YAML only. The test packs the shipped
skill by name, installs the archive, starts the profile on its home's own Dora with the
Gateway on a free port (``skill start --port``), moves the arm and the gripper through the
Gateway's Actions, reads the driver's own joint state back through the Gateway, runs a
task bound to the skill through doraforge's agent tools to a verified success (the
skill's own contract), stops the skill, and checks that no process of it is left.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.paos.agent_tools import TOOLS
from doraforge.paos.gateway_auth import bearer
from doraforge.paos.home import PaosHome, open_service
from doraforge.paos.tasks import TaskService
from doraforge.skill_runtime.activation import activate_skill
from doraforge.skill_runtime.dora_run import free_port
from doraforge.skill_runtime.gateway_tokens import GatewayTokens
from doraforge.skill_runtime.runtime import RuntimeManager
from tests.skill_runtime.runtime_support import assert_nothing_runs, torn_down_home
from tests.support.waiting import eventually, eventually_async

pytestmark = pytest.mark.e2e

SKILL = "robot-arm"
PROFILE = "forge-robot-fake"
DORAFORGE = str(Path(sys.executable).with_name("doraforge"))
ARM_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow", "forearm_roll", "wrist_pitch", "wrist_roll")
TOLERANCE_RAD = 0.01
ACTION_TIMEOUT_S = 60.0
CLI_TIMEOUT_S = 180.0


def doraforge(home: PaosHome, tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run ``doraforge --home HOME --json ARGS`` to exit 0 and return its JSON answer."""
    environ = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    done = subprocess.run(
        [DORAFORGE, "--home", str(home.root), "--json", *args],
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert done.returncode == 0, f"doraforge {' '.join(args)}: {done.stderr[-2000:]}"
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


class Gateway:
    """The started skill's Gateway, called with its runtime's token."""

    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(base_url=url, headers=bearer(token), timeout=10.0)

    def data(self, response: httpx.Response, status: int = 200) -> Any:
        assert response.status_code == status, response.text
        body = response.json()
        assert body["ok"] is True, body
        return body["data"]

    def run(self, tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Admit an Action, wait for its terminal status and return it."""
        admitted = self.data(
            self.http.post(f"/tools/{tool_id}:invoke", json={"arguments": arguments}), 202
        )
        path = f"/invocations/{admitted['invocation_id']}"
        latest: dict[str, Any] = {}

        def terminal() -> bool:
            latest.update(self.data(self.http.get(path)))
            return bool(latest["terminal"])

        eventually(
            terminal,
            within=ACTION_TIMEOUT_S,
            what=f"{tool_id} to finish",
            detail=lambda: latest,
        )
        return latest

    def joint_state(self) -> dict[str, float]:
        """The driver's newest published ``state``, as the Gateway observed it, by joint."""
        state = self.data(self.http.get("/observations/state"))["joint_state"]
        return dict(zip(state["name"], state["position"], strict=True))


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[PaosHome, dict[str, Any]]]:
    """The shipped robot-arm skill packed by name, installed and started by the CLI with
    its Gateway on a free port (the shipped 9011 may be taken); always torn down."""
    with torn_down_home(tmp_path) as home:
        archive = tmp_path / f"{SKILL}.tar.gz"
        doraforge(home, tmp_path, "skill", "pack", SKILL, "--output", str(archive))
        installed = doraforge(home, tmp_path, "skill", "install", str(archive), "--yes")
        assert (installed["name"], installed["version"]) == (SKILL, "1.0.0")
        port = str(free_port())
        state = doraforge(
            home, tmp_path, "skill", "start", SKILL, "--profile", PROFILE, "--port", port
        )
        yield home, state


def succeeded(finished: dict[str, Any]) -> dict[str, Any]:
    """The outputs of a completed, succeeded invocation."""
    assert finished["phase"] == "completed", finished
    assert finished["result"]["status"] == "succeeded", finished
    outputs: dict[str, Any] = finished["result"]["outputs"]
    return outputs


async def call(service: TaskService, tool: str, arguments: dict[str, Any]) -> Any:
    """One of doraforge's ``forge_*`` agent tools, as an agent calls it; its data."""
    answer = await TOOLS[tool](service, arguments)
    assert answer["ok"] is True, answer
    return answer["data"]


async def bound_task(home: PaosHome) -> dict[str, Any]:
    """A task bound to the running skill: ``arm.home`` to completion, then finalize with the
    skill's own verification contract (its ``verification.yaml``)."""
    service = open_service(home, token_for=GatewayTokens(home.runtime_dir))
    runtime = RuntimeManager(home)
    service.activate_skill = lambda name: activate_skill(home, name, runtime)
    try:
        task_id = (await call(service, "forge_task_create", {"skill": SKILL}))["task"]["task_id"]
        started = await call(
            service,
            "forge_tool_start_action",
            {"task_id": task_id, "tool_id": "arm.home", "arguments": {}},
        )
        query = {"task_id": task_id, "record_id": started["record_id"]}

        async def finished() -> dict[str, Any] | None:
            answer = await call(service, "forge_tool_action_result", query)
            record: dict[str, Any] = answer["record"]
            return record if answer["status"] == "available" else None

        record = await eventually_async(finished, within=ACTION_TIMEOUT_S, what="arm.home")
        assert record["state"] == "completed", record
        described: dict[str, Any] = await call(service, "forge_task_finalize", {"task_id": task_id})
        return described
    finally:
        await service.aclose()
        service.store.close()


def test_the_installed_skill_moves_the_forge_robot_driver_through_the_gateway_and_stops_clean(
    started: tuple[PaosHome, dict[str, Any]], tmp_path: Path
) -> None:
    home, state = started
    assert (state["state"], state["profile"]) == ("running", PROFILE)
    assert state["gateway_url"] != "http://127.0.0.1:9011"
    token = Path(state["gateway_token_file"]).read_text(encoding="utf-8").strip()
    gateway = Gateway(state["gateway_url"], token)
    try:
        before = gateway.joint_state()
        target = {"shoulder_pan": 0.5, "elbow": 1.4, "wrist_roll": -0.3}
        moved = succeeded(gateway.run("arm.move_joints", {"positions": target, "speed": 1.5}))
        after = gateway.joint_state()
        for joint in ARM_JOINTS:
            expected = target.get(joint, before[joint])
            assert after[joint] == pytest.approx(expected, abs=TOLERANCE_RAD), joint
            assert moved["joints"][joint] == pytest.approx(expected, abs=TOLERANCE_RAD), joint

        grasp = succeeded(gateway.run("gripper.grasp", {"width": 0.02}))
        assert grasp["width"] == pytest.approx(0.02, abs=0.004)
        assert gateway.joint_state()["gripper"] == pytest.approx(0.01, abs=0.002)
        succeeded(gateway.run("gripper.release", {}))
        assert gateway.joint_state()["gripper"] == pytest.approx(0.04, abs=0.002)
        described = asyncio.run(bound_task(home))
        assert described["task"]["state"] == "succeeded", described["task"]
        assert gateway.joint_state()["elbow"] == pytest.approx(1.92, abs=TOLERANCE_RAD)  # home
    finally:
        gateway.http.close()

    stopped = doraforge(home, tmp_path, "skill", "stop", SKILL)

    assert stopped["state"] == "stopped"
    assert_nothing_runs(home, state["dataflow_uuid"])
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{state['gateway_url']}/tools")
