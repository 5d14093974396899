"""The context service over small fake sources: each of the five tools, scope and privacy
boundaries, source failures and stale sources, through ``ContextService.call``."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from doraforge.registry.context import budgets
from doraforge.registry.context.service import (
    ContextArgumentError,
    ContextService,
    ContextSourceError,
)
from doraforge.registry.context.source import ContextItem, Scope, opaque_ref
from tests.registry.context.fake_sources import SECRET, FakeSource, cell, failing, item

pytestmark = pytest.mark.anyio

DEFAULT: frozenset[Scope] = frozenset({"navigation", "skills", "tools", "runtime"})


def _service(
    sources: dict[Scope, FakeSource] | None = None,
    *,
    scopes: frozenset[Scope] | None = DEFAULT,
    **options: Any,
) -> ContextService:
    return ContextService(cell() if sources is None else sources, scopes=scopes, **options)


async def _refused(service: ContextService, name: str, arguments: dict[str, Any]) -> Any:
    with pytest.raises(ContextArgumentError) as refused:
        await service.call(name, arguments)
    return refused.value


async def test_the_profile_reports_scopes_grants_limits_and_exclusions() -> None:
    service = _service(grants=frozenset({"robot.read"}))
    profile = await service.call("context_profile", {})
    assert profile == service.profile()
    assert profile["profile"] == "metadata"
    assert profile["enabledScopes"] == ["navigation", "skills", "tools", "runtime"]
    states = {s["name"]: (s["enabled"], s["available"]) for s in profile["scopes"]}
    assert states == {
        "navigation": (True, True),
        "skills": (True, True),
        "tools": (True, True),
        "tasks": (False, False),
        "evidence": (False, False),
        "runtime": (True, True),
    }
    assert profile["grants"] == ["robot.read"]
    limits = profile["limits"]
    assert (limits["maxItems"], limits["maxScanItems"], limits["maxSummaryChars"]) == (
        25,
        1_000,
        320,
    )
    assert (limits["maxQueryChars"], limits["maxResultChars"], limits["maxResultTokens"]) == (
        200,
        20_000,
        5_000,
    )
    excluded = {e["id"] for e in profile["exclusions"]}
    assert {"credentials", "tokens", "paths", "raw-tool-outputs", "episode-physics"} <= excluded


async def test_an_enabled_scope_without_a_source_is_reported_unavailable() -> None:
    sources = cell()
    del sources["runtime"]
    profile = await _service(sources).call("context_profile", {})
    runtime = next(s for s in profile["scopes"] if s["name"] == "runtime")
    assert (runtime["enabled"], runtime["available"]) == (True, False)


async def test_search_matches_labels_aliases_and_metadata_and_ranks_labels_first() -> None:
    service = _service()
    by_label = await service.call("search_context", {"query": "pick-place"})
    assert by_label["items"][0]["label"] == "pick-place"
    by_alias = await service.call("search_context", {"query": "bundles"})
    assert [i["label"] for i in by_alias["items"]] == ["Skills"]
    by_metadata = await service.call("search_context", {"query": "sim"})
    assert [i["label"] for i in by_metadata["items"]] == ["pick-place"]
    by_version = await service.call("search_context", {"query": "0.3.1"})
    assert by_version["items"][0]["label"] == "inspect"  # all three numbers, not two
    camera = await service.call("search_context", {"query": "wrist camera"})
    # camera.capture names the camera in its label; inspect only in its private text.
    assert [i["label"] for i in camera["items"]] == ["camera.capture", "inspect"]
    assert camera == await service.call("search_context", {"query": "  WRIST camera "})


async def test_private_text_may_match_but_is_never_returned_under_the_metadata_profile() -> None:
    found = await _service().call("search_context", {"query": "cube zone"})
    assert [i["label"] for i in found["items"]] == ["pick-place"]
    answer = json.dumps(found)
    assert "Pick a cube" not in answer
    assert SECRET not in answer
    assert all("summary" not in i for i in found["items"])


async def test_a_secret_in_private_text_cannot_be_probed_by_search() -> None:
    # Text is matched as redacted, so a token prefix confirms nothing.
    probe = await _service().call("search_context", {"query": SECRET[:8]})
    assert probe["items"] == []
    assert probe["total"] == 0


async def test_the_summaries_profile_adds_a_redacted_summary_of_at_most_320_chars() -> None:
    long = "the operator at ops@example.org calibrated the arm. " + "word " * 200
    sources = cell()
    sources["runtime"] = FakeSource("runtime", (item("runtime", "runtime", text=long),))
    service = _service(sources, profile="summaries")
    assert (await service.call("context_profile", {}))["profile"] == "summaries"
    found = await service.call("search_context", {"query": "pick-place"})
    summary = found["items"][0]["summary"]
    assert summary.startswith("Pick a cube and place it in the zone.")
    assert SECRET not in summary
    runtime = await service.call("list_context", {"scope": "runtime"})
    cut = runtime["items"][0]["summary"]
    assert budgets.MAX_SUMMARY_CHARS - 2 <= len(cut) <= budgets.MAX_SUMMARY_CHARS
    assert cut.endswith("…")
    assert "ops@example.org" not in cut
    assert "[email]" in cut
    assert runtime["truncated"] is True  # a summary was cut: flagged


async def test_search_within_named_scopes_only() -> None:
    found = await _service().call("search_context", {"query": "camera", "scopes": ["skills"]})
    assert [i["scope"] for i in found["items"]] == ["skills"]
    assert found["scopes"] == ["skills"]


async def test_a_disabled_scope_named_explicitly_is_an_error_naming_the_enabled_ones() -> None:
    service = _service()
    refused = await _refused(service, "search_context", {"query": "cube", "scopes": ["tasks"]})
    assert refused.code == "CONTEXT_SCOPE_DISABLED"
    assert "navigation, skills, tools, runtime" in refused.message
    assert refused.details["enabledScopes"] == ["navigation", "skills", "tools", "runtime"]
    listed = await _refused(service, "list_context", {"scope": "evidence"})
    assert listed.code == "CONTEXT_SCOPE_DISABLED"
    assert cell()["tasks"].reads == []


async def test_an_unknown_scope_is_an_argument_error_naming_the_enabled_ones() -> None:
    refused = await _refused(_service(), "search_context", {"query": "x", "scopes": ["vault"]})
    assert refused.code == "CONTEXT_INVALID_ARGUMENTS"
    assert "enabled scopes: navigation, skills, tools, runtime" in refused.message


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("search_context", {"query": "   "}),
        ("search_context", {"query": "x" * 201}),
        ("search_context", {"query": "x", "limit": 0}),
        ("search_context", {"query": "x", "limit": 26}),
        ("search_context", {"query": "x", "limit": "5"}),
        ("search_context", {"query": "x", "limit": True}),
        ("search_context", {"query": "x", "scopes": []}),
        ("search_context", {"query": "x", "scopes": ["skills", "skills"]}),
        ("search_context", {"query": "x", "other": 1}),
        ("get_context", {"ref": ""}),
        ("get_context", {"ref": "x" * 181}),
        ("list_context", {"scope": "skills", "cursor": -1}),
        ("list_context", {}),
        ("resolve_navigation", {"query": ""}),
        ("context_profile", {"scope": "skills"}),
    ],
)
async def test_arguments_outside_the_input_models_are_refused(
    name: str, arguments: dict[str, Any]
) -> None:
    refused = await _refused(_service(), name, arguments)
    assert refused.code == "CONTEXT_INVALID_ARGUMENTS"
    assert refused.details["problems"]
    assert refused.to_payload()["retryable"] is False


async def test_a_query_of_200_characters_after_trimming_is_accepted() -> None:
    found = await _service().call("search_context", {"query": f"  {'q' * 200}  "})
    assert found["items"] == []


async def test_get_returns_the_item_a_search_returned_and_null_for_an_unknown_ref() -> None:
    service = _service()
    found = await service.call("search_context", {"query": "pick-place"})
    ref = found["items"][0]["ref"]
    got = await service.call("get_context", {"ref": ref})
    assert got["item"] == found["items"][0]
    assert (got["sourceStatus"], got["sourceTruncated"]) == ("fresh", False)
    unknown = await service.call("get_context", {"ref": opaque_ref("skills", "nothing")})
    assert unknown["item"] is None


async def test_get_on_a_scope_that_is_unavailable_is_null_without_reading_it() -> None:
    sources = cell()
    service = _service(sources)
    tasks_ref = sources["tasks"].items[0].ref
    for ref in (tasks_ref, "vault:0123", "no-scope-at-all"):
        assert (await service.call("get_context", {"ref": ref}))["item"] is None
    assert sources["tasks"].reads == []


async def test_list_pages_through_a_scope_with_next_cursor() -> None:
    many = tuple(item("tools", f"tool.{n:02d}") for n in range(12))
    service = _service({"tools": FakeSource("tools", many)}, scopes=None)
    first = await service.call("list_context", {"scope": "tools", "limit": 5})
    assert [i["label"] for i in first["items"]] == [f"tool.{n:02d}" for n in range(5)]
    assert (first["total"], first["nextCursor"], first["truncated"]) == (12, 5, False)
    last = await service.call("list_context", {"scope": "tools", "cursor": 10, "limit": 5})
    assert [i["label"] for i in last["items"]] == ["tool.10", "tool.11"]
    assert last["nextCursor"] is None
    beyond = await service.call("list_context", {"scope": "tools", "cursor": 50})
    assert (beyond["items"], beyond["nextCursor"]) == ([], None)


async def test_a_source_failure_is_a_tool_error_never_an_empty_result() -> None:
    sources = cell()
    sources["skills"] = failing("skills")
    service = _service(sources)
    for name, arguments in (
        ("search_context", {"query": "pick"}),
        ("list_context", {"scope": "skills"}),
        ("get_context", {"ref": opaque_ref("skills", "pick-place")}),
    ):
        with pytest.raises(ContextSourceError) as failed:
            await service.call(name, arguments)
        payload = failed.value.to_payload()
        assert payload["code"] == "CONTEXT_SOURCE_FAILED"
        assert payload["retryable"] is True
        assert payload["details"] == {"scope": "skills", "sourceCode": "SKILLS_UNREADABLE"}


async def test_a_crashing_or_hanging_source_is_a_source_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    crashing = FakeSource("tools", error=KeyError("boom"))
    with pytest.raises(ContextSourceError) as crashed:
        await _service({"tools": crashing}, scopes=None).call("list_context", {"scope": "tools"})
    assert crashed.value.details["sourceCode"] == "SOURCE_CRASHED"
    monkeypatch.setattr(budgets, "SOURCE_TIMEOUT_S", 0.05)
    hanging = FakeSource("tools", hang=True)
    with pytest.raises(ContextSourceError) as hung:
        await _service({"tools": hanging}, scopes=None).call("list_context", {"scope": "tools"})
    assert hung.value.details["sourceCode"] == "SOURCE_TIMEOUT"


async def test_a_source_breaking_its_contract_is_a_source_error() -> None:
    stray = ContextItem(ref=opaque_ref("tasks", "t"), scope="tasks", kind="task", label="t")
    sources = {"tools": FakeSource("tools", (stray,))}
    with pytest.raises(ContextSourceError) as failed:
        await _service(sources, scopes=None).call("list_context", {"scope": "tools"})  # type: ignore[arg-type]
    assert failed.value.details["sourceCode"] == "SOURCE_INVALID"


async def test_a_stale_source_makes_the_whole_answer_stale() -> None:
    sources = cell()
    sources["runtime"].status = "stale"
    service = _service(sources)
    found = await service.call("search_context", {"query": "running"})
    assert found["sourceStatus"] == "stale"
    fresh_only = await service.call("search_context", {"query": "arm", "scopes": ["tools"]})
    assert fresh_only["sourceStatus"] == "fresh"
    ref = sources["runtime"].items[0].ref
    assert (await service.call("get_context", {"ref": ref}))["sourceStatus"] == "stale"


async def test_at_most_1000_source_items_are_inspected_and_the_cut_is_flagged() -> None:
    many = tuple(item("tools", f"tool {n}", kind="tool") for n in range(1_200))
    source = FakeSource("tools", many)
    service = _service({"tools": source}, scopes=None)
    found = await service.call("search_context", {"query": "tool"})
    assert source.reads == [1_000]
    assert found["total"] == 1_000
    assert (found["sourceTruncated"], found["truncated"]) == (True, True)
    page = await service.call("list_context", {"scope": "tools", "cursor": 995})
    assert (page["total"], page["sourceTruncated"], page["truncated"]) == (1_000, True, True)


async def test_a_source_returning_more_than_it_was_asked_is_cut_to_1000() -> None:
    class Greedy(FakeSource):
        async def snapshot(self, limit: int = 1_000) -> Any:
            from doraforge.registry.context.source import Snapshot

            return Snapshot(self.items)  # ignores the limit and claims full coverage

    many = tuple(item("tools", f"t{n}") for n in range(1_500))
    page = await _service({"tools": Greedy("tools", many)}, scopes=None).call(
        "list_context", {"scope": "tools", "cursor": 990, "limit": 25}
    )
    assert page["total"] == 1_000
    assert len(page["items"]) == 10
    assert page["sourceTruncated"] is True


async def test_resolve_navigation_by_label_alias_route_and_words() -> None:
    service = _service()
    cases = {
        "skills": ("Skills", "label"),
        "Pending approvals": ("Approvals", "alias"),
        "/console/approvals": ("Approvals", "route"),
        "doraforge skill install": ("skill install", "route"),
        "install skill": ("skill install", "words"),
    }
    for query, (label, how) in cases.items():
        found = await service.call("resolve_navigation", {"query": query})
        assert (found["item"]["label"], found["matchedBy"]) == (label, how), query
    nothing = await service.call("resolve_navigation", {"query": "teleport"})
    assert (nothing["item"], nothing["matchedBy"]) == (None, None)


async def test_resolve_navigation_without_the_navigation_scope_is_a_tool_error() -> None:
    service = _service(scopes=frozenset({"skills"}))
    refused = await _refused(service, "resolve_navigation", {"query": "skills"})
    assert refused.code == "CONTEXT_SCOPE_DISABLED"
    assert "--context-scope navigation" in refused.message


async def test_an_unknown_tool_name_is_refused() -> None:
    refused = await _refused(_service(), "drop_tables", {})
    assert refused.code == "CONTEXT_UNKNOWN_TOOL"


async def test_the_definitions_are_read_only_closed_and_validate_real_results() -> None:
    service = _service(profile="summaries")
    definitions = {d["name"]: d for d in service.tool_definitions()}
    assert set(definitions) == service.names
    calls = {
        "context_profile": {},
        "search_context": {"query": "camera"},
        "get_context": {"ref": opaque_ref("skills", "pick-place")},
        "list_context": {"scope": "skills"},
        "resolve_navigation": {"query": "skills"},
    }
    for name, definition in definitions.items():
        annotations = definition["annotations"]
        assert annotations["readOnlyHint"] is True
        assert annotations["idempotentHint"] is True
        assert annotations["destructiveHint"] is False
        assert annotations["openWorldHint"] is False
        for schema in (definition["inputSchema"], definition["outputSchema"]):
            assert "$defs" not in json.dumps(schema)
            _assert_closed(schema)
        jsonschema.validate(calls[name], definition["inputSchema"])
        jsonschema.validate(await service.call(name, calls[name]), definition["outputSchema"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"query": "x", "extra": 1}, definitions["search_context"]["inputSchema"]
        )


def _assert_closed(schema: Any) -> None:
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            assert "additionalProperties" in schema, schema
        for value in schema.values():
            _assert_closed(value)
    elif isinstance(schema, list):
        for value in schema:
            _assert_closed(value)


async def test_a_summary_cut_never_splits_a_redaction_marker() -> None:
    # The e-mail's marker would straddle the 320-character cut.
    text = "w" * 314 + " ops@example.org and more words after it"
    sources: dict[Scope, FakeSource] = {
        "runtime": FakeSource("runtime", (item("runtime", "runtime", text=text),))
    }
    service = _service(sources, scopes=None, profile="summaries")
    page = await service.call("list_context", {"scope": "runtime"})
    summary = page["items"][0]["summary"]
    assert summary == "w" * 314 + "…"
    assert page["truncated"] is True


async def test_the_ranking_does_not_depend_on_the_order_sources_were_given() -> None:
    forward = _service(scopes=None)
    backward = _service(dict(reversed(list(cell().items()))), scopes=None)
    query = {"query": "frame cube camera running ready"}
    answer = await forward.call("search_context", query)
    assert answer["total"] >= 5
    assert answer == await backward.call("search_context", query)
