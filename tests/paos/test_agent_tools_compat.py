"""doraforge's agent tools take PhyAgentOS 1.1.1's argument shapes unchanged.

The shapes are PhyAgentOS's own: each tool's ``parameters`` JSON schema, dumped by the real
PhyAgentOS in its peer venv (``tests.peers.phyagentos``, ``agent_tool_fields.PEER_DUMP``).
Arguments generated from those schemas must be valid for doraforge's tool (and for the
registry's agent-facing form), and a PhyAgentOS-shaped agent sequence runs through a real
in-process Gateway.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from doraforge.paos.agent_tools import TOOLS
from doraforge.paos.binding import BindingCandidate
from doraforge.paos.home import PaosHome
from doraforge.paos.phyagentos_shapes import contract_from_phyagentos
from doraforge.paos.tasks import TaskService
from doraforge.registry.robot_schemas import agent_form
from doraforge.registry.robot_tools import RobotTools, register_robot_tools
from doraforge.registry.server import new_service
from doraforge.registry.settings import ServerSettings
from doraforge.skill_runtime.activation import SkillActivation
from tests.paos.agent_tool_fields import PEER_DUMP, mock_task_service
from tests.peers import phyagentos
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1"
TOOLS_USED = ["mock.move", "mock.stream", "mock.stats", "mock.echo"]
MOVED = {
    "kind": "state",
    "id": "moved",
    "tool_id": "mock.stats",
    "predicate": {"op": "greater_than", "value_path": "invokes.move", "value": 0},
}
TEMPLATE = {"mode": "enforce", "goal": "the mock moved", "success_criteria": [MOVED]}

#: Values for the string patterns PhyAgentOS's schemas declare.
_PATTERNED = {
    "^activation_[a-z0-9]+$": "activation_0123abcd",
    "^[a-z0-9]+(?:-[a-z0-9]+)*$": "pick-place",
}


@pytest.fixture(scope="module")
def phyagentos_schemas() -> dict[str, dict[str, Any]]:
    schemas: dict[str, dict[str, Any]] = phyagentos.run(PEER_DUMP)["schemas"]
    return schemas


def _value(schema: dict[str, Any], full: bool) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return _example(schema, full)
    if kind == "array":
        return [_value(schema.get("items", {"type": "string"}), full)] if full else []
    if kind == "integer":
        return schema.get("minimum", 1)
    return _PATTERNED.get(schema.get("pattern", ""), "x-1")


def _example(schema: dict[str, Any], full: bool) -> dict[str, Any]:
    properties = schema.get("properties", {})
    names = list(properties) if full else list(schema.get("required", []))
    return {name: _value(properties[name], full) for name in names}


def _enum_variants(example: dict[str, Any], schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for name, spec in schema.get("properties", {}).items():
        for choice in spec.get("enum", []):
            yield {**example, name: choice}
        if spec.get("type") == "object" and name in example:
            for inner in _enum_variants(example[name], spec):
                yield {**example, name: inner}


def phyagentos_examples(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Minimal and full arguments for ``schema``, and one per value of every enum."""
    minimal, full = _example(schema, False), _example(schema, True)
    variants = itertools.chain(_enum_variants(minimal, schema), _enum_variants(full, schema))
    return [minimal, full, *variants]


@pytest.mark.slow
def test_phyagentos_and_doraforge_offer_the_same_tool_names(
    phyagentos_schemas: dict[str, dict[str, Any]],
) -> None:
    assert set(phyagentos_schemas) == set(TOOLS)


def registry_entries(tmp_path: Path) -> dict[str, Any]:
    """The registry's ``forge.*`` entries by provider name (what agents are offered)."""
    service = new_service(ServerSettings())
    register_robot_tools(service, RobotTools(PaosHome(tmp_path), lambda: None, lambda: None))
    return {e.providerName: e for e in service.entries()}


