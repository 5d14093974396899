"""Property tests: any result of any context tool, over arbitrary generated sources, fits
every budget, and is flagged (``truncated`` / ``sourceTruncated``) whenever it was cut."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doraforge.registry.context import budgets
from doraforge.registry.context.budgets import dumps, estimate_tokens
from doraforge.registry.context.service import ContextService
from doraforge.registry.context.source import SCOPES, ContextItem, Scope, opaque_ref
from tests.registry.context.fake_sources import FakeSource

# Strings that stress both budgets: long, non-ASCII (four UTF-8 bytes each) and dense.
strings = st.one_of(
    st.text(max_size=40),
    st.text(alphabet='𝔸é日"\\{', max_size=600),
    st.text(alphabet="ab ,:", min_size=100, max_size=1_500),
)
scalars = st.none() | st.booleans() | st.integers() | st.floats() | strings
items_of = st.fixed_dictionaries(
    {
        "kind": strings,
        "label": strings,
        "route": st.none() | strings,
        "metadata": st.dictionaries(strings, scalars, max_size=30),
        "counts": st.dictionaries(strings, st.integers(), max_size=30),
        "aliases": st.lists(strings, max_size=3).map(tuple),
        "text": strings,
    }
)
sources_of = st.dictionaries(
    st.sampled_from(SCOPES),
    st.tuples(
        st.lists(items_of, max_size=30),
        st.sampled_from([0, 3, 1_001]),  # padding items: 1,001 passes the 1,000-item scan cap
        st.sampled_from(["fresh", "stale"]),
    ),
    min_size=1,
)
calls: st.SearchStrategy[tuple[str, dict[str, Any]]] = st.one_of(
    st.builds(lambda q, n: ("search_context", {"query": q, "limit": n}),
              st.sampled_from(["a", "b", "日", "x y", "ab"]), st.integers(1, 25)),
    st.builds(lambda s, c, n: ("list_context", {"scope": s, "cursor": c, "limit": n}),
              st.sampled_from(SCOPES), st.integers(0, 40), st.integers(1, 25)),
    st.builds(lambda q: ("resolve_navigation", {"query": q}), st.sampled_from(["a", "ab"])),
    st.just(("context_profile", {})),
)  # fmt: skip


def _build(generated: dict[Scope, Any]) -> tuple[dict[Scope, FakeSource], dict[str, ContextItem]]:
    sources: dict[Scope, FakeSource] = {}
    for scope, (records, padding, status) in generated.items():
        made = [
            ContextItem(ref=opaque_ref(scope, str(n)), scope=scope, **record)
            for n, record in enumerate(records)
        ]
        made += [
            ContextItem(ref=opaque_ref(scope, f"pad{n}"), scope=scope, kind="k", label="a b")
            for n in range(padding)
        ]
        sources[scope] = FakeSource(scope, tuple(made), status=status)
    by_ref = {i.ref: i for source in sources.values() for i in source.items}
    return sources, by_ref


def _assert_within_budgets(result: dict[str, Any]) -> None:
    text = dumps(result)
    assert len(text) <= budgets.MAX_RESULT_CHARS
    assert estimate_tokens(text) <= budgets.MAX_RESULT_TOKENS
    items = result.get("items", [])
    assert len(items) <= budgets.MAX_ITEMS
    for item in [*items, result.get("item")]:
        if item is not None:
            assert len(item.get("summary", "")) <= budgets.MAX_SUMMARY_CHARS
            assert len(item["label"]) <= budgets.MAX_LABEL_CHARS


def _assert_flagged_when_cut(
    name: str, arguments: dict[str, Any], result: dict[str, Any], sources: dict[Scope, Any]
) -> None:
    if name == "context_profile":
        return
    if name == "get_context":
        scopes = [arguments["ref"].split(":", 1)[0]]
    elif name == "resolve_navigation":
        scopes = ["navigation"]
    else:
        scopes = result.get("scopes") or [result["scope"]]
    over_scan = any(len(sources[s].items) > budgets.MAX_SCAN for s in scopes if s in sources)
    assert result["sourceTruncated"] == over_scan
    if over_scan and name in ("search_context", "list_context"):
        assert result["truncated"] is True
    stale = any(sources[s].status == "stale" for s in scopes if s in sources)
    assert result["sourceStatus"] == ("stale" if stale else "fresh")
    if name == "search_context" and len(result["items"]) < min(arguments["limit"], result["total"]):
        assert result["truncated"] is True
    if name == "list_context":
        start, total = arguments["cursor"], result["total"]
        expected = min(arguments["limit"], max(total - start, 0))
        if len(result["items"]) < expected:
            assert result["truncated"] is True
        following = start + len(result["items"])
        assert result["nextCursor"] == (following if following < total else None)


def _assert_items_flagged_when_shortened(result: dict[str, Any], by_ref: dict[str, Any]) -> None:
    for shown in [*result.get("items", []), result.get("item")]:
        if shown is None:
            continue
        source = by_ref[shown["ref"]]
        whole = shown["label"] == source.label and shown["kind"] == source.kind
        whole = whole and len(shown["metadata"]) == len(source.metadata)
        if not whole:
            assert result["truncated"] is True, shown


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    generated=sources_of,
    call=calls,
    profile=st.sampled_from(["metadata", "summaries"]),
    pick=st.integers(min_value=0),
)
def test_any_result_of_any_context_tool_fits_every_budget_and_is_flagged_when_cut(
    generated: dict[Scope, Any], call: tuple[str, dict[str, Any]], profile: str, pick: int
) -> None:
    sources, by_ref = _build(generated)
    service = ContextService(sources, profile=profile)  # type: ignore[arg-type]
    name, arguments = call
    if name == "list_context" and arguments["scope"] not in sources:
        arguments = {**arguments, "scope": next(iter(sources))}
    if name == "resolve_navigation" and "navigation" not in sources:
        refs = list(by_ref) or ["none:x"]
        name, arguments = "get_context", {"ref": refs[pick % len(refs)]}
    result = asyncio.run(service.call(name, arguments))
    _assert_within_budgets(result)
    _assert_flagged_when_cut(name, arguments, result, sources)
    _assert_items_flagged_when_shortened(result, by_ref)
    if profile == "metadata":
        shown = [*result.get("items", []), result.get("item")]
        assert all("summary" not in item for item in shown if item is not None)
