"""Deterministic word matching for ``search_context`` and ``resolve_navigation``.

A query is cut into case-folded words; an item matches when one of its words starts with
a query word (a one-letter query word must equal a word). Where a word matches weighs:
the label most, then aliases, then kind and metadata, then the private text (which may
match but is never returned). Ties break by scope order, label, then reference, so the
same sources and query always give the same page.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence

from doraforge.registry.context.budgets import MAX_QUERY_TOKENS
from doraforge.registry.context.source import SCOPES, ContextItem

_WORD = re.compile(r"\w+")
#: Weights of a match in each field, and the bonus when every query word matched.
_LABEL, _ALIAS, _META, _TEXT, _ALL = 8, 4, 2, 1, 16
#: Private text is matched over its first characters only: a source's long text must not
#: make one search cost more than the scan budget allows.
_TEXT_MATCH_CHARS = 20_000


def words(text: str) -> list[str]:
    """The case-folded words of ``text``."""
    return _WORD.findall(text.casefold())


#: Words a question is made of rather than what it asks about ("where do I see the
#: camera"): left out of a query that has other words, so "do" cannot prefix-match
#: "doraforge" in every command's label and outrank the one content word.
_STOPWORDS = (
    "a an and are can do does how i in is it me my of on or show see the to what where "
    "which who why with you"
)
STOPWORDS = frozenset(_STOPWORDS.split())


def query_words(query: str) -> list[str]:
    """The distinct words of ``query`` without :data:`STOPWORDS` (unless that leaves
    none), at most :data:`MAX_QUERY_TOKENS`, in order."""
    found = list(dict.fromkeys(words(query)))
    content = [w for w in found if w not in STOPWORDS]
    return (content or found)[:MAX_QUERY_TOKENS]


type Private = Callable[[str], str]


def _as_is(text: str) -> str:
    return text


def _joined(found: Iterable[str]) -> str:
    """Words as one string, each preceded and followed by a space: a word starts with a
    term exactly when `` term`` occurs in it, one C-level substring search per field."""
    return " " + " ".join(found) + " "


@functools.lru_cache(maxsize=8192)
def _fields(
    label: str, aliases: tuple[str, ...], meta: str, text: str, private: Private
) -> tuple[tuple[int, str], ...]:
    """Each field's weight and joined words (cached: a source's items are scanned again
    on every call, and their words do not change between calls)."""
    return (
        (_LABEL, _joined(words(label))),
        (_ALIAS, _joined(w for alias in aliases for w in words(alias))),
        (_META, _joined(words(meta))),
        (_TEXT, _joined(words(private(text[:_TEXT_MATCH_CHARS])))),
    )


def score(item: ContextItem, terms: Sequence[str], private: Private = _as_is) -> int:
    """How well ``item`` matches ``terms`` (0: not at all); its private text is matched
    as ``private`` makes it (the service passes the redaction function)."""
    meta = " ".join([item.kind, *(str(v) for v in item.metadata.values())])
    fields = _fields(item.label, item.aliases, meta, item.text, private)
    total = matched = 0
    for term in terms:
        # A one-letter term must be a whole word; a longer one may start a word.
        needle = f" {term} " if len(term) == 1 else f" {term}"
        best = next((weight for weight, joined in fields if needle in joined), 0)
        total += best
        matched += best > 0
    if total and matched == len(terms):
        total += _ALL
    return total


def ranked(
    items: Iterable[ContextItem], query: str, private: Private = _as_is
) -> list[ContextItem]:
    """The items matching ``query``, best first, in a deterministic order."""
    terms = query_words(query)
    if not terms:
        return []
    scored = [(score(item, terms, private), item) for item in items]
    hits = [(points, item) for points, item in scored if points > 0]
    hits.sort(key=lambda pair: (-pair[0], *_order(pair[1])))
    return [item for _, item in hits]


def _order(item: ContextItem) -> tuple[int, str, str]:
    return SCOPES.index(item.scope), item.label.casefold(), item.ref


def navigation_match(
    items: Sequence[ContextItem], query: str, private: Private = _as_is
) -> tuple[ContextItem | None, str | None]:
    """The navigation item ``query`` names, and how: its label, an alias, its route (with
    or without the leading ``/`` or ``doraforge``), else the best word match."""
    asked = " ".join(words(query))
    if not asked:
        return None, None
    by_label = [i for i in items if " ".join(words(i.label)) == asked]
    by_alias = [i for i in items if any(" ".join(words(a)) == asked for a in i.aliases)]
    route = _route_words(query)
    by_route = [i for i in items if i.route is not None and _route_words(i.route) == route]
    for found, how in ((by_label, "label"), (by_alias, "alias"), (by_route, "route")):
        if found:
            return min(found, key=_order), how
    best = ranked(items, query, private)
    return (best[0], "words") if best else (None, None)


def _route_words(route: str) -> str:
    found = words(route)
    return " ".join(found[1:] if found[:1] == ["doraforge"] else found)
