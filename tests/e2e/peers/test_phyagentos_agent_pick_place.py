"""PhyAgentOS 1.1.1's own agent runs a bound pick-and-place on doraforge's simulated cell,
and the same agent script runs unchanged through doraforge's own agent tools.

The agent is data (:data:`tests.e2e.peers.agent_script.PICK_PLACE`, PhyAgentOS's tool
shapes). First run: inside the PhyAgentOS venv, through PhyAgentOS's ``activate_skill``,
``forge_task`` and ``forge_tool_api`` tools, its ``AgentTaskCoordinator`` and binding
resolver, against the sim Gateway named by the ``gateway_url`` of a doraforge-packed
pick-place bundle that PhyAgentOS's ``SkillInstaller`` installed. Second run: the same
script through doraforge's ``TOOLS``, against the doraforge-installed pick-place skill
that doraforge's RuntimeManager started (its Gateway takes only its own bearer token).

Each run must reach success: the cube rests in the zone (read from the scene state
through the Gateway) and the task record says ``succeeded``. Any refused call fails the
test with the call and the answer.

The script's contract is PhyAgentOS's with mode ``off``: PhyAgentOS judges every other
mode with its LLM verifier (``ForgeTaskVerifier``) only, so without a model the task's
status comes from the execution facts on both sides, and the physical outcome is asserted
from the scene. PhyAgentOS's own evidence capture still runs (a scene frame and the joint
state from doraforge's ``/ws/images`` and ``/ws/state``, before and after).

PhyAgentOS presents no bearer token (its ``ForgeToolClient``, its RuntimeManager probes and
its ``/ws`` evidence collector send no ``Authorization``), so its run uses a loopback
Gateway without one, as its own RuntimeManager would start the bundle.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.dataflows import DATAFLOWS
from doraforge.paos.gateway_auth import http_client
from doraforge.skill_runtime.archive import pack
from doraforge.skill_runtime.gateway_tokens import GatewayTokens
from tests.e2e.conftest import SIM_TOOLS, MockStack, dataflow_stack
from tests.e2e.peers.agent_script import (
    PHYAGENTOS_AGENT,
    PICK_PLACE,
    SKILL,
    ScriptRefused,
    Transcript,
    doraforge_tools,
    phyagentos_tools,
    pick_place_moves,
    run_script,
)
from tests.e2e.sim_skill import started_sim, task_service
from tests.paths import PROJECT_ROOT
from tests.peers import phyagentos
from tests.support.skill_copies import skill_on_port
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

SOURCE = PROJECT_ROOT / "skills" / SKILL
SIM_DATAFLOW = DATAFLOWS / "sim.yml"


def _bundle_for(port: int, tmp_path: Path) -> Path:
    """The pick-place bundle as doraforge packs it, its Gateway moved to ``port``."""
    source = skill_on_port(SOURCE, tmp_path / "source" / SKILL, port)
    return pack(source, tmp_path / f"{SKILL}.tar.gz").path


def _scene(client: httpx.Client) -> dict[str, Any]:
    """The simulated cell's ground truth, through the Gateway's Tool API."""
    response = client.post("/tools/world/scene_state:invoke", json={"arguments": {}})
    assert response.status_code == 200, response.text
    outputs: dict[str, Any] = response.json()["data"]["response"]["result"]["outputs"]
    return outputs


def _assert_cube_rests_in_zone(client: httpx.Client) -> None:
    """The physical outcome: the world's resting-in-target predicate, and the cube's centre
    inside the zone's box on the table plane, on the same snapshot."""
    scene = eventually(
        lambda: (s := _scene(client))["predicates"]["cube_in_target_and_resting"] and s,
        within=15.0,
        what="the cube to rest inside the target zone",
        detail=lambda: _scene(client),
    )
    cube, zone = scene["objects"]["cube"]["position"], scene["target_zone"]
    for axis in (0, 1):
        assert abs(cube[axis] - zone["center"][axis]) <= zone["half_extents"][axis], scene


def _moves(transcript: Transcript) -> int:
    """How many Actions the agent planned from the scene its own query read."""
    return len(pick_place_moves(transcript.kept["scene"]))


def _assert_followed_the_script(transcript: Transcript) -> None:
    names = [name for name in transcript.names() if name != "forge_tool_action_result"]
    assert names == [
        "activate_skill",
        "forge_task_create",
        "forge_tool_context",
        "forge_tool_query",
        *["forge_tool_start_action", "forge_tool_action_status"] * _moves(transcript),
        "forge_task_finalize",
        "forge_task_get",
    ]


# ------------------------------------------------------------------ PhyAgentOS's agent


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[phyagentos.Session]:
    """PhyAgentOS's agent process, importing PhyAgentOS while the cell starts."""
    with phyagentos.Session(
        PHYAGENTOS_AGENT,
        log=tmp_path / "phyagentos.log",
        PAOS_HOME=str(tmp_path / "phyagentos-home"),
    ) as running:
        yield running


@pytest.fixture
def cell(tmp_path: Path) -> Iterator[MockStack]:
    """``dataflows/sim.yml`` on a free port, paced as the skill's profile runs it: unpaced
    physics keeps a core busy, and the arm and gripper controllers (on wall time) would
    share what is left with PhyAgentOS's agent on this two-core machine."""
    env = {"DORAFORGE_LOG_LEVEL": "WARNING"}
    with dataflow_stack(tmp_path / "sim", SIM_DATAFLOW, SIM_TOOLS, env, 120.0) as running:
        yield running


