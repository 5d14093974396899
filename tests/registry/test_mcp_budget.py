"""MCP result budgets: at most 25 items per list and 20,000 serialised characters, with an
explicit ``truncated`` flag whenever anything was cut."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from doraforge.registry.mcp_results import tool_result
from doraforge.registry.result_budget import cut
from doraforge.registry.settings import ServerSettings

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3000),
    lambda inner: st.lists(inner, max_size=40) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=60,
)


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


@settings(max_examples=200, deadline=None)
@given(value=st.dictionaries(st.text(max_size=5), json_values, max_size=6))
def test_any_result_fits_the_budget_and_says_when_it_was_cut(value: dict[str, Any]) -> None:
    done = cut(value, max_chars=2000, max_items=5)
    bounded, truncated = done.value, done.truncated
    assert _size(bounded) <= 2000
    assert truncated == (bounded != value)
    if truncated:
        assert bounded["truncated"] is True


def test_a_small_result_is_untouched() -> None:
    value = {"items": [1, 2, 3], "text": "ok"}
    done = cut(value, max_chars=20_000, max_items=25)
    assert (done.value, done.truncated) == (value, False)


def test_long_lists_are_capped_at_25_items_and_flagged() -> None:
    done = cut({"a": list(range(30))}, max_chars=20_000, max_items=25)
    bounded, truncated = done.value, done.truncated
    assert truncated is True
    assert bounded["a"] == list(range(25))
    assert bounded["truncated"] is True


def test_a_big_answer_keeps_its_small_fields_whole_and_names_what_it_left_out() -> None:
    answer = {
        "status": "succeeded",
        "verdict": {"outcome": "succeeded", "reasons": ["cube in zone"]},
        "records": [{"result": "x" * 900} for _ in range(20)],
        "evidence": [{"path": "e" * 400} for _ in range(20)],
    }
    done = cut(answer, max_chars=20_000, max_items=25)
    bounded, truncated = done.value, done.truncated
    assert truncated is True
    assert bounded["status"] == "succeeded"
    assert bounded["verdict"] == answer["verdict"]
    assert bounded["evidence"] == answer["evidence"]  # the smaller list still fits
    assert "records" not in bounded
    assert bounded["elided"] == ["records"]
    assert _size(bounded) <= 20_000


def test_a_tool_result_text_never_exceeds_the_character_budget() -> None:
    outcome = {"requestId": "r", "state": "completed", "result": {"q": '"\\' * 40_000}}
    result = tool_result(outcome, ServerSettings())
    assert len(result["content"][0]["text"]) <= 20_000
    assert result["_meta"]["doraforge/truncated"] is True


def test_a_non_object_result_is_wrapped_for_structured_content() -> None:
    result = tool_result({"requestId": "r", "state": "completed", "result": [1]}, ServerSettings())
    assert result["structuredContent"] == {"result": [1]}
