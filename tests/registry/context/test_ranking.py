"""Ranking: question words never outrank what a question asks about."""

from __future__ import annotations

from doraforge.registry.context.ranking import navigation_match, query_words, ranked
from doraforge.registry.context.source import ContextItem, opaque_ref


def _page(label: str, route: str, *aliases: str) -> ContextItem:
    return ContextItem(
        opaque_ref("navigation", route), "navigation", "page", label, route, aliases=aliases
    )


def _command(words: str) -> ContextItem:
    route = f"doraforge {words}"
    return ContextItem(opaque_ref("navigation", route), "navigation", "command", route, route)


ITEMS = [
    _page("Cell", "/console/#/cell", "camera", "robot"),
    _page("Approvals", "/console/#/approvals"),
    _command("approvals approve"),
    _command("skill start"),
]


def test_a_question_is_matched_by_its_content_words() -> None:
    assert query_words("Where do I see the camera?") == ["camera"]
    item, how = navigation_match(ITEMS, "where do I see the camera")
    assert item is not None
    assert item.label == "Cell"
    assert how == "words"


def test_a_query_of_only_question_words_still_matches_something_it_names() -> None:
    assert query_words("do it") == ["do", "it"]
    labels = [item.label for item in ranked(ITEMS, "do")]
    assert labels[:1] == ["doraforge approvals approve"]


def test_a_one_letter_word_matches_whole_words_only() -> None:
    items = [_page("X axis", "/console/#/x"), _page("Xylophone", "/console/#/xy")]
    assert [item.label for item in ranked(items, "x")] == ["X axis"]


def test_a_word_matches_the_start_of_a_word_not_its_middle() -> None:
    assert [item.label for item in ranked(ITEMS, "prov")] == []
    assert {item.label for item in ranked(ITEMS, "appro")} == {
        "Approvals",
        "doraforge approvals approve",
    }
