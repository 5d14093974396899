"""One source item as a context tool returns it: capped fields, a bounded record, and a
redacted summary under the summaries profile only.

A source's item is trusted for *what* it says (the source contract keeps paths, tokens and
raw outputs out) but not for *how much*: every string is capped, at most
:data:`~.budgets.MAX_ENTRIES` metadata and count entries are kept, and the whole item is
held to a fifth of a result's budget, so one record can never crowd out a page.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from doraforge.registry.context import budgets
from doraforge.registry.context.budgets import clip
from doraforge.registry.context.redaction import bounded
from doraforge.registry.context.source import ContextItem

type Redact = Callable[[str], str]

#: Integers larger than this are not counts or metadata a model can use; they are left out
#: rather than returned as a 1,000-digit number.
_MAX_INT = 10**15
_SPACE = re.compile(r"\s+")


def item_out(item: ContextItem, *, redact: Redact | None = None) -> tuple[dict[str, Any], bool]:
    """``item`` as returned (``summary`` added when ``redact`` is given), and whether any
    part of it was cut to fit its budgets."""
    label, cut_label = clip(item.label, budgets.MAX_LABEL_CHARS)
    kind, cut_kind = clip(item.kind, budgets.MAX_KIND_CHARS)
    route, cut_route = (
        (None, False) if item.route is None else clip(item.route, budgets.MAX_ROUTE_CHARS)
    )
    metadata, cut_metadata = _entries(item.metadata, _scalar)
    counts, cut_counts = _entries(item.counts, _count)
    out: dict[str, Any] = {
        "ref": item.ref,
        "scope": item.scope,
        "kind": kind,
        "label": label,
        "route": route,
        "metadata": metadata,
        "counts": counts,
    }
    cut = cut_label or cut_kind or cut_route or cut_metadata or cut_counts
    if redact is not None:
        out["summary"], cut_summary = summary(item.text, redact)
        cut = cut or cut_summary
    return out, _fit_item(out) or cut


def summary(text: str, redact: Redact) -> tuple[str, bool]:
    """``text`` redacted, whitespace collapsed, then cut to :data:`~.budgets.MAX_SUMMARY_CHARS`
    (and whether it was cut).

    Redaction runs on the whole text before the cut, so a secret straddling the limit is
    replaced as a whole rather than half-shown, and the cut never splits a marker."""
    collapsed = _SPACE.sub(" ", redact(text)).strip()
    return bounded(collapsed, budgets.MAX_SUMMARY_CHARS), len(collapsed) > budgets.MAX_SUMMARY_CHARS


def _entries(
    values: Mapping[str, Any], keep: Callable[[Any], tuple[Any, bool]]
) -> tuple[dict[str, Any], bool]:
    """The first :data:`~.budgets.MAX_ENTRIES` usable entries, keys and values capped."""
    kept: dict[str, Any] = {}
    cut = False
    for key, value in values.items():
        name, cut_key = clip(str(key), budgets.MAX_KEY_CHARS)
        shown, usable = keep(value)
        if len(kept) >= budgets.MAX_ENTRIES or name in kept or not usable:
            cut = True
            continue
        kept[name] = shown
        cut = cut or cut_key or (isinstance(value, str) and shown != value)
    return kept, cut


def _scalar(value: Any) -> tuple[Any, bool]:
    if value is None or isinstance(value, bool):
        return value, True
    if isinstance(value, str):
        return clip(value, budgets.MAX_VALUE_CHARS)[0], True
    if isinstance(value, int):
        return value, abs(value) < _MAX_INT
    if isinstance(value, float):
        return value, math.isfinite(value)
    return None, False


def _count(value: Any) -> tuple[Any, bool]:
    usable = isinstance(value, int) and not isinstance(value, bool) and abs(value) < _MAX_INT
    return value, usable


def _fit_item(out: dict[str, Any]) -> bool:
    """Drop metadata, then count entries from the end, then halve the longest string
    (summary, label, route or kind), until ``out`` fits one item's budget; whether anything
    was cut. It ends: the reference alone (at most 180 characters) always fits."""
    cut = False
    while not budgets.within(
        out, max_chars=budgets.MAX_ITEM_CHARS, max_tokens=budgets.MAX_ITEM_TOKENS
    ):
        cut = True
        if out["metadata"]:
            out["metadata"].popitem()
        elif out["counts"]:
            out["counts"].popitem()
        else:
            longest = max(_SHRINKABLE, key=lambda key: len(out.get(key) or ""))
            out[longest] = clip(out[longest], len(out[longest]) // 2)[0]
    return cut


_SHRINKABLE = ("summary", "label", "route", "kind")
