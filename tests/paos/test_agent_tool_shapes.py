"""The field table (``tests.paos.agent_tool_fields``) against both sides, unit level.

PhyAgentOS's side: its real tool schemas, status words and answer models, dumped in its
own venv. doraforge's side: its agent tools' schemas, and their answers to the one agent
sequence through a real in-process Gateway. The live comparison of both sides' answers to
the same calls is ``tests/e2e/peers/test_phyagentos_tool_answers.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from doraforge.paos import phyagentos_answers as answers
from doraforge.paos.agent_tools import TOOLS
from doraforge.paos.binding import BindingCandidate
from doraforge.paos.tasks import TaskService
from tests.paos import agent_tool_fields as table
from tests.peers import phyagentos
from tests.support.waiting import eventually_async

pytestmark = pytest.mark.anyio

OFF = {"mode": "off", "goal": "move"}
NEVER = {
    "kind": "state",
    "id": "moved-far",
    "tool_id": "mock.stats",
    "predicate": {"op": "greater_than", "value_path": "invokes.move", "value": 1000},
}


@pytest.fixture(scope="module")
def peer() -> dict[str, Any]:
    dumped: dict[str, Any] = phyagentos.run(table.PEER_DUMP)
    return dumped


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[TaskService]:
    candidate = table.installed_candidate("http://127.0.0.1")
    documented = table.DocumentedActivation(candidate, None, table.SKILL_DOCUMENT)
    async with table.mock_task_service(tmp_path, lambda name: documented) as task_service:
        yield task_service


def _json_type(schema: dict[str, Any]) -> str | None:
    """A doraforge property's JSON type in the table's words (enums: their values' type)."""
    names = {"string": "str", "integer": "int", "object": "object", "boolean": "bool"}
    if "type" in schema:
        return str(names.get(schema["type"], schema["type"]))
    kinds = {table.kind(v) for v in schema.get("enum", [])}
    return kinds.pop() if len(kinds) == 1 else None


# ---------------------------------------------------------------- the table itself


def test_the_table_names_the_16_tools_both_sides_offer() -> None:
    assert set(table.ARGUMENTS) == set(table.ANSWERS) == set(TOOLS)
    assert len(TOOLS) == 16


@pytest.mark.slow
def test_the_table_states_phyagentos_s_argument_fields_and_types(peer: dict[str, Any]) -> None:
    names = {"string": "str", "integer": "int", "object": "object"}
    for tool, schema in peer["schemas"].items():
        declared = {k: names[v["type"]] for k, v in schema["properties"].items()}
        assert declared == table.ARGUMENTS[tool], tool


@pytest.mark.slow
def test_the_table_states_phyagentos_s_nested_answer_models(peer: dict[str, Any]) -> None:
    for name, model in (
        ("lesson", table.LESSON),
        ("verdict", table.VERDICT),
        ("attempt", table.ATTEMPT),
        ("binding", table.BINDING),
    ):
        assert table.unlisted(peer[name], model) == [], name
        assert table.problems(peer[name], model) == [], name


@pytest.mark.slow
def test_the_status_words_are_phyagentos_s(peer: dict[str, Any]) -> None:
    assert set(peer["task_statuses"]) == table.TASK_STATUSES
    assert set(peer["record_statuses"]) == table.RECORD_STATUSES


def test_doraforge_s_status_mappings_speak_only_phyagentos_s_words() -> None:
    assert set(answers.RECORD_STATUS.values()) <= table.RECORD_STATUSES
    assert set(answers.RECORD_PHASE.values()) <= table.PHASES


def test_doraforge_takes_every_argument_field_with_its_type() -> None:
    for tool, fields in table.ARGUMENTS.items():
        properties = TOOLS[tool].input_schema["properties"]
        for field, wanted in fields.items():
            assert field in properties, (tool, field)
            assert _json_type(properties[field]) == wanted, (tool, field)


# ---------------------------------------------------------------- doraforge's answers


async def test_doraforge_answers_the_agent_sequence_with_every_field_of_the_table(
    service: TaskService,
) -> None:
    seen = await table.run_doraforge(service)
    assert {table.tool_of(k) for k in seen} == set(TOOLS) - {"forge_task_begin_revision"}
    for key, answer in seen.items():
        tool = table.tool_of(key)
        assert answer["ok"] is not key.endswith("/error"), (key, answer)
        assert table.problems(answer, table.fields_of(key)) == [], key
        assert table.status_words(tool, answer) == [], key
    record = seen["forge_task_get"]["data"]["primary_skill_binding"]
    assert (record["skill_name"], record["gateway_identity"]) == (table.SKILL, _instance(seen))
    ended = seen["forge_task_finalize"]["data"]["status"]
    assert ended == "failed"  # the Action was cancelled: execution facts did not succeed
    assert seen["forge_task_cancel"]["data"]["status"] == ended  # an ended task as it is


def _instance(seen: dict[str, Any]) -> str:
    instance: str = seen["forge_tool_context"]["data"]["context"]["gateway_instance_id"]
    return instance


async def test_a_verified_finalize_and_a_new_revision_answer_phyagentos_verdicts(
    service: TaskService,
) -> None:
    created = await TOOLS["forge_task_create"](
        service,
        {
            "skill": table.SKILL,
            "contract": {"mode": "recovery", "goal": "far", "success_criteria": [NEVER]},
        },
    )
    assert created["ok"] is True, created
    task_id = created["data"]["task_id"]
    moved = {"duration_s": 0, "behaviour": "succeed"}
    arguments = {"task_id": task_id, "tool_id": "mock.move", "arguments": moved}
    started = await TOOLS["forge_tool_start_action"](service, arguments)
    await _settled(service, task_id, started["data"]["invocation_id"])
    finalized = await TOOLS["forge_task_finalize"](service, {"task_id": task_id})
    assert finalized["data"]["status"] == "awaiting_replan"
    assert finalized["data"]["verdict"]["verdict"] == "replan_required"
    (criterion,) = finalized["data"]["verdict"]["criteria"]
    assert (criterion["criterion"], criterion["status"]) == ("moved-far", "unsatisfied")
    (attempt,) = finalized["data"]["revisions"][0]["verification_attempts"]
    assert attempt["verdict"] == "replan_required"
    revised = await TOOLS["forge_task_begin_revision"](
        service, {"task_id": task_id, "reason": "move further"}
    )
    assert [r["number"] for r in revised["data"]["revisions"]] == [1, 2]
    assert (
        revised["data"]["revisions"][0]["closed_at"]
        == revised["data"]["revisions"][1]["created_at"]
    )
    for answer, tool in (
        (finalized, "forge_task_finalize"),
        (revised, "forge_task_begin_revision"),
    ):
        assert table.problems(answer, table.ANSWERS[tool]) == [], tool
        assert table.status_words(tool, answer) == [], tool


async def test_activate_skill_answers_the_document_and_the_lessons_of_its_skill_version(
    service: TaskService,
) -> None:
    task_id = await _ended_with_a_failed_move(service)
    answer = await TOOLS["activate_skill"](service, {"name": table.SKILL})
    assert table.problems(answer, table.ANSWERS["activate_skill"]) == []
    assert answer["skill"] == answer["data"]["skill"] == table.SKILL_DOCUMENT
    digest = hashlib.sha256(table.SKILL_DOCUMENT.encode()).hexdigest()
    assert answer["activation"]["content_sha256"] == digest
    (lesson,) = answer["applicable_lessons"]  # learnt from the ended task's episode
    assert lesson["failure_mode"].startswith("mock.move ended ")
    assert (lesson["observations"], lesson["skill_version_spec"]) == (1, "1.0.0")
    assert lesson["kind"] == "tool_failure"  # doraforge's own lesson fields stay beside
    assert answer["data"]["applicable_lessons"] == answer["applicable_lessons"]
    assert service.store.task(task_id).terminal


async def _ended_with_a_failed_move(service: TaskService) -> str:
    created = await TOOLS["forge_task_create"](service, {"skill": table.SKILL, "contract": OFF})
    task_id: str = created["data"]["task_id"]
    failing = {"duration_s": 0, "behaviour": "fail"}
    arguments = {"task_id": task_id, "tool_id": "mock.move", "arguments": failing}
    started = await TOOLS["forge_tool_start_action"](service, arguments)
    await _settled(service, task_id, started["data"]["invocation_id"])
    ended = await TOOLS["forge_task_finalize"](service, {"task_id": task_id})
    assert ended["data"]["status"] == "failed", ended
    return task_id


async def _settled(service: TaskService, task_id: str, invocation_id: str) -> None:
    ids = {"task_id": task_id, "invocation_id": invocation_id}

    async def done() -> dict[str, Any] | None:
        answer = await TOOLS["forge_tool_action_result"](service, ids)
        return answer if answer["data"]["status"] == "available" else None

    await eventually_async(done, what="the move's result", interval=0.01)


async def test_an_activation_without_a_document_says_so_and_keeps_the_installed_hash(
    service: TaskService,
) -> None:
    candidate = table.installed_candidate("http://127.0.0.1")

    @dataclass(frozen=True)
    class Undocumented:
        candidate: BindingCandidate
        contract: dict[str, Any] | None

    service.activate_skill = lambda name: Undocumented(candidate, None)
    answer = await TOOLS["activate_skill"](service, {"name": table.SKILL})
    assert (answer["skill"], answer["data"]["skill_document_available"]) == ("", False)
    assert answer["activation"]["content_sha256"] == candidate.skill_md_sha256


async def test_a_terminal_record_s_status_is_the_gateway_s_without_accounting_for_it(
    service: TaskService,
) -> None:
    created = await TOOLS["forge_task_create"](service, {"skill": table.SKILL, "contract": OFF})
    task_id = created["data"]["task_id"]
    moved = {"duration_s": 0, "behaviour": "succeed"}
    arguments = {"task_id": task_id, "tool_id": "mock.move", "arguments": moved}
    started = await TOOLS["forge_tool_start_action"](service, arguments)
    await _settled(service, task_id, started["data"]["invocation_id"])
    ids = {"task_id": task_id, "invocation_id": started["data"]["invocation_id"]}
    status = await TOOLS["forge_tool_action_status"](service, ids)
    assert table.problems(status, table.ANSWERS["forge_tool_action_status"]) == []
    assert (status["data"]["phase"], status["data"]["terminal"]) == ("completed", True)
    assert status["data"]["invocation"] is None  # doraforge's own read: none for a terminal record
    assert status["data"]["record"]["state"] == "completed"


def test_without_a_gateway_reading_the_record_states_the_invocation_fields() -> None:
    record = {
        "record_id": "rec_1",
        "tool_id": "mock.move",
        "semantics": "action",
        "caller_id": "paos:t:1",
        "state": "indeterminate",
        "invocation_id": "inv_1",
        "attempt_id": "att_1",
        "cancel": None,
        "created_at_ms": 1,
        "updated_at_ms": 2,
        "terminal_at_ms": None,
    }
    bound = {"endpoint_id": "mock", "operation": "move"}
    answer: dict[str, Any] = {"ok": True, "data": answers.status_answer(record, None, bound)}
    assert table.problems(answer, table.ANSWERS["forge_tool_action_status"]) == []
    assert (answer["data"]["phase"], answer["data"]["terminal"]) == ("unknown", False)
    assert table.status_words("forge_tool_action_status", answer) == []