def _run_in_phyagentos(
    peer: phyagentos.Session, cell: MockStack, tmp_path: Path
) -> tuple[dict[str, Any], Transcript]:
    assert peer.ready() == {"imported": True}
    setup = peer.request(
        {
            "archive": str(_bundle_for(cell.port, tmp_path)),
            "image_sources": ["scene"],
            "user_message": "put the red cube in the green zone",
        }
    )
    transcript = asyncio.run(run_script(PICK_PLACE, phyagentos_tools(peer), side="PhyAgentOS"))
    # The same peer refuses a shape it does not take (doraforge's ``skill`` extension):
    # the script's calls were accepted because their shapes are PhyAgentOS's own.
    doraforge_only = [{"call": "forge_task_create", "arguments": {"skill": SKILL}}]
    with pytest.raises(ScriptRefused, match="Invalid parameters for tool 'forge_task_create'"):
        asyncio.run(run_script(doraforge_only, phyagentos_tools(peer), side="PhyAgentOS"))
    return setup, transcript


def test_phyagentos_agent_tools_run_a_bound_pick_and_place_on_the_sim_gateway(
    peer: phyagentos.Session, cell: MockStack, tmp_path: Path
) -> None:
    setup, transcript = _run_in_phyagentos(peer, cell, tmp_path)

    assert setup["gateway_url"] == cell.base_url  # from the installed bundle's manifest
    assert all(setup["tools_ready"].values()), setup
    _assert_cube_rests_in_zone(cell.http)
    _assert_followed_the_script(transcript)
    task = transcript.kept["task"]
    records = [r for revision in task["revisions"] for r in revision["execution_records"]]
    assert task["status"] == "succeeded", _phyagentos_summary(task, records)
    binding = task["primary_skill_binding"]
    assert (binding["skill_name"], binding["gateway_url"]) == (SKILL, cell.base_url)
    assert binding["gateway_identity"] == setup["gateway_identity"] == cell.gateway_instance()
    assert [r["semantics"] for r in records] == ["query", *["action"] * _moves(transcript)]
    assert {r["status"] for r in records} == {"succeeded"}
    assert all(r["invocation_id"] and r["attempt_id"] for r in records[1:])
    _assert_evidence_captured(task, Path(setup["workspace"]))


def _outcome(record: dict[str, Any]) -> Any:
    """An Action record's error, else its result's status, from the Gateway's answer."""
    data = (record.get("response") or {}).get("data") or {}
    result = data.get("result") or {}
    return record.get("error") or result.get("error") or result.get("status")


def _phyagentos_summary(task: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """What a failed PhyAgentOS task says about itself, one line per record."""
    lines = [f"{r['tool_id']} {r['status']}: {_outcome(r)}" for r in records]
    return "\n".join([*lines, f"evidence_errors: {task['evidence_errors']}"])


def _assert_evidence_captured(task: dict[str, Any], workspace: Path) -> None:
    """PhyAgentOS's own evidence capture over doraforge's ``/ws/images`` and ``/ws/state``:
    a scene frame before the first Action and after the last, no capture error."""
    assert task["evidence_errors"] == [], task["evidence_errors"]
    for reference in (task["before_snapshot_ref"], task["after_snapshot_ref"]):
        snapshot = json.loads((workspace / reference).read_text())
        entries = {e["kind"]: e for e in snapshot["entries"]}
        assert entries.keys() == {"rgb_image", "robot_state"}, snapshot
        assert entries["rgb_image"]["source_id"] == "scene"
        image = (workspace / entries["rgb_image"]["uri"]).read_bytes()
        assert image[:3] == b"\xff\xd8\xff"  # JPEG, as the Gateway streams it
        state = json.loads((workspace / entries["robot_state"]["uri"]).read_text())
        assert state["type"] == "state"  # a /ws/state message: the cell's joint state
        assert {"shoulder_pan", "gripper"} <= set(state["joint_state"]["name"]), state
    assert (workspace / task["evidence_bundle_ref"]).is_file()


# ------------------------------------------------------------------ doraforge's agent tools


@pytest.fixture
def sim_home(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    yield from started_sim(tmp_path)


def test_the_same_script_runs_unchanged_through_doraforges_agent_tools(
    sim_home: tuple[Any, Any],
) -> None:
    home, runtime = sim_home
    service = task_service(home, runtime)

    async def run() -> Transcript:
        try:
            return await run_script(PICK_PLACE, doraforge_tools(service), side="doraforge")
        finally:
            await service.aclose()

    transcript = asyncio.run(run())
    url = runtime.healthy_runtime(SKILL).gateway_url
    # The script named no Gateway and no token; this one answers only its runtime's token.
    assert httpx.get(f"{url}/tools", timeout=10).status_code == 401
    with http_client(url, GatewayTokens(home.runtime_dir)(url)) as client:
        _assert_cube_rests_in_zone(client)
    _assert_followed_the_script(transcript)
    task = transcript.kept["task"]
    records = task["records"]
    summary = "\n".join(f"{r['tool_id']} {r['state']}: {r['error']}" for r in records)
    assert (task["status"], task["task"]["state"]) == ("succeeded", "succeeded"), summary
    assert task["binding"]["skill"] == SKILL
    assert [r["semantics"] for r in records] == ["query", *["action"] * _moves(transcript)]
    assert {r["state"] for r in records[1:]} == {"completed"}
