"""One conformance suite over every ToolEndpoint provider (the table in ``providers.py``).

Every check runs against every provider through the :class:`ProviderCore` the runner
embeds (``core_driver.py``), so what is asserted is what the Gateway would receive. The
rules come from the Provider Wire (``forge.tool.endpoint/v1alpha1``: descriptor 6.2,
ToolError 7.1, invoke 9.2, tool.error 9.7, lifecycle 10, correlation 11), from the
Gateway's ToolSpec catalog (Draft 2020-12 schemas, closed inputs, frames on every robot
tool) and from the edge rule that bad input is a structured 4xx, never a crash. A provider
that differs for a reason says so in its table row; no check is skipped.

Run: ``.venv/bin/pytest -q tests/nodes/conformance``.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from forge_tool import TOOL_ENDPOINT_PROTOCOL, ToolEnvelope
from jsonschema import Draft202012Validator

from doraforge.gateway.admission import rejection
from doraforge.gateway.config import ToolSpecConfig
from doraforge.gateway.http import error_response
from tests.nodes.conformance.core_driver import (
    EVENT_FOR_RESULT,
    CoreDriver,
    carrier_row,
)
from tests.nodes.conformance.providers import (
    CASES,
    Backed,
    ProviderCase,
    SharedWorld,
    configs_routing,
    shipped_profiles,
    tool_for,
)
from tests.nodes.provider_harness import fresh

pytestmark = pytest.mark.anyio

UNKNOWN_KEY = "conformance_not_in_the_schema"
#: Hostile values set on every schema property in turn; only those the schema refuses are sent.
HOSTILE_VALUES: tuple[Any, ...] = (
    {"conformance": "an object where the schema wants something else"},
    None,
    "x" * 70_000,
    [[[[[[[[1]]]]]]]],
    -1e308,
    True,
)


@pytest.fixture(scope="module")
def shared_world() -> Iterator[SharedWorld]:
    world = SharedWorld()
    yield world
    world.close()


@pytest.fixture(params=CASES, ids=str)
def case(request: pytest.FixtureRequest) -> ProviderCase:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def backed(case: ProviderCase, shared_world: SharedWorld) -> Backed:
    built = case.build(shared_world)
    built.back()
    return built


@pytest.fixture
def driver(backed: Backed) -> CoreDriver:
    return CoreDriver(backed.definition)


def spec(case: ProviderCase, operation: str) -> ToolSpecConfig:
    """The operation's ToolSpec in the first shipped config that routes the provider."""
    for _, config in configs_routing(case):
        tool = tool_for(config, case.endpoint_id, operation)
        if tool is not None:
            return tool
    raise AssertionError(f"no ToolSpec routes {case}.{operation}")


def assert_tool_error(error: Any) -> None:
    """Protocol 7.1: exactly code, message, retryable, details, all typed."""
    assert isinstance(error, dict), error
    assert set(error) == {"code", "message", "retryable", "details"}, error
    for name in ("code", "message"):
        assert isinstance(error[name], str), error
        assert error[name].strip(), error
    assert isinstance(error["retryable"], bool), error
    assert isinstance(error["details"], dict), error


def assert_correlated(response: ToolEnvelope, request: ToolEnvelope) -> None:
    """Protocol 11.1: the response copies the request's identities exactly."""
    for name in (
        "request_id",
        "invocation_id",
        "attempt_id",
        "endpoint_id",
        "endpoint_instance_id",
        "operation",
    ):
        assert getattr(response, name) == getattr(request, name), name


