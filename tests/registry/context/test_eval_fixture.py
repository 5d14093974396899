"""The eval's parts on their own: loading a fixture (lines, refusals, macros), the fake
sources, pointers with ``*`` and each matcher, and the error outcome of a crashing
contract."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from doraforge.registry.context.eval import FixtureError, contract, load_fixture, run_suite
from doraforge.registry.context.eval.fakes import build_sources
from doraforge.registry.context.eval.matchers import MISSING, select, value_problem
from doraforge.registry.context.eval.schema import Expectation, SourceSpec, expand
from doraforge.registry.context.source import MAX_SCAN_ITEMS, SourceError, opaque_ref

TINY = """\
version: 1
suite: tiny
cases:
  - id: profile
    sources: {navigation: {items: [{key: home, label: Home}]}}
    request: {tool: context_profile}
    expect: {pointer: /profile, equals: metadata}
  - id: profile-again
    sources: {navigation: {items: [{key: home, label: Home}]}}
    request: {tool: context_profile}
    expect: {pointer: /profile, equals: metadata}
"""


def loaded(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "suite.yml"
    path.write_text(text)
    return load_fixture(path)


def refusal(tmp_path: Path, text: str) -> FixtureError:
    with pytest.raises(FixtureError) as refused:
        loaded(tmp_path, text)
    return refused.value


def expectation(**fields: Any) -> Expectation:
    return Expectation.model_validate(fields)


def test_each_case_is_reported_at_its_line(tmp_path: Path) -> None:
    assert loaded(tmp_path, TINY).lines == {"profile": 4, "profile-again": 8}


def test_a_misspelt_key_is_refused_at_its_line(tmp_path: Path) -> None:
    error = refusal(tmp_path, TINY.replace("    request:", "    requests:", 1))
    assert error.code == "EVAL_FIXTURE_INVALID"
    assert error.details["line"] == 6
    assert "cases.0.requests" in error.message


def test_repeated_case_ids_are_refused(tmp_path: Path) -> None:
    error = refusal(tmp_path, TINY.replace("id: profile-again", "id: profile"))
    assert "used twice" in error.message


def test_the_manifest_is_only_read_over_mcp(tmp_path: Path) -> None:
    error = refusal(tmp_path, TINY.replace("{tool: context_profile}", "{method: manifest}", 1))
    assert "via: mcp" in error.message


def test_mcp_settings_and_faults_are_refused_where_they_cannot_hold(tmp_path: Path) -> None:
    in_process = TINY.replace(
        "    request: {tool: context_profile}",
        "    mcpEnabled: false\n    request: {tool: context_profile}",
        1,
    )
    assert "give via: mcp" in refusal(tmp_path, in_process).message
    both = TINY.replace("expect: {pointer", "expect: {isError: true, fault: true, pointer", 1)
    assert "not both" in refusal(tmp_path, both).message


def test_a_malformed_macro_is_refused_before_any_case_runs(tmp_path: Path) -> None:
    text = TINY.replace(
        "{tool: context_profile}", "{tool: get_context, arguments: {ref: {$ref: nowhere/x}}}", 1
    )
    error = refusal(tmp_path, text)
    assert "$ref" in error.message
    assert (error.details["line"], error.details["field"]) == (4, "cases.0")


def test_yaml_the_strict_reader_refuses_is_an_invalid_fixture(tmp_path: Path) -> None:
    error = refusal(tmp_path, TINY + "anchor: &a 1\nalias: *a\n")
    alias_line = len(TINY.splitlines()) + 2
    assert (error.code, error.details["line"]) == ("EVAL_FIXTURE_INVALID", alias_line)


def test_macros_give_opaque_references_and_long_strings() -> None:
    assert expand({"ref": {"$ref": "tools/arm-move"}}) == {"ref": opaque_ref("tools", "arm-move")}
    assert expand([{"$repeat": "ab", "times": 3}]) == ["ababab"]
    with pytest.raises(ValueError, match="times"):
        expand({"$repeat": "a", "times": -1})


def test_a_large_fake_source_gives_at_most_the_limit_and_says_more_existed() -> None:
    spec = SourceSpec.model_validate({"generate": {"count": 1500, "label": "tool {n}"}})
    source = build_sources({"tools": spec})["tools"]
    snapshot = asyncio.run(source.snapshot(MAX_SCAN_ITEMS))
    assert (len(snapshot.items), snapshot.source_truncated) == (MAX_SCAN_ITEMS, True)
    assert snapshot.items[7].label == "tool 7"
    assert source.inspected == [MAX_SCAN_ITEMS]


def test_fake_sources_answer_stale_or_fail_as_their_spec_says() -> None:
    stale = SourceSpec.model_validate({"status": "stale", "items": [{"key": "a", "label": "A"}]})
    broken = SourceSpec.model_validate({"fail": {"code": "DOWN", "message": "down"}})
    sources = build_sources({"skills": stale, "tools": broken})
    assert asyncio.run(sources["skills"].snapshot()).status == "stale"
    with pytest.raises(SourceError) as failed:
        asyncio.run(sources["tools"].snapshot())
    assert failed.value.code == "DOWN"


def test_a_wildcard_selects_every_member_and_a_missing_value_is_missing() -> None:
    document = {"items": [{"a": 1}, {"a": 2, "b/c": 3}]}
    assert select(document, "/items/*/a") == [("/items/0/a", 1), ("/items/1/a", 2)]
    assert select(document, "/items/1/b~1c") == [("/items/1/b~1c", 3)]
    assert select(document, "/items/5/a") == [("/items/5/a", MISSING)]
    assert select(document, "/items/*/a/*") == []


@pytest.mark.parametrize(
    ("fields", "value", "problem"),
    [
        ({"equals": True}, False, "expected true"),
        ({"equals": 1}, True, "expected 1"),
        ({"type": "integer"}, True, "not of type integer"),
        ({"contains": "cube"}, "the tray", "does not contain"),
        ({"contains": "x"}, ["y"], "does not contain"),
        ({"notContains": "alice@"}, {"s": "mail alice@example.com"}, "must never appear"),
        ({"matches": "^tool \\d+$"}, "tool x", "does not match"),
        ({"maxChars": 3}, "four", "4 characters"),
        ({"maxChars": 6}, {"a": 1}, "7 characters"),
        ({"maxItems": 1}, [1, 2], "more than 1"),
        ({"minItems": 3}, [1, 2], "fewer than 3"),
        ({"max": 1000}, 1001, "above 1000"),
        ({"min": 1}, "1", "not a number"),
        ({"maxTokens": 1}, "a long enough sentence", "tokens, over 1"),
    ],
)
def test_each_matcher_fails_a_value_that_breaks_it(
    fields: dict[str, Any], value: Any, problem: str
) -> None:
    found = value_problem(expectation(**fields), value)
    assert found is not None
    assert problem in found


@pytest.mark.parametrize(
    ("fields", "value"),
    [
        ({"equals": {"$ref": "tools/a"}}, opaque_ref("tools", "a")),
        ({"type": "number"}, 1.5),
        ({"contains": "cube"}, "the cube"),
        ({"notContains": "alice@"}, {"s": "[email]"}),
        ({"maxChars": 4}, "four"),
        ({"min": 0, "max": 1000}, 1000),
    ],
)
def test_each_matcher_passes_a_value_that_keeps_it(fields: dict[str, Any], value: Any) -> None:
    assert value_problem(expectation(**fields), value) is None


def test_a_contract_that_crashes_is_an_error_and_a_skipped_case_is_a_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def crash(self: Any, request: Any) -> Any:
        raise RuntimeError("the service fell over")

    monkeypatch.setattr(contract.ServiceContract, "ask", crash)
    suite = loaded(
        tmp_path,
        TINY.replace("  - id: profile-again\n", "  - id: profile-again\n    skip: later\n"),
    )
    first, second = asyncio.run(run_suite(suite))
    assert (first.outcome, first.reason) == ("error", "RuntimeError: the service fell over")
    assert (second.outcome, second.reason) == ("skip", "later")