@pytest.mark.slow
def test_every_phyagentos_argument_shape_is_valid_for_doraforge_and_its_registry(
    phyagentos_schemas: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    entries = registry_entries(tmp_path)
    checked = 0
    for name, schema in phyagentos_schemas.items():
        tool = TOOLS[name]
        _, agent_schema = agent_form(name, tool.description, tool.input_schema)
        assert entries[name].input_schema == agent_schema
        for example in phyagentos_examples(schema):
            assert Draft202012Validator(schema).is_valid(example), (name, example)
            for ours in (tool.input_schema, agent_schema):
                errors = [e.message for e in Draft202012Validator(ours).iter_errors(example)]
                assert not errors, (name, example, errors)
            checked += 1
    assert checked > 2 * len(phyagentos_schemas)


def test_activate_skill_is_a_registry_tool_with_its_declared_side_effect_and_risk(
    tmp_path: Path,
) -> None:
    entry = registry_entries(tmp_path)["activate_skill"]
    assert entry.name == "forge.activate_skill"
    assert (entry.policy.sideEffect, entry.policy.risk) == ("write", "low")
    assert (TOOLS["activate_skill"].side_effect, TOOLS["activate_skill"].risk) == ("write", "low")


@pytest.mark.slow
def test_no_phyagentos_shape_needs_a_url(phyagentos_schemas: dict[str, dict[str, Any]]) -> None:
    for schema in phyagentos_schemas.values():
        assert not any(k.endswith("url") for k in schema["properties"])


# ---------------------------------------------------------------- behaviour, real Gateway


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[TaskService]:
    candidate = BindingCandidate(
        skill="mock-skill", version="1.0.0", gateway_url=URL, required_tools=tuple(TOOLS_USED)
    )
    activation = SkillActivation(candidate, dict(TEMPLATE))
    async with mock_task_service(tmp_path, lambda name: activation) as task_service:
        yield task_service


async def call(service: TaskService, tool: str, /, **arguments: Any) -> Any:
    answer = await TOOLS[tool](service, arguments)
    assert answer["ok"] is True, (tool, answer)
    return answer["data"]


async def failure(service: TaskService, tool: str, /, **arguments: Any) -> dict[str, Any]:
    answer = await TOOLS[tool](service, arguments)
    assert answer["ok"] is False, (tool, answer)
    error: dict[str, Any] = answer["error"]
    return error


async def activated_task(service: TaskService, verification: dict[str, Any]) -> str:
    activation = await call(service, "activate_skill", name="mock-skill")
    created = await call(
        service,
        "forge_task_create",
        task_description="move the mock",
        activation_id=activation["activation_id"],
        verification=verification,
    )
    task_id: str = created["task_id"]
    return task_id


async def started_move(service: TaskService, task_id: str, *, duration_s: float) -> Any:
    """``forge_tool_start_action`` of a ``mock.move`` that succeeds after ``duration_s``."""
    return await call(
        service,
        "forge_tool_start_action",
        task_id=task_id,
        tool_id="mock.move",
        arguments={"duration_s": duration_s, "behaviour": "succeed"},
    )


async def test_activate_skill_answers_an_activation_id_bound_to_the_running_skill(
    service: TaskService,
) -> None:
    data = await call(service, "activate_skill", name="mock-skill", role="primary")
    assert data["activation_id"].startswith("activation_")
    assert data["activation"]["skill_name"] == "mock-skill"
    assert data["activation"]["role"] == "primary"
    assert data["verification"] == TEMPLATE


async def test_a_phyagentos_agent_sequence_runs_unchanged(service: TaskService) -> None:
    task_id = await activated_task(
        service, {"mode": "enforce", "goal": "move it", "success_criteria": ["moved"]}
    )
    context = await call(service, "forge_tool_context", tool_id="mock.move")
    assert context["spec"]["tool_id"] == "mock.move"
    queried = await call(
        service,
        "forge_tool_query",
        task_id=task_id,
        tool_id="mock.echo",
        arguments={"message": "hi"},
    )
    assert queried["response"]["result"]["status"] == "succeeded"
    started = await started_move(service, task_id, duration_s=0)
    invocation_id = started["invocation_id"]
    status = await call(
        service, "forge_tool_action_status", task_id=task_id, invocation_id=invocation_id
    )
    assert status["record"]["invocation_id"] == invocation_id

    async def available() -> dict[str, Any] | None:
        result = await call(
            service, "forge_tool_action_result", task_id=task_id, invocation_id=invocation_id
        )
        return result if result["status"] == "available" else None

    result = await eventually_async(available, what="the action's result", interval=0.01)
    assert result["record"]["state"] == "completed"
    finalized = await call(service, "forge_task_finalize", task_id=task_id)
    assert (finalized["task_id"], finalized["status"]) == (task_id, "succeeded")
    (criterion,) = finalized["task"]["contract"]["success_criteria"]
    assert criterion["id"] == "moved"  # the string named the skill's machine criterion


async def test_cancel_by_invocation_id_then_cancel_the_task_with_a_recorded_reason(
    service: TaskService,
) -> None:
    task_id = await activated_task(service, {"mode": "off"})
    started = await started_move(service, task_id, duration_s=5)
    cancelled = await call(
        service,
        "forge_tool_cancel_action",
        task_id=task_id,
        invocation_id=started["invocation_id"],
    )
    assert cancelled["record"]["record_id"] == started["record_id"]
    ended = await call(service, "forge_task_cancel", task_id=task_id, reason="user said stop")
    assert ended["status"] == "cancelled"
    assert ended["task"]["outcome"] == {"cancelled": True, "reason": "user said stop"}


async def test_a_session_is_read_and_stopped_by_invocation_id(service: TaskService) -> None:
    task_id = await activated_task(service, {})
    started = await call(
        service,
        "forge_tool_start_session",
        task_id=task_id,
        tool_id="mock.stream",
        arguments={},
        ownership="task",
    )
    ids = {"task_id": task_id, "invocation_id": started["invocation_id"]}
    status = await call(service, "forge_tool_session_status", **ids)
    assert status["record"]["record_id"] == started["record_id"]
    stopped = await call(service, "forge_tool_stop_session", **ids)
    assert stopped["record"]["record_id"] == started["record_id"]


async def test_an_invocation_id_the_task_did_not_start_is_refused_before_any_read(
    service: TaskService,
) -> None:
    task_id = await activated_task(service, {"mode": "off"})
    error = await failure(
        service, "forge_tool_action_status", task_id=task_id, invocation_id="inv_other"
    )
    assert error["code"] == "PAOS_UNKNOWN_INVOCATION"


async def test_an_unknown_or_supporting_activation_binds_no_task(service: TaskService) -> None:
    error = await failure(
        service,
        "forge_task_create",
        task_description="d",
        activation_id="activation_0",
        verification={},
    )
    assert error["code"] == "PAOS_UNKNOWN_ACTIVATION"
    supporting = await call(service, "activate_skill", name="mock-skill", role="supporting")
    error = await failure(
        service,
        "forge_task_create",
        task_description="d",
        activation_id=supporting["activation_id"],
    )
    assert error["code"] == "PAOS_ACTIVATION_NOT_PRIMARY"
    assert service.store.active_task() is None


async def test_doraforge_shapes_still_work_beside_phyagentos_ones(service: TaskService) -> None:
    created = await call(service, "forge_task_create", skill="mock-skill")
    task_id = created["task"]["task_id"]
    started = await started_move(service, task_id, duration_s=0)
    status = await call(
        service, "forge_tool_action_status", task_id=task_id, record_id=started["record_id"]
    )
    assert status["record"]["record_id"] == started["record_id"]
    ended = await call(service, "forge_task_cancel", task_id=task_id)
    assert ended["task"]["outcome"]["reason"] == "agent_requested"


# ---------------------------------------------------------------- the contract mapping


def test_string_criteria_naming_a_template_criterion_select_it() -> None:
    contract = contract_from_phyagentos(
        {"mode": "audit", "success_criteria": ["moved"]}, "move it", TEMPLATE
    )
    assert contract["success_criteria"] == [MOVED]
    assert (contract["mode"], contract["goal"]) == ("audit", "move it")


def test_prose_criteria_and_constraints_are_recorded_in_the_goal_never_dropped() -> None:
    contract = contract_from_phyagentos(
        {
            "mode": "enforce",
            "goal": "tidy",
            "success_criteria": ["the red cube is in the bin"],
            "constraints": ["do not hit the table"],
            "evidence_policy": {"required_sources": ["scene"], "profile": "p"},
        },
        "tidy up",
        TEMPLATE,
    )
    assert contract["success_criteria"] == [MOVED]  # the skill's own machine criteria
    assert "the red cube is in the bin" in contract["goal"]
    assert "do not hit the table" in contract["goal"]
    assert contract["evidence_policy"] == {"required_sources": ["scene"]}


def test_an_empty_phyagentos_contract_is_off_with_the_task_description_as_goal() -> None:
    contract = contract_from_phyagentos({}, "move it", None)
    assert contract == {
        "mode": "off",
        "goal": "move it",
        "success_criteria": [],
        "evidence_policy": {},
    }
