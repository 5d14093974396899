"""Running recipes through ``RegistryService.call`` with real registry tools: children
run as the caller through their own gates, a five-call budget, and every way a recipe can
break (revoked grant, archive, schema drift, a tool gone, a child failing) fails closed
while the other recipes of the library keep working."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from doraforge.registry.errors import ToolFailure
from doraforge.registry.recipes.library import GRANT, RecipeLibrary
from doraforge.registry.recipes.run import MAX_CHILD_CALLS, Budget, child_request_id
from doraforge.registry.service import RegistryService
from tests.registry.recipes.support import (
    CLOCK,
    GRANTS,
    READ,
    agent,
    big_count,
    child_names,
    clock_recipe,
    demo_service,
    echo_twice,
    open_library,
)
from tests.registry.server_support import call_body

pytestmark = pytest.mark.anyio
ALL = GRANTS | {CLOCK}


@pytest.fixture
def service() -> RegistryService:
    return demo_service()


@pytest.fixture
def library(service: RegistryService, tmp_path: Path) -> RecipeLibrary:
    """Three recipes: echo-twice and big-count (robot.read), clock (clock.read)."""
    library = open_library(service, tmp_path)
    for definition in (echo_twice(), big_count(), clock_recipe()):
        library.save(definition)
    return library


async def _run(
    service: RegistryService,
    name: str,
    arguments: dict[str, Any],
    grants: frozenset[str] = ALL,
    request_id: str = "rc-1",
) -> dict[str, Any]:
    return await service.call(call_body(name, arguments, request_id), agent(grants))


async def _others_still_work(service: RegistryService, *names: str) -> None:
    for index, name in enumerate(names):
        outcome = await _run(service, name, {}, request_id=f"other-{index}")
        assert outcome["state"] == "completed", outcome


async def test_a_recipe_runs_its_steps_as_the_caller_with_derived_request_ids(
    library: RecipeLibrary, service: RegistryService
) -> None:
    outcome = await _run(service, "recipe.echo-twice", {"text": "hello"})
    assert outcome["state"] == "completed", outcome
    assert outcome["result"] == {
        "recipe": "recipe.echo-twice",
        "revision": 1,
        "results": [
            {"step": 1, "tool": "demo.echo", "result": {"text": "hello"}},
            {"step": 2, "tool": "demo.echo", "result": {"text": "hello"}},
        ],
    }
    children = [r for r in service.audit.records() if r["name"] == "demo.echo"]
    assert [r["requestId"] for r in children] == ["rc-1:recipe-step-1", "rc-1:recipe-step-2"]
    assert {r["principal"] for r in children} == {"doraforge-agent"}
    assert {r["scope"] for r in children} == {"agent"}
    retained = service.get_call("rc-1:recipe-step-2")
    assert retained["result"] == {"text": "hello"}


async def test_a_replayed_recipe_call_is_a_duplicate_and_runs_no_child_again(
    library: RecipeLibrary, service: RegistryService
) -> None:
    first = await _run(service, "recipe.echo-twice", {"text": "a"})
    again = await _run(service, "recipe.echo-twice", {"text": "a"})
    assert again["duplicate"] is True
    assert again["result"] == first["result"]
    assert child_names(service) == ["demo.echo", "demo.echo"]


async def test_without_the_recipe_grant_a_recipe_is_denied_and_nothing_runs(
    library: RecipeLibrary, service: RegistryService
) -> None:
    outcome = await _run(service, "recipe.echo-twice", {"text": "a"}, grants=frozenset({READ}))
    assert outcome["state"] == "denied"
    assert outcome["error"]["code"] == "TOOL_CAPABILITY_DENIED"
    assert outcome["error"]["details"]["missing"] == [GRANT]
    assert child_names(service) == []


async def test_a_revoked_underlying_grant_denies_the_recipe_before_any_step_runs(
    library: RecipeLibrary, service: RegistryService
) -> None:
    without_read = frozenset({GRANT, CLOCK})
    outcome = await _run(service, "recipe.echo-twice", {"text": "a"}, grants=without_read)
    assert outcome["state"] == "denied"
    assert outcome["error"]["code"] == "TOOL_CAPABILITY_DENIED"
    assert outcome["error"]["details"]["missing"] == [READ]
    assert child_names(service) == []
    clock = await _run(service, "recipe.clock", {}, grants=without_read, request_id="c-1")
    assert clock["state"] == "completed"
    assert clock["result"]["results"][0]["result"] == {"now": 1234}


async def test_an_archived_recipe_is_not_found_and_the_others_still_work(
    library: RecipeLibrary, service: RegistryService
) -> None:
    library.archive("recipe.echo-twice")
    outcome = await _run(service, "recipe.echo-twice", {"text": "a"})
    assert outcome["state"] == "denied"
    assert outcome["error"]["code"] == "TOOL_NOT_FOUND"
    await _others_still_work(service, "recipe.big-count", "recipe.clock")
    library.restore("recipe.echo-twice")
    restored = await _run(service, "recipe.echo-twice", {"text": "a"}, request_id="rc-2")
    assert restored["state"] == "completed"


def _drift_echo(service: RegistryService) -> None:
    """Re-register demo.echo with a wider schema, as a provider upgrade would."""
    echo = service.unregister("demo.echo")
    schema = {**echo.input_schema, "properties": {"text": {"type": "string", "maxLength": 60}}}
    service.register(echo.model_copy(update={"input_schema": schema}), _echo)


async def _echo(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"text": arguments["text"]}


async def test_schema_drift_fails_closed_before_any_step_and_a_resave_accepts_it(
    library: RecipeLibrary, service: RegistryService
) -> None:
    _drift_echo(service)
    outcome = await _run(service, "recipe.echo-twice", {"text": "a"})
    assert outcome["state"] == "denied"
    assert outcome["error"]["code"] == "RECIPE_SCHEMA_DRIFT"
    assert outcome["error"]["details"] == {"step": 1, "tool": "demo.echo"}
    assert child_names(service) == []
    body, _ = service.catalog(scope="agent", intent=None, fmt="portos")
    by_name = {tool["name"]: tool for tool in body["tools"]}
    assert by_name["recipe.echo-twice"]["availability"]["code"] == "RECIPE_SCHEMA_DRIFT"
    assert by_name["recipe.big-count"]["availability"]["available"] is True
    await _others_still_work(service, "recipe.big-count", "recipe.clock")
    summary, added = library.save(echo_twice())
    assert added is True
    assert summary["activeRevision"] == 2
    accepted = await _run(service, "recipe.echo-twice", {"text": "a"}, request_id="rc-3")
    assert accepted["state"] == "completed"


async def test_a_step_tool_that_is_unregistered_makes_its_recipe_unavailable(
    library: RecipeLibrary, service: RegistryService
) -> None:
    service.unregister("demo.big")
    outcome = await _run(service, "recipe.big-count", {})
    assert outcome["state"] == "denied"
    assert outcome["error"]["code"] == "RECIPE_TOOL_UNAVAILABLE"
    summary = library.summary(library.get("recipe.big-count"))
    assert summary["availability"]["available"] is False
    assert summary["availability"]["code"] == "RECIPE_TOOL_UNAVAILABLE"
    echo = await _run(service, "recipe.echo-twice", {"text": "a"}, request_id="rc-2")
    assert echo["state"] == "completed"


async def test_drift_between_two_steps_stops_the_recipe_before_the_changed_tool_runs(
    service: RegistryService, tmp_path: Path
) -> None:
    async def upgrade(_arguments: dict[str, Any]) -> dict[str, Any]:
        _drift_echo(service)  # the first step's tool changes the second's under it
        return {"text": "from the first step"}

    entry = service.unregister("demo.clock")
    service.register(entry, upgrade)
    library = open_library(service, tmp_path)
    library.save(
        {
            "name": "recipe.upgrade-then-echo",
            "description": "Clock, then echo.",
            "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
            "steps": [
                {"tool": "demo.clock", "arguments": {}},
                {"tool": "demo.echo", "arguments": {"text": {"$step": 1, "pointer": "/text"}}},
            ],
        }
    )
    outcome = await _run(service, "recipe.upgrade-then-echo", {})
    assert outcome["state"] == "failed"
    assert outcome["error"]["code"] == "RECIPE_SCHEMA_DRIFT"
    assert outcome["error"]["details"]["step"] == 2
    assert child_names(service) == ["demo.clock"]


async def test_a_failing_child_fails_the_recipe_with_the_childs_code(
    library: RecipeLibrary, service: RegistryService
) -> None:
    library.save(
        {
            "name": "recipe.broken",
            "description": "Echo, then the broken tool.",
            "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
            "steps": [
                {"tool": "demo.echo", "arguments": {"text": "first"}},
                {"tool": "demo.fail", "arguments": {}},
            ],
        }
    )
    outcome = await _run(service, "recipe.broken", {})
    assert outcome["state"] == "failed"
    assert outcome["error"]["code"] == "DEMO_BROKEN"
    assert outcome["error"]["retryable"] is True
    assert outcome["error"]["details"] == {
        "step": 2,
        "tool": "demo.fail",
        "requestId": "rc-1:recipe-step-2",
        "state": "failed",
    }
    await _others_still_work(service, "recipe.big-count", "recipe.clock")


async def test_a_pointer_that_finds_nothing_fails_the_step_that_needs_it(
    library: RecipeLibrary, service: RegistryService
) -> None:
    definition = echo_twice("lost-pointer")
    definition["steps"][1]["arguments"]["text"] = {"$step": 1, "pointer": "/nothing/0"}
    library.save(definition)
    outcome = await _run(service, "recipe.lost-pointer", {"text": "a"})
    assert outcome["state"] == "failed"
    assert outcome["error"]["code"] == "RECIPE_BINDING_UNRESOLVED"
    assert child_names(service) == ["demo.echo"]


async def test_an_optional_input_not_given_leaves_its_argument_out(
    library: RecipeLibrary, service: RegistryService
) -> None:
    library.save(
        {
            "name": "recipe.count",
            "description": "Count with demo.big.",
            "input_schema": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"count": {"type": "integer", "minimum": 0, "maximum": 5}},
            },
            "steps": [{"tool": "demo.big", "arguments": {"count": {"$input": "count"}}}],
        }
    )
    given = await _run(service, "recipe.count", {"count": 2})
    assert given["result"]["results"][0]["result"]["items"] == [0, 1]
    left_out = await _run(service, "recipe.count", {}, request_id="rc-2")
    assert len(left_out["result"]["results"][0]["result"]["items"]) == 100  # the tool's default
    # The recipe's own schema governs its arguments: the registry's repair clamps them.
    clamped = await _run(service, "recipe.count", {"count": 9}, request_id="rc-3")
    assert clamped["repairs"] != []
    assert clamped["result"]["results"][0]["result"]["items"] == [0, 1, 2, 3, 4]
    wrong = await _run(service, "recipe.count", {"count": "many"}, request_id="rc-4")
    assert wrong["state"] == "denied"
    assert wrong["error"]["code"] == "TOOL_INVALID_ARGUMENTS"


async def test_five_steps_run_within_the_budget_and_a_sixth_call_is_refused(
    library: RecipeLibrary, service: RegistryService
) -> None:
    steps = [{"tool": "demo.echo", "arguments": {"text": f"t{k}"}} for k in range(5)]
    library.save(
        {
            "name": "recipe.five",
            "description": "Five echoes.",
            "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
            "steps": steps,
            "output": [5],
        }
    )
    outcome = await _run(service, "recipe.five", {})
    assert outcome["result"]["results"] == [
        {"step": 5, "tool": "demo.echo", "result": {"text": "t4"}}
    ]
    assert child_names(service) == ["demo.echo"] * 5
    budget = Budget()
    for _ in range(MAX_CHILD_CALLS):
        budget.charge("demo.echo")
    with pytest.raises(ToolFailure) as raised:
        budget.charge("demo.echo")
    assert raised.value.code == "RECIPE_BUDGET_EXCEEDED"


def test_child_request_ids_stay_within_the_envelope_limit() -> None:
    assert child_request_id("abc", 3) == "abc:recipe-step-3"
    long = child_request_id("r" * 200, 5)
    assert len(long) <= 200
    assert long.endswith(":recipe-step-5")
    assert long == child_request_id("r" * 200, 5)
    assert long != child_request_id("r" * 199 + "s", 5)


async def test_a_step_may_name_its_tool_as_tools_list_lists_it(
    library: RecipeLibrary, service: RegistryService
) -> None:
    steps = [
        {"tool": "demo_echo", "arguments": {"text": {"$input": "text"}}},
        {"tool": "demo.echo", "arguments": {"text": {"$step": 1, "pointer": "/text"}}},
    ]
    library.save(echo_twice("listed-names", steps=steps))

    outcome = await _run(service, "recipe.listed-names", {"text": "hi"})

    assert outcome["state"] == "completed", outcome
    assert [r["result"] for r in outcome["result"]["results"]] == [{"text": "hi"}] * 2
