"""Deterministic word matching for ``search_context`` and ``resolve_navigation``.

A query is cut into case-folded words; an item matches when one of its words starts with
a query word (a one-letter query word must equal a word). Where a word matches weighs:
the label most, then aliases, then kind and metadata, then the private text (which may
match but is never returned). Ties break by scope order, label, then reference, so the
same sources and query always give the same page.
"""

from __future__ import annotations

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


def query_words(query: str) -> list[str]:
    """The distinct words of ``query``, at most :data:`MAX_QUERY_TOKENS`, in order."""
    return list(dict.fromkeys(words(query)))[:MAX_QUERY_TOKENS]


type Private = Callable[[str], str]


def _as_is(text: str) -> str:
    return text


def score(item: ContextItem, terms: Sequence[str], private: Private = _as_is) -> int:
    """How well ``item`` matches ``terms`` (0: not at all); its private text is matched
    as ``private`` makes it (the service passes the redaction function)."""
    fields = (
        (_LABEL, words(item.label)),
        (_ALIAS, [w for alias in item.aliases for w in words(alias)]),
        (_META, words(" ".join([item.kind, *(str(v) for v in item.metadata.values())]))),
        (_TEXT, words(private(item.text[:_TEXT_MATCH_CHARS]))),
    )
    total = matched = 0
    for term in terms:
        best = max((weight for weight, found in fields if _hits(term, found)), default=0)
        total += best
        matched += best > 0
    if total and matched == len(terms):
        total += _ALL
    return total


def _hits(term: str, found: Iterable[str]) -> bool:
    if len(term) == 1:
        return term in found
    return any(word.startswith(term) for word in found)


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
