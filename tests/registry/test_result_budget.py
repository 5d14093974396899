"""A result cut to fit the MCP budgets still matches its tool's output schema: required
members stay, cut lists and left-out members are named, and a result no valid cut fits is
an ``isError`` result (``TOOL_RESULT_TOO_LARGE``), never invalid structured content."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.paos.home import PaosHome
from doraforge.registry.api_tools.tools import OUTPUT_SCHEMA as API_TOOL_OUTPUT
from doraforge.registry.builtins import calculator, http_fetch, web_search
from doraforge.registry.mcp_results import tool_result
from doraforge.registry.recipes.run import OUTPUT_SCHEMA as RECIPE_OUTPUT
from doraforge.registry.result_budget import ResultTooLarge, cut
from doraforge.registry.robot_schemas import TASK_ANSWER_OUTPUT
from doraforge.registry.robot_tools import RobotTools, register_robot_tools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.service import RegistryService
from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import running

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=600),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)


def _robot_schemas() -> dict[str, dict[str, Any]]:
    """The output schema of every robot tool, as the registry registers them."""
    service = RegistryService()
    register_robot_tools(service, RobotTools(PaosHome(Path("/nonexistent")), lambda: None))
    return {entry.providerName: entry.output_schema for entry in service.entries()}


SCHEMAS: dict[str, dict[str, Any]] = {
    **_robot_schemas(),
    "calculator": calculator.ENTRY["output_schema"],
    "http_fetch": http_fetch.OUTPUT_SCHEMA,
    "web_search": web_search.OUTPUT_SCHEMA,
    "api_tool": API_TOOL_OUTPUT,
    "recipe": RECIPE_OUTPUT,
}


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def valid_for(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that match ``schema`` (the keywords the tools' output schemas use), with
    long strings, long lists and extra members wherever the schema leaves room."""
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for word in ("oneOf", "anyOf"):
        if word in schema:
            rest = {k: v for k, v in schema.items() if k != word}
            return st.one_of([valid_for({**rest, **alt}) for alt in schema[word]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([valid_for({**schema, "type": one}) for one in kind])
    typed: Callable[[dict[str, Any]], st.SearchStrategy[Any]] = _TYPED.get(kind, _any)
    return typed(schema)


def _any(_schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    return JSON


def _object(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    properties = schema.get("properties", {})
    required = {k: valid_for(properties.get(k, {})) for k in schema.get("required", [])}
    optional = {k: valid_for(v) for k, v in properties.items() if k not in required}
    fixed = st.fixed_dictionaries(required, optional=optional)
    extra_schema = schema.get("additionalProperties", {})
    if extra_schema is False:
        return fixed
    extra_values = valid_for(extra_schema) if extra_schema not in ({}, True) else JSON
    extra = st.dictionaries(st.text(min_size=1, max_size=8), extra_values, max_size=4)
    return st.tuples(fixed, extra).map(lambda pair: {**pair[1], **pair[0]})


def _array(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    least = schema.get("minItems", 0)
    most = min(schema.get("maxItems", 30), 30)
    return st.lists(valid_for(schema.get("items", {})), min_size=least, max_size=max(least, most))


def _string(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "pattern" in schema:
        return st.from_regex(schema["pattern"], fullmatch=True)
    if schema.get("format") == "date-time":
        return st.just("2026-12-01T12:00:00.000Z")
    if schema.get("contentEncoding") == "base64":
        return st.just("AAAA")
    return st.text(
        min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 3000), 3000)
    )


def _integer(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.integers(schema.get("minimum", -(10**6)), schema.get("maximum", 10**6))


def _number(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    return st.floats(
        schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False
    )


_TYPED: dict[str | None, Callable[[dict[str, Any]], st.SearchStrategy[Any]]] = {
    "object": _object,
    "array": _array,
    "string": _string,
    "integer": _integer,
    "number": _number,
    "boolean": lambda _s: st.booleans(),
    "null": lambda _s: st.none(),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(sorted(SCHEMAS)))
def test_every_cut_of_a_real_tool_result_fits_and_still_matches_its_output_schema(
    data: st.DataObject, name: str
) -> None:
    schema = SCHEMAS[name]
    validator = Draft202012Validator(schema)
    value = data.draw(valid_for(schema))
    assert validator.is_valid(value), "the strategy must draw valid results"
    done = cut(value, schema, max_chars=2000, max_items=5)
    assert _size(done.value) <= 2000
    assert validator.is_valid(done.value), next(validator.iter_errors(done.value)).message
    assert set(schema.get("required", [])) <= set(done.value)
    assert done.truncated == (done.value != value)
    if done.truncated:
        assert done.meta()["originalChars"] == _size(value)


def _finalize_answer(steps: int = 9) -> dict[str, Any]:
    """A finalized pick-and-place task's answer, as big as nine recorded motions make it."""
    verdict = {"status": "success", "detail": "cube in zone", "results": [{"r": "x" * 300}] * 4}
    records = [{"record_id": f"rec_{i}", "result": {"trace": "t" * 1500}} for i in range(steps)]
    return {
        "task": {"task_id": "task_1", "state": "succeeded", "goal": "pick", "contract": {}},
        "binding": {"document": "b" * 3000},
        "revisions": [
            {
                "revision_id": "rev_1",
                "ordinal": 1,
                "verdict": verdict,
                "execution_records": records,
                "verification_attempts": [verdict],
            }
        ],
        "records": records,
        "evidence": [{"path": "e" * 600} for _ in range(steps)],
        "verifications": [verdict],
        "task_id": "task_1",
        "status": "succeeded",
        "active_revision_id": "rev_1",
        "verification_attempts": [verdict],
    }


def test_a_finalize_answer_over_the_budget_keeps_its_revisions_and_matches_its_schema() -> None:
    answer = _finalize_answer()
    assert _size(answer) > 20_000
    outcome = {"requestId": "r", "state": "completed", "result": answer}
    result = tool_result(outcome, ServerSettings(), TASK_ANSWER_OUTPUT, name="forge_task_finalize")
    structured = result["structuredContent"]
    assert Draft202012Validator(TASK_ANSWER_OUTPUT).is_valid(structured)
    assert structured["revisions"][-1]["verdict"]["status"] == "success"
    assert structured["task"]["state"] == "succeeded"
    assert len(result["content"][0]["text"]) <= 20_000
    assert result["_meta"]["doraforge/truncated"] is True
    assert structured["truncated"] is True
    assert "records" in structured["elided"]
    assert "revisions" not in structured["elided"]


def test_a_capped_list_is_named_in_meta() -> None:
    outcome = {"requestId": "r", "state": "completed", "result": {"a": list(range(30))}}
    result = tool_result(outcome, ServerSettings())
    assert result["_meta"]["doraforge/cut"]["cappedLists"] == ["a"]
    assert result["structuredContent"]["a"] == list(range(25))


def test_a_closed_schema_gets_only_the_marker_it_admits() -> None:
    value = {"status": 200, "content": "c" * 30_000, "truncated": False}
    done = cut(value, API_TOOL_OUTPUT, max_chars=2000, max_items=25)
    assert done.value["truncated"] is True
    assert set(done.value) == {"status", "content", "truncated"}
    assert done.meta()["shortenedStrings"] is True


SHAPED = {
    "type": "object",
    "required": ["id"],
    "properties": {"id": {"type": "string", "pattern": "^x+$"}},
}


def test_a_result_no_valid_cut_fits_is_refused_not_sent_invalid() -> None:
    with pytest.raises(ResultTooLarge):
        cut({"id": "x" * 5000}, SHAPED, max_chars=1000, max_items=25)
    outcome = {"requestId": "req-9", "state": "completed", "result": {"id": "x" * 30_000}}
    result = tool_result(outcome, ServerSettings(), SHAPED, name="demo_shaped")
    assert result["isError"] is True
    assert "structuredContent" not in result
    error = result["_meta"]["doraforge/error"]
    assert error["code"] == "TOOL_RESULT_TOO_LARGE"
    assert error["message"].startswith("demo_shaped completed")
    assert error["details"]["requestId"] == "req-9"


def _finalize_entry() -> dict[str, Any]:
    return {
        "name": "demo.finalize",
        "providerName": "demo_finalize",
        "description": "Answer like forge_task_finalize, over the MCP result budget.",
        "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
        "output_schema": TASK_ANSWER_OUTPUT,
        "policy": {
            "scopes": ["agent"],
            "requiredCapabilities": ["robot.read"],
            "sideEffect": "read",
            "idempotent": True,
            "risk": "low",
        },
    }


@pytest.mark.anyio
async def test_the_official_sdk_client_validates_a_cut_answer_against_the_listed_schema() -> None:
    settings = ServerSettings(grants=frozenset({"robot.read"}), mcp_enabled=True)
    service = new_service(settings)

    async def finalize(_arguments: dict[str, Any]) -> dict[str, Any]:
        return _finalize_answer()

    service.register(_finalize_entry(), finalize)
    with running(build_app(service, settings)) as base:
        async with (
            streamable_http_client(f"{base}/mcp") as (read, write, _session_id),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            # The SDK raises when structured content does not match the tool's outputSchema.
            done = await session.call_tool("demo_finalize", {})
    assert done.isError is False, done.content
    assert done.structuredContent is not None
    assert done.structuredContent["revisions"][-1]["verdict"]["status"] == "success"
    assert done.meta is not None
    assert done.meta["doraforge/truncated"] is True
