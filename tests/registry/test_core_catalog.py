"""Catalog registration, filtering, projections and the ETag."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from doraforge.registry.catalog import Catalog, RegisteredTool
from doraforge.registry.errors import RegistryError
from doraforge.registry.http import status_for
from doraforge.registry.model import Principal, ToolEntry
from doraforge.registry.service import RegistryService
from tests.registry.test_core_support import CountingAdapter, entry


def _service(*entries: dict[str, Any]) -> RegistryService:
    service = RegistryService()
    for body in entries:
        service.register(body, CountingAdapter())
    return service


def test_register_returns_the_validated_entry_and_public_form_has_no_adapter() -> None:
    service = RegistryService()
    registered = service.register(entry(aliases=["brain_find"]), CountingAdapter())
    assert isinstance(registered, ToolEntry)
    public = registered.public()
    assert public["policy"]["async"] is False
    assert "adapter" not in json.dumps(public)


@pytest.mark.parametrize(
    "second",
    [
        entry("brain.search", providerName="other_name"),
        entry("brain.other", providerName="brain_search"),
        entry("brain.other", aliases=["brain.search"]),
        entry("brain.other", providerName="x_y", aliases=["brain_search"]),
    ],
    ids=["canonical", "provider", "alias-on-canonical", "alias-on-provider"],
)
def test_registration_rejects_any_name_collision(second: dict[str, Any]) -> None:
    service = _service(entry())
    with pytest.raises(RegistryError) as caught:
        service.register(second, CountingAdapter())
    assert caught.value.code == "TOOL_REGISTRATION_CONFLICT"
    assert status_for(caught.value) == 409
    assert [e.name for e in service.entries()] == ["brain.search"]


def test_an_entry_may_repeat_its_own_provider_name_as_alias() -> None:
    service = _service(entry(aliases=["brain_search"]))
    resolved = service.resolve("brain_search")
    assert resolved is not None
    assert resolved.name == "brain.search"


@pytest.mark.parametrize(
    "bad",
    [
        entry("Brain.Search"),
        entry("brain search"),
        entry(providerName="has.dot"),
        entry(adapter="internal"),
        entry(version="1"),
        entry(input_schema={"type": "object"}),
        entry(input_schema={"type": "object", "additionalProperties": False, "properties": 3}),
        entry(policy={"sideEffect": "delete"}),
        entry(policy={"unknown": True}),
        entry(description=""),
    ],
)
def test_registration_rejects_malformed_entries(bad: dict[str, Any]) -> None:
    with pytest.raises(RegistryError) as caught:
        RegistryService().register(bad, CountingAdapter())
    assert caught.value.code == "TOOL_REGISTRATION_INVALID"


def test_scope_filters_and_intent_only_narrows() -> None:
    service = _service(
        entry("brain.search"),
        entry("robot.move", description="Move the arm to a pose.", policy={"scopes": ["ui"]}),
        entry("robot.status", description="Read the arm status."),
    )
    assert [e.name for e in service.entries(scope="agent")] == ["brain.search", "robot.status"]
    assert len(service.entries(scope="all")) == 3
    assert [e.name for e in service.entries(scope="agent", intent="robot arm")] == ["robot.status"]
    assert service.entries(scope="agent", intent="   ") == service.entries(scope="agent")
    assert service.entries(intent="zebra") == []


def test_an_overlong_intent_is_refused() -> None:
    with pytest.raises(RegistryError) as caught:
        _service(entry()).entries(intent="x" * 501)
    assert caught.value.code == "TOOL_INVALID_QUERY"


def test_principal_sees_only_tools_its_grants_cover() -> None:
    service = _service(
        entry("robot.status", policy={"requiredCapabilities": ["robot.read"]}),
        entry("robot.move", policy={"requiredCapabilities": ["robot.write"]}),
    )
    reader = Principal(id="p", scope="agent", grants=frozenset({"robot.read"}))
    assert [e.name for e in service.entries(principal=reader)] == ["robot.status"]


def test_projections_are_mechanical() -> None:
    service = _service(
        entry(
            "robot.move",
            policy={"sideEffect": "write", "idempotent": False, "risk": "high"},
        ),
        entry("web.fetch", policy={"egressHosts": ["example.com"]}),
    )
    move, fetch = service.resolve("robot.move"), service.resolve("web.fetch")
    assert move is not None
    assert fetch is not None
    assert service.project(move, "openai") == {
        "type": "function",
        "function": {
            "name": "robot_move",
            "description": move.description,
            "parameters": move.input_schema,
        },
    }
    assert service.project(move, "anthropic") == {
        "name": "robot_move",
        "description": move.description,
        "input_schema": move.input_schema,
    }
    mcp = service.project(move, "mcp")
    assert mcp["inputSchema"] == move.input_schema
    assert mcp["outputSchema"] == move.output_schema
    assert mcp["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    }
    assert service.project(fetch, "mcp")["annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": True,
    }
    assert service.project(fetch, "portos") == fetch.public()


def test_unknown_format_is_refused_even_for_an_empty_catalog() -> None:
    with pytest.raises(RegistryError) as caught:
        RegistryService().catalog(scope=None, intent=None, fmt="yaml")
    assert caught.value.code == "TOOL_INVALID_QUERY"


def test_etag_is_base64url_sha256_of_canonical_json() -> None:
    service = _service(entry())
    body, tag = service.catalog(scope="agent", intent=None, fmt="portos")
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest())
    assert tag == '"' + digest.rstrip(b"=").decode() + '"'
    assert body["format"] == "portos"
    assert [t["name"] for t in body["tools"]] == ["brain.search"]


def test_etag_is_stable_and_changes_with_content_format_and_filter() -> None:
    service = _service(entry())
    _, first = service.catalog(scope="agent", intent=None, fmt="portos")
    _, again = service.catalog(scope="agent", intent=None, fmt="portos")
    _, openai = service.catalog(scope="agent", intent=None, fmt="openai")
    _, filtered = service.catalog(scope="agent", intent="zebra", fmt="portos")
    service.register(entry("brain.recent"), CountingAdapter())
    _, grown = service.catalog(scope="agent", intent=None, fmt="portos")
    assert first == again
    assert len({first, openai, filtered, grown}) == 4


def _registered(body: dict[str, Any]) -> RegisteredTool:
    catalog = Catalog()
    catalog.register(body, CountingAdapter())
    tool = catalog.resolve(body["name"])
    assert tool is not None
    return tool


ARGUMENT_CASES = [
    {"query": "cube"},
    {"query": "cube", "limit": 5, "tags": ["red"], "exact": True, "mode": "deep"},
    {"query": "cube", "limit": 0},
    {"query": "cube", "limit": 5.0},
    {"query": "cube", "limit": True},
    {"query": 3},
    {"query": "cube", "tags": ["red", 1]},
    {"query": "cube", "mode": "slow"},
    {"query": "cube", "extra": 1},
    {},
    [],
    "cube",
    None,
]


@pytest.mark.parametrize("arguments", ARGUMENT_CASES, ids=range(len(ARGUMENT_CASES)))
def test_compiled_argument_checks_give_jsonschemas_verdict(arguments: Any) -> None:
    """A schema in the compiled subset is checked by plain checks on the call path; their
    verdict is the compiled jsonschema validator's, case by case."""
    tool = _registered(entry())
    assert tool.input_conforms is not None
    assert tool.arguments_valid(arguments) == tool.input_validator.is_valid(arguments)


def test_a_schema_outside_the_compiled_subset_keeps_jsonschema() -> None:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"query": {"type": "string", "pattern": "^c"}},
    }
    tool = _registered(entry(input_schema=schema))
    assert tool.input_conforms is None
    assert tool.arguments_valid({"query": "cube"})
    assert not tool.arguments_valid({"query": "sphere"})