def violations(schema: dict[str, Any], valid: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Arguments the schema refuses, derived from valid ones: an unknown key, each required
    key missing, each property set to each hostile value. Each is checked to be refused."""
    found = [(f"unknown key {UNKNOWN_KEY!r}", {**valid, UNKNOWN_KEY: 1})]
    for name in schema.get("required", []):
        found.append((f"{name} missing", {k: v for k, v in valid.items() if k != name}))
    for name in schema.get("properties", {}):
        for value in HOSTILE_VALUES:
            found.append((f"{name}={str(value)[:40]}", {**valid, name: value}))
    validator = Draft202012Validator(schema)
    return [(why, args) for why, args in found if not validator.is_valid(args)]


def semantics_of(backed: Backed) -> dict[str, str]:
    return {op.name: op.semantics for op in backed.definition.descriptor.operations}


# ---------------------------------------------------------------- descriptor and ToolSpecs


def test_the_descriptor_is_well_formed_and_matches_the_table(
    case: ProviderCase, backed: Backed
) -> None:
    descriptor = backed.definition.descriptor
    assert descriptor.protocol_version == TOOL_ENDPOINT_PROTOCOL
    assert descriptor.endpoint_id.strip()
    names = [op.name for op in descriptor.operations]
    assert names, "a descriptor declares at least one operation"
    assert len(set(names)) == len(names), names
    assert all(n.strip() for n in names), names
    assert set(backed.definition.operations) == set(names), "an operation without an SPI object"
    for op in descriptor.operations:
        # Protocol 6.2's capability matrix.
        assert op.max_concurrency >= 1
        assert op.stoppable is False or op.semantics == "session", op
        assert op.cancellable is False or op.semantics == "action", op
        assert op.status_supported is (op.semantics != "query"), op
    assert set(case.arguments) == set(names), "the table names every operation's arguments"
    kinds = semantics_of(backed)
    assert kinds[case.query] == "query"
    assert (case.action is None) == ("action" not in kinds.values())
    assert (case.session is None) == ("session" not in kinds.values())
    if case.action is not None:
        assert kinds[case.action] == "action"
    if case.session is not None:
        assert kinds[case.session] == "session"


def test_every_config_that_routes_it_binds_each_operation_to_a_well_formed_toolspec(
    case: ProviderCase, backed: Backed
) -> None:
    routed = configs_routing(case)
    assert routed, f"no shipped Gateway config routes {case}"
    for path, config in routed:
        for op in backed.definition.descriptor.operations:
            tool = tool_for(config, backed.definition.endpoint_id, op.name)
            assert tool is not None, f"{path.name}: no tool for {case}.{op.name}"
            where = f"{path.name}: {tool.tool_id}"
            assert tool.semantics == op.semantics, where
            Draft202012Validator.check_schema(tool.input_schema)
            Draft202012Validator.check_schema(tool.output_schema)
            assert tool.input_schema.get("type") == "object", where
            assert tool.input_schema.get("additionalProperties") is False, f"{where}: open input"
            Draft202012Validator(tool.input_schema).validate(case.arguments[op.name])


def test_every_robot_tool_names_its_frames_as_the_robot_profile_does(
    case: ProviderCase, backed: Backed
) -> None:
    profiles = shipped_profiles()
    for path, config in configs_routing(case):
        for operation in sorted(case.frames_required):
            tool = tool_for(config, backed.definition.endpoint_id, operation)
            assert tool is not None
            frames = tool.robot_frame_profile
            assert frames is not None, f"{path.name}: {tool.tool_id} has no robot_frame_profile"
            prof = profiles.get(frames.robot_id)
            if prof is None:
                continue  # a robot no shipped profile describes (the mock arm): present is all
            assert (frames.base_frame, frames.tool_frame) == (prof.base_frame, prof.tool_frame)
            assert frames.directions.keys() == prof.directions.keys(), tool.tool_id


# ---------------------------------------------------------------- registration and health


async def test_start_registers_the_descriptor_then_reports_health(
    case: ProviderCase, driver: CoreDriver
) -> None:
    driver.core.start()
    register, status = driver.published.envelopes[:2]
    assert register.message_type == "endpoint.register"
    assert register.endpoint_instance_id == driver.instance_id
    assert register.payload["descriptor"]["endpoint_id"] == driver.endpoint_id
    assert status.message_type == "endpoint.status"
    health = status.payload["status"]
    assert health["state"] == "ready", health
    assert health["active_invocations"] == 0
    assert isinstance(health["active_invocations"], int)
    assert isinstance(health["details"], dict)
    await driver.core.stop()
    assert driver.published.envelopes[-1].message_type == "endpoint.unregister"


async def test_before_its_backing_speaks_it_answers_honestly(case: ProviderCase) -> None:
    driver = CoreDriver(case.unbacked_definition())
    expected = case.unbacked
    assert driver.core.status_snapshot().state == expected.state
    response = await driver.invoke(case.query, case.arguments[case.query])
    assert response.payload["outcome"] == "completed", response.payload
    result = response.payload["result"]
    if expected.query_code is None:
        assert result["status"] == "succeeded", result
        return
    assert result["status"] == "failed", result
    assert_tool_error(result["error"])
    assert (result["error"]["code"], result["error"]["retryable"]) == (
        expected.query_code,
        expected.retryable,
    )


# ---------------------------------------------------------------- refusals


async def test_an_unknown_operation_gets_a_correlated_structured_error(
    case: ProviderCase, driver: CoreDriver
) -> None:
    request = driver.invoke_request("conformance_no_such_operation", {})
    response = await driver.exchange(request)
    assert response.message_type == "tool.error"
    assert_correlated(response, request)
    assert_tool_error(response.payload["error"])
    assert response.payload["error"]["code"] == "FORGE_PROTOCOL_UNKNOWN_OPERATION"
    still = await driver.invoke(case.query, case.arguments[case.query])
    assert still.payload["outcome"] == "completed", "the provider stopped answering"


async def test_arguments_the_schema_refuses_are_refused_as_a_4xx_before_any_effect(
    case: ProviderCase, backed: Backed, driver: CoreDriver, caplog: pytest.LogCaptureFixture
) -> None:
    kinds = semantics_of(backed)
    before = backed.fingerprint()
    checked, lenient = 0, set()
    with caplog.at_level(logging.ERROR):
        for operation, valid in case.arguments.items():
            for why, arguments in violations(spec(case, operation).input_schema, valid):
                if (operation, why) in case.lenient:
                    lenient.add((operation, why))
                    continue
                request = driver.invoke_request(operation, copy.deepcopy(arguments))
                response = await driver.exchange(request)
                where = f"{case}.{operation} with {why}"
                assert response.message_type == "tool.invoke.response", where
                assert_correlated(response, request)
                assert response.payload["outcome"] == "rejected", (where, response.payload)
                error = response.payload["error"]
                assert_tool_error(error)
                assert error["retryable"] is False, where
                status = error_response(rejection(error, kinds[operation])).status_code
                assert 400 <= status < 500, (where, status)
                checked += 1
    assert checked >= len(case.arguments), "every operation had a refused argument"
    assert lenient == set(case.lenient), "a lenient row the suite no longer generates"
    assert backed.fingerprint() == before, "a refused call changed the provider's state"
    health = driver.core.status_snapshot()
    assert (health.state, health.active_invocations) == ("ready", 0)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], "a refusal escaped as an exception"


async def test_arguments_that_are_not_an_object_get_a_correlated_protocol_error(
    case: ProviderCase, driver: CoreDriver
) -> None:
    for operation in case.arguments:
        request = driver.invoke_request(operation, {})
        row = carrier_row(request, {**request.payload, "arguments": [1, 2]})
        response = await driver.exchange_row(row, str(request.request_id))
        assert response.message_type == "tool.error", (operation, response.payload)
        assert_correlated(response, request)
        assert_tool_error(response.payload["error"])
        assert response.payload["error"]["code"].startswith("FORGE_PROTOCOL_")


# ---------------------------------------------------------------- Query, Action, Session


async def test_the_query_answers_within_its_schema_and_asking_again_changes_nothing(
    case: ProviderCase, backed: Backed, driver: CoreDriver
) -> None:
    before = backed.fingerprint()
    answers = []
    for _ in range(2):
        request = driver.invoke_request(case.query, case.arguments[case.query])
        response = await driver.exchange(request)
        assert_correlated(response, request)
        assert response.payload["outcome"] == "completed", response.payload
        result = response.payload["result"]
        assert result["status"] == "succeeded", result
        jsonschema.validate(result["outputs"], spec(case, case.query).output_schema)
        answers.append(
            {k: v for k, v in result["outputs"].items() if k not in case.volatile_outputs}
        )
    assert answers[0] == answers[1], "a second identical Query answered differently"
    assert backed.fingerprint() == before, "a Query changed the provider's state"
    assert not [e for e in driver.published.envelopes if e.message_type == "tool.event"]


async def test_the_action_reaches_a_terminal_state_and_its_progress_is_honest(
    case: ProviderCase, backed: Backed, driver: CoreDriver
) -> None:
    if case.action is None:
        assert "action" not in semantics_of(backed).values()  # the table's reason holds
        return
    invoke = driver.invoke_request(case.action, case.arguments[case.action])
    accepted = await driver.exchange(invoke)
    assert accepted.payload["outcome"] == "accepted", accepted.payload
    terminal = await driver.terminal_event(accepted)
    result = (await driver.follow_up(case.action, str(invoke.invocation_id), "result")).payload
    assert result["status"] == "available", result
    assert result["result"]["status"] == "succeeded", result
    assert terminal.payload["type"] == EVENT_FOR_RESULT[result["result"]["status"]]
    jsonschema.validate(result["result"]["outputs"], spec(case, case.action).output_schema)
    status = await driver.follow_up(case.action, str(invoke.invocation_id), "status")
    assert status.payload["status"]["phase"] == "completed"
    events = driver.events(accepted)
    assert driver.index_of(accepted) < driver.index_of(events[0]), "an event before acceptance"
    assert [e.sequence for e in events] == list(range(len(events)))
    assert events[-1] is terminal, "an event after the terminal one"
    fractions = [e.payload["data"]["fraction"] for e in events if e.payload["type"] == "progress"]
    assert all(0.0 <= f <= 1.0 and math.isfinite(f) for f in fractions), fractions
    assert fractions == sorted(fractions), f"progress went backwards: {fractions}"
    health = driver.core.status_snapshot()
    assert (health.state, health.active_invocations) == ("ready", 0)


async def test_a_session_runs_until_stopped_and_ends_stopped(
    case: ProviderCase, backed: Backed, driver: CoreDriver
) -> None:
    if case.session is None:
        assert "session" not in semantics_of(backed).values()  # the table's reason holds
        return
    accepted = await driver.invoke(case.session, case.arguments[case.session])
    assert accepted.payload["outcome"] == "accepted", accepted.payload
    invocation_id = str(accepted.invocation_id)
    pending = await driver.follow_up(case.session, invocation_id, "result")
    assert pending.payload == {"status": "pending"}
    stop = await driver.follow_up(case.session, invocation_id, "control", "stop")
    assert stop.payload["response"]["status"] == "accepted", stop.payload
    terminal = await driver.terminal_event(accepted)
    assert terminal.payload["type"] == "stopped"
    result = await driver.follow_up(case.session, invocation_id, "result")
    assert result.payload["result"]["status"] == "stopped"


async def test_control_status_and_result_of_an_unknown_invocation_are_structured(
    case: ProviderCase, backed: Backed, driver: CoreDriver
) -> None:
    for op in backed.definition.descriptor.operations:
        if op.semantics == "query":
            continue
        stranger = fresh("inv-never-invoked")
        command = "cancel" if op.semantics == "action" else "stop"
        control = (await driver.follow_up(op.name, stranger, "control", command)).payload
        answer = control["response"]
        if op.cancellable or op.stoppable:
            assert answer["status"] == "rejected", (op.name, answer)
            assert_tool_error(answer["error"])
        else:
            # Declared not cancellable (world.reset): the handler answers without asking.
            assert answer["status"] == "unsupported", (op.name, answer)
        status = await driver.follow_up(op.name, stranger, "status")
        assert status.message_type == "tool.error", (op.name, status.payload)
        assert_tool_error(status.payload["error"])
        result = await driver.follow_up(op.name, stranger, "result")
        assert result.payload == {"status": "not_found"}, (op.name, result.payload)
