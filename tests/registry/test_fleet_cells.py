"""One registry over several cells: calls that could mean several are refused with the
candidates, and audit records and approvals name the cell a call concerns."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from doraforge.paos.agent_tools import TOOLS
from doraforge.paos.home import PaosHome, open_service
from doraforge.registry.approvals import ApprovalRequest, ApprovalStore
from doraforge.registry.audit import MAX_NOTED_CELLS, AuditLog
from doraforge.registry.cells import Cell, CellNames
from doraforge.registry.errors import ToolFailure
from doraforge.registry.robot_tools import RobotTools
from doraforge.registry.settings import SettingsError, load_settings
from doraforge.skill_runtime.runtime_state import RuntimeState, write_state
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

CELL: dict[str, str | None] = {"skill": "cell-a", "runtimeInstanceId": "rt-a", "robot": "sim_arm"}


def _running(home: PaosHome, name: str, *, state: str = "running") -> RuntimeState:
    home.runtime_dir.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    return write_state(
        home.runtime_dir,
        RuntimeState(
            name=name,
            version="1.0.0",
            profile="sim",
            state=state,
            runtime_instance_id=f"rt-{name}",
            dataflow_name=name,
            coordinator_port=6012,
            gateway_url="http://127.0.0.1:9",
            started_at=now,
            updated_at=now,
        ),
    )


def test_an_audit_record_carries_the_cell_noted_for_its_request() -> None:
    audit = AuditLog()
    audit.note_cell("r-1", CELL)
    fields: dict[str, Any] = {"principal_id": "agent", "scope": "agent", "error_code": None}
    first = audit.record(request_id="r-1", name="forge.task_get", state="completed",
                         duration_s=0.0, **fields)  # fmt: skip
    again = audit.record(request_id="r-1", name="forge.task_get", state="completed",
                         duration_s=0.0, duplicate=True, **fields)  # fmt: skip
    other = audit.record(request_id="r-2", name="web_search", state="completed",
                         duration_s=0.0, **fields)  # fmt: skip
    assert first["cell"] == again["cell"] == CELL
    assert "cell" not in other


def test_noted_cells_are_bounded() -> None:
    audit = AuditLog()
    for n in range(MAX_NOTED_CELLS + 1):
        audit.note_cell(f"r-{n}", CELL)
    oldest = audit.record(request_id="r-0", name="x", principal_id="p", scope="agent",
                          state="completed", error_code=None, duration_s=0.0)  # fmt: skip
    assert "cell" not in oldest


async def test_an_approval_shows_the_operator_its_cell_and_every_event_carries_it() -> None:
    audit = AuditLog()
    asked: list[tuple[str, dict[str, Any]]] = []

    async def namer(tool: str, arguments: Any) -> dict[str, str | None]:
        asked.append((tool, dict(arguments)))
        return CELL

    audit.name_cells(namer)
    store = ApprovalStore(audit=audit, timeout_s=30)
    request = ApprovalRequest(
        "forge.tool_start_action", 1, {"task_id": "t-1", "tool_id": "arm.home"}, "a", "r-1", "high"
    )
    waiting = asyncio.create_task(store.clear(request))
    (pending,) = await eventually_async(
        lambda: store.approvals("pending"), within=5.0, what="the pending approval"
    )
    assert pending["cell"] == CELL
    store.approve(pending["id"], "cell is clear", by="operator")
    await waiting
    events = [r for r in audit.records() if r.get("kind") == "approval"]
    assert [(r["event"], r["cell"]) for r in events] == [("requested", CELL), ("approved", CELL)]
    assert asked == [("forge.tool_start_action", {"task_id": "t-1", "tool_id": "arm.home"})]


async def test_a_diagnostic_call_naming_no_skill_is_refused_when_several_run(
    tmp_path: Path,
) -> None:
    home = PaosHome(tmp_path / "home")
    for name in ("cell-a", "cell-b"):
        _running(home, name)
    _running(home, "cell-c", state="stopped")
    tools = RobotTools(home, lambda: None, lambda: None)
    with pytest.raises(ToolFailure) as caught:
        await tools.skill_adapter(TOOLS["forge_tool_query"])({"tool_id": "arm.state"})
    assert caught.value.code == "SKILL_AMBIGUOUS"
    assert caught.value.details["candidates"] == [
        {"skill": "cell-a", "runtimeInstanceId": "rt-cell-a", "robot": None},
        {"skill": "cell-b", "runtimeInstanceId": "rt-cell-b", "robot": None},
    ]
    assert "cell-a, cell-b" in caught.value.message


async def test_the_cell_of_a_call_comes_from_its_task_or_its_skill(tmp_path: Path) -> None:
    home = PaosHome(tmp_path / "home")
    _running(home, "cell-b")
    service = open_service(home)
    try:
        service.store.put_binding("bind-a", "sha", {"skill": "cell-a", "runtime_instance": "rt-a"})
        service.store.create_task(
            task_id="t-a", revision_id="r-a", binding_id="bind-a", goal="g", contract={}
        )

        async def no_gateway(skill: str) -> str:
            raise ToolFailure("SKILL_NOT_RUNNING", f"{skill} is not running")

        cells = CellNames(home, lambda: service, no_gateway)
        by_task = await cells.of_call("forge.task_get", {"task_id": "t-a"})
        by_skill = await cells.of_call("forge.tool_contexts", {"skill": "cell-b"})
        robotless = await cells.of_call("forge.tool_query", {"skill": "cell-b", "tool_id": "x"})
        assert by_task == Cell("cell-a", "rt-a")
        assert by_skill == robotless == Cell("cell-b", "rt-cell-b")
        assert await cells.of_call("forge.task_get", {"task_id": "no-such"}) is None
        assert await cells.of_call("web_search", {"skill": "cell-b"}) is None
    finally:
        await service.aclose()
        service.store.close()


def test_serve_takes_task_slots_from_its_flag_or_its_config_file(tmp_path: Path) -> None:
    config = tmp_path / "serve.yml"
    config.write_text("task_slots: per_runtime\n", encoding="utf-8")
    assert load_settings().task_slots is None  # the home's setting stays as it is
    assert load_settings(config=config).task_slots == "per_runtime"
    assert load_settings(config=config, task_slots="global").task_slots == "global"
    config.write_text("task_slots: per_robot\n", encoding="utf-8")
    with pytest.raises(SettingsError, match="task_slots"):
        load_settings(config=config)


def test_serve_refuses_global_slots_while_two_cells_have_tasks_before_it_listens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from doraforge.cli import main
    from doraforge.paos.store import AgentTaskStore

    home = PaosHome(tmp_path / "home")
    store = AgentTaskStore(home.store_path)
    try:
        store.set_task_slots("per_runtime")
        for name in ("cell-a", "cell-b"):
            store.put_binding(f"b-{name}", "sha", {"skill": name, "runtime_instance": "rt"})
            store.create_task(
                task_id=f"t-{name}", revision_id=f"r-{name}", binding_id=f"b-{name}",
                goal="g", contract={},
            )  # fmt: skip
    finally:
        store.close()
    code = main(["--home", str(home.root), "serve", "--port", "0", "--task-slots", "global"])
    err = capsys.readouterr().err
    assert code == 1
    assert "PAOS_TASK_SLOTS_BUSY" in err
    assert "registry listening" not in err
    assert len(err.strip().splitlines()) == 1
