"""The forge.* robot tools as semantic tools: names, grants and risk, PAOS failures as tool
failures, and the context reads, called through the registry and over MCP."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.paos.agent_tools import TOOLS, AgentTool
from doraforge.paos.errors import PaosError
from doraforge.paos.home import PaosHome
from doraforge.registry.model import Principal
from doraforge.registry.robot_tools import RobotTools, register_robot_tools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import call_body, running

BOTH = frozenset({"robot.read", "robot.write"})
ACCEPT = "application/json, text/event-stream"


@dataclass
class FakeTaskService:
    """Answers the few TaskService methods these tests reach."""

    actions: list[tuple[str, str]] = field(default_factory=list)
    closed: bool = False

    def describe(self, task_id: str) -> dict[str, Any]:
        if task_id == "missing":
            raise PaosError("PAOS_TASK_NOT_FOUND", "no such task", details={"task_id": task_id})
        times = {"created_at_ms": 1, "updated_at_ms": 1, "terminal_at_ms": None}
        task: dict[str, Any] = {
            "task_id": task_id,
            "binding_id": "b1",
            "goal": "g",
            "contract": {},
            **times,
        }
        revision = {"revision_id": "rev1", "ordinal": 1, "reason": "initial plan"}
        return {
            "task": {**task, "state": "executing", "replans_used": 0, "outcome": None},
            "binding": None,
            "revisions": [{**revision, "verdict": None, "created_at_ms": 1}],
            "records": [],
            "evidence": [],
            "verifications": [],
        }

    async def start_action(
        self, task_id: str, tool_id: str, arguments: dict[str, Any], *, timeout_ms: Any = None
    ) -> dict[str, Any]:
        self.actions.append((task_id, tool_id))
        return {"record_id": "r1", "tool_id": tool_id, "state": "intent", "invocation_id": None}

    async def aclose(self) -> None:
        self.closed = True

    @property
    def store(self) -> Any:
        return self

    def close(self) -> None:
        pass


@dataclass
class FakeRuntime:
    def status(self, name: str) -> Any:
        if name == "broken":
            raise PaosError("SKILL_NOT_INSTALLED", "not installed")
        return None


def _robot(tmp_path: Path, fake: FakeTaskService) -> RobotTools:
    return RobotTools(PaosHome(tmp_path), lambda: fake, FakeRuntime)


def _principal(*, grants: frozenset[str] = BOTH, approvals: frozenset[str] = frozenset()) -> Any:
    return Principal(id="t", scope="agent", grants=grants, approvals=approvals)


def test_every_agent_tool_is_a_forge_entry_with_its_provider_name(tmp_path: Path) -> None:
    service = new_service(ServerSettings())
    names = register_robot_tools(service, _robot(tmp_path, FakeTaskService()))
    entries = {e.name: e for e in service.entries()}
    assert len(names) == len(TOOLS) + 5  # + three context reads and two frame reads
    for provider in TOOLS:
        entry = entries["forge." + provider.removeprefix("forge_")]
        assert entry.providerName == provider
    assert entries["forge.task_get"].policy.requiredCapabilities == ["robot.read"]
    assert entries["forge.task_get"].policy.sideEffect == "read"
    assert entries["forge.task_finalize"].policy.requiredCapabilities == ["robot.write"]
    assert entries["forge.tool_start_action"].policy.risk == "high"
    assert entries["forge.tool_start_session"].policy.risk == "high"
    assert {"forge.skills.installed", "forge.runtime.status", "forge.tool_contexts"} <= set(names)


def test_each_forge_entry_has_the_side_effect_and_risk_its_agent_tool_declares(
    tmp_path: Path,
) -> None:
    service = new_service(ServerSettings())
    register_robot_tools(service, _robot(tmp_path, FakeTaskService()))
    for provider, tool in TOOLS.items():
        assert tool.side_effect in ("read", "write"), provider
        assert tool.risk in ("low", "medium", "high", "critical"), provider
        entry = service.resolve(provider)
        assert entry is not None
        assert (entry.policy.sideEffect, entry.policy.risk) == (tool.side_effect, tool.risk)
        grant = "robot.write" if tool.side_effect == "write" else "robot.read"
        assert entry.policy.requiredCapabilities == [grant]


@pytest.mark.anyio
async def test_an_agent_tool_without_a_declaration_is_a_high_risk_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[dict[str, Any]] = []

    async def handler(_service: Any, arguments: dict[str, Any]) -> Any:
        ran.append(arguments)
        return {"done": True}

    schema = {"type": "object", "additionalProperties": False, "properties": {}}
    monkeypatch.setitem(
        TOOLS, "forge_new_thing", AgentTool("forge_new_thing", "Unclassified.", schema, handler)
    )
    service = new_service(ServerSettings())
    register_robot_tools(service, _robot(tmp_path, FakeTaskService()))
    entry = service.resolve("forge.new_thing")
    assert entry is not None
    assert (entry.policy.sideEffect, entry.policy.risk) == ("write", "high")
    assert entry.policy.requiredCapabilities == ["robot.write"]
    approval = frozenset({"forge.new_thing"})
    reader = _principal(grants=frozenset({"robot.read"}), approvals=approval)
    unapproved = await service.call(call_body("forge.new_thing", {}, "n-1"), _principal())
    ungranted = await service.call(call_body("forge.new_thing", {}, "n-2"), reader)
    assert unapproved["error"]["code"] == "TOOL_APPROVAL_REQUIRED"
    assert ungranted["error"]["code"] == "TOOL_CAPABILITY_DENIED"
    assert ran == []
    done = await service.call(
        call_body("forge.new_thing", {}, "n-3"), _principal(approvals=approval)
    )
    assert done["state"] == "completed"
    assert ran == [{}]


@pytest.mark.anyio
async def test_a_read_runs_and_a_paos_error_is_a_failed_result(tmp_path: Path) -> None:
    service = new_service(ServerSettings())
    register_robot_tools(service, _robot(tmp_path, FakeTaskService()))
    done = await service.call(call_body("forge_task_get", {"task_id": "t1"}), _principal())
    assert done["state"] == "completed"
    assert done["result"]["task"]["task_id"] == "t1"
    failed = await service.call(
        call_body("forge.task_get", {"task_id": "missing"}, "r-2"), _principal()
    )
    assert failed["state"] == "failed"
    assert failed["error"]["code"] == "PAOS_TASK_NOT_FOUND"


@pytest.mark.anyio
async def test_motion_needs_the_write_grant_and_an_approval(tmp_path: Path) -> None:
    fake = FakeTaskService()
    service = new_service(ServerSettings())
    register_robot_tools(service, _robot(tmp_path, fake))
    arguments = {"task_id": "t1", "tool_id": "arm.move", "arguments": {}}
    unapproved = await service.call(
        call_body("forge_tool_start_action", arguments, "a-1"), _principal()
    )
    assert unapproved["state"] == "denied"
    read_only = _principal(
        grants=frozenset({"robot.read"}), approvals=frozenset({"forge.tool_start_action"})
    )
    ungranted = await service.call(
        call_body("forge_tool_start_action", arguments, "a-2"), read_only
    )
    assert ungranted["state"] == "denied"
    approved = _principal(approvals=frozenset({"forge.tool_start_action"}))
    ran = await service.call(call_body("forge_tool_start_action", arguments, "a-3"), approved)
    assert ran["state"] == "completed"
    assert fake.actions == [("t1", "arm.move")]


@pytest.mark.anyio
async def test_context_reads_list_installed_skills_and_runtime_status(tmp_path: Path) -> None:
    service = new_service(ServerSettings())
    register_robot_tools(service, _robot(tmp_path, FakeTaskService()))
    installed = await service.call(call_body("forge.skills.installed", {}), _principal())
    assert installed["result"] == {"skills": []}
    (tmp_path / "skills" / "odd" / "current").mkdir(parents=True)
    odd = await service.call(call_body("forge.skills.installed", {}, "r-2"), _principal())
    assert odd["result"]["skills"][0]["name"] == "odd"
    assert "error" in odd["result"]["skills"][0]
    status = await service.call(
        call_body("forge.runtime.status", {"skill": "sim"}, "r-3"), _principal()
    )
    assert status["result"] == {"runtimes": []}
    broken = await service.call(
        call_body("forge.runtime.status", {"skill": "broken"}, "r-4"), _principal()
    )
    assert broken["state"] == "failed"
    assert broken["error"]["code"] == "SKILL_NOT_INSTALLED"


def test_over_mcp_an_approved_server_runs_motion_and_closes_the_task_service(
    tmp_path: Path,
) -> None:
    fake = FakeTaskService()
    settings = ServerSettings(grants=BOTH, approvals=frozenset({"*"}), mcp_enabled=True)
    app = build_app(new_service(settings), settings, robot=_robot(tmp_path, fake))
    params = {
        "name": "forge_tool_start_action",
        "arguments": {"task_id": "t9", "tool_id": "gripper.grasp", "arguments": {}},
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    with running(app) as url:
        listed = httpx.post(
            f"{url}/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "tools/list"}, headers=headers
        ).json()
        answer = httpx.post(f"{url}/mcp", json=message, headers=headers, timeout=10).json()
    assert len(listed["result"]["tools"]) == len(TOOLS) + 5
    assert answer["result"]["isError"] is False
    content = answer["result"]["structuredContent"]
    assert content["record_id"] == "r1"
    # PhyAgentOS's admission fields reach an MCP agent beside doraforge's record
    assert (content["phase"], content["duplicate"]) == ("dispatching", False)
    assert fake.actions == [("t9", "gripper.grasp")]
    assert fake.closed is True


def test_the_api_tools_routes_are_mounted_beside_the_registry(tmp_path: Path) -> None:
    settings = ServerSettings()
    app = build_app(new_service(settings), settings, api_tools_dir=tmp_path / "api-tools")
    with running(app) as url:
        listed = httpx.get(f"{url}/api/api-tools", timeout=10)
    assert listed.status_code == 200
    assert listed.json() == {"ok": True, "services": []}


def _install_pick_place(home: Path, directory: Path) -> None:
    from doraforge.cli import main

    archive = directory / "pick-place.tar.gz"
    assert main(["--home", str(home), "skill", "pack", "pick-place", "--output", str(archive)]) == 0
    assert main(["--home", str(home), "skill", "install", str(archive), "--yes"]) == 0


def _record_running(home: Path, name: str, gateway_url: str) -> None:
    from doraforge.skill_runtime.runtime_state import RuntimeState, utc_now, write_state

    now = utc_now()
    state = RuntimeState(
        name=name,
        version="0.1.0",
        profile="sim",
        state="running",
        runtime_instance_id="rt-1",
        dataflow_name="df",
        coordinator_port=6012,
        gateway_url=gateway_url,
        started_at=now,
        updated_at=now,
    )
    (home / "runtime").mkdir(parents=True, exist_ok=True)
    write_state(home / "runtime", state)


@pytest.mark.anyio
async def test_installed_skills_name_the_gateway_a_skill_runs_on_not_its_manifests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    _install_pick_place(home, tmp_path)
    capsys.readouterr()
    service = new_service(ServerSettings())
    register_robot_tools(service, _robot(home, FakeTaskService()))
    body = call_body("forge.skills.installed", {}, "r-1")
    (stopped,) = (await service.call(body, _principal()))["result"]["skills"]
    _record_running(home, "pick-place", "http://127.0.0.1:19301")
    body = call_body("forge.skills.installed", {}, "r-2")
    (running,) = (await service.call(body, _principal()))["result"]["skills"]
    assert stopped["gateway_url"] is None
    assert stopped["state"] == "never started"
    assert running["gateway_url"] == "http://127.0.0.1:19301"
    assert running["state"] == "running"
    assert running["manifest_gateway_url"].endswith(":9201")
