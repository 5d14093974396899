"""The context budgets: the token estimator and the function that fits a result."""

from __future__ import annotations

import math

from doraforge.registry.context import budgets
from doraforge.registry.context.budgets import dumps, estimate_tokens, fit_items, within


def test_the_spec_budgets_are_named_constants() -> None:
    assert budgets.MAX_ITEMS == 25
    assert budgets.MAX_SCAN == 1_000
    assert budgets.MAX_SUMMARY_CHARS == 320
    assert budgets.MAX_QUERY_CHARS == 200
    assert budgets.MAX_RESULT_CHARS == 20_000
    assert budgets.MAX_RESULT_TOKENS == 5_000


def test_the_estimator_counts_punctuation_words_and_non_ascii_as_documented() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abc") == 1
    assert estimate_tokens("abcd") == 2  # ceil(4 / 3)
    assert estimate_tokens('{"a":1}') == 7  # five punctuation marks, two one-letter runs
    assert estimate_tokens("é") == 2  # its UTF-8 bytes
    assert estimate_tokens("日本") == 6


def test_the_estimator_never_counts_fewer_than_a_quarter_of_the_characters_of_json() -> None:
    samples = [
        {"ref": "skills:0f3a9c1b2d4e5f60718293a4", "label": "pick-place", "counts": {"tools": 3}},
        {"items": [{"a": n, "b": [True, None, 1.5]} for n in range(50)]},
        {"text": "Pick a cube and place it in the zone, then report the verdict. " * 20},
    ]
    for sample in samples:
        text = dumps(sample)
        assert estimate_tokens(text) >= math.ceil(len(text) / 4), sample


def test_a_result_that_fits_is_returned_unchanged() -> None:
    result = {"items": [{"n": n} for n in range(25)], "truncated": False}
    assert fit_items(result) == result


def test_items_are_dropped_from_the_end_until_it_fits_and_the_cut_is_flagged() -> None:
    items = [{"n": n, "label": "x" * 1_500} for n in range(25)]
    fitted = fit_items({"items": items, "truncated": False})
    assert fitted["truncated"] is True
    kept = fitted["items"]
    assert kept == items[: len(kept)]
    assert within(fitted)
    # The longest prefix that fits: one more item would not.
    assert not within({**fitted, "items": items[: len(kept) + 1]})


def test_the_token_budget_binds_before_the_character_budget_on_dense_json() -> None:
    items = [{"v": [1, 2, 3, 4, 5, 6, 7, 8, 9, 0] * 30} for _ in range(25)]
    result = {"items": items, "truncated": False}
    text = dumps(result)
    assert len(text) <= budgets.MAX_RESULT_CHARS  # chars alone would let it pass ...
    assert estimate_tokens(text) > budgets.MAX_RESULT_TOKENS  # ... tokens do not
    fitted = fit_items(result)
    assert fitted["truncated"] is True
    assert estimate_tokens(dumps(fitted)) <= budgets.MAX_RESULT_TOKENS


def test_a_cut_page_moves_its_cursor_back_through_on_cut() -> None:
    items = [{"label": "y" * 3_000} for _ in range(10)]

    def recursor(cut: dict[str, object]) -> None:
        cut["nextCursor"] = len(cut["items"])  # type: ignore[arg-type]

    fitted = fit_items({"items": items, "nextCursor": None}, on_cut=recursor)
    assert fitted["nextCursor"] == len(fitted["items"]) < 10
