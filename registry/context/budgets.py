"""Every budget of the context tools, and the one function that fits a result inside them.

The spec's numbers, named once: at most :data:`MAX_ITEMS` returned items, at most
:data:`~.source.MAX_SCAN_ITEMS` inspected source items per scope and call, summaries of at
most :data:`MAX_SUMMARY_CHARS`, queries of at most :data:`MAX_QUERY_CHARS`, and at most
:data:`MAX_RESULT_CHARS` serialized characters and about :data:`MAX_RESULT_TOKENS` tokens
(:func:`estimate_tokens`) per structured result. One item never takes more than a fifth of
a result (:data:`MAX_ITEM_CHARS`, :data:`MAX_ITEM_TOKENS`), so a ``get_context`` answer
always fits and a page never degenerates to one huge record.

:func:`fit_items` drops items from the end until a result fits both the character and the
token budget and then says so (``truncated: true``): a cut answer never looks complete.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from doraforge.registry.context.source import MAX_SCAN_ITEMS

#: Returned items per call (``limit`` is 1..MAX_ITEMS), and the default ``limit``.
MAX_ITEMS = 25
DEFAULT_ITEMS = 10
#: Inspected source items per scope and call (the source contract's cap, repeated here so
#: every budget is read from one module).
MAX_SCAN = MAX_SCAN_ITEMS
#: Characters of one redacted summary (``summaries`` profile only).
MAX_SUMMARY_CHARS = 320
#: Characters of a ``query`` after trimming; of a ``ref``.
MAX_QUERY_CHARS = 200
MAX_REF_CHARS = 180
#: Serialized characters and estimated tokens of one structured result.
MAX_RESULT_CHARS = 20_000
MAX_RESULT_TOKENS = 5_000
#: One item's share of a result: a fifth, so a single record always fits whole.
MAX_ITEM_CHARS = MAX_RESULT_CHARS // 5
MAX_ITEM_TOKENS = MAX_RESULT_TOKENS // 5
#: Field caps of one returned item (longer strings are cut and the result flagged).
MAX_LABEL_CHARS = 200
MAX_KIND_CHARS = 64
MAX_ROUTE_CHARS = 200
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 200
MAX_ENTRIES = 24
#: Words of a query that are matched (the rest are ignored: 200 characters rarely hold more).
MAX_QUERY_TOKENS = 16
#: How long one source may take to answer before the call fails (retryable).
SOURCE_TIMEOUT_S = 5.0
#: Base64 characters of an image a semantic tool result may carry into an MCP image block.
MAX_IMAGE_DATA_CHARS = 16_000
#: Messages in one JSON-RPC batch (protocol 2025-03-26 only).
MAX_BATCH_MESSAGES = 32

TOKEN_ESTIMATOR = (
    "compact JSON; each run of ASCII letters/digits counts ceil(n/3) tokens, every other "
    "ASCII character 1, every non-ASCII character its UTF-8 byte count"
)

_CHUNK = re.compile(r"[A-Za-z0-9]{1,3}")


def dumps(value: Any) -> str:
    """The compact JSON every budget is measured on (as the MCP edge serializes it)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def estimate_tokens(text: str) -> int:
    """An upper-leaning estimate of how many tokens a model spends reading ``text``.

    ``ceil(chars / 4)`` is the usual rule of thumb, but it holds for English prose, not for
    JSON: JSON is dense in quotes, colons, commas and brackets, which BPE tokenizers often
    spend a token each on, and in hex digests and identifiers, which split into short
    pieces. So this estimator counts every ASCII character that is not a letter or digit as
    a whole token, runs of letters and digits at one token per three characters (words
    average about four), and a non-ASCII character at its UTF-8 byte count (a byte-level
    tokenizer never needs more). Real tokenizers merge pairs like ``":"`` and ``","``, so
    the true count is usually lower: a result inside this estimate is inside the budget.
    """
    # A run of n letters/digits splits into ceil(n/3) chunks of at most three; what is left
    # costs one token per UTF-8 byte (one per ASCII character).
    chunks = len(_CHUNK.findall(text))
    return chunks + len(_CHUNK.sub("", text).encode())


def within(
    value: Any, *, max_chars: int = MAX_RESULT_CHARS, max_tokens: int = MAX_RESULT_TOKENS
) -> bool:
    """Whether ``value``'s compact JSON is inside both the character and the token budget."""
    text = dumps(value)
    return len(text) <= max_chars and estimate_tokens(text) <= max_tokens


def clip(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters (ending in ``…`` when cut), and whether
    it was cut."""
    if len(text) <= limit:
        return text, False
    return text[: max(limit - 1, 0)] + "…", True


def fit_items(
    result: Mapping[str, Any],
    *,
    key: str = "items",
    on_cut: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """``result`` with items dropped from the end of ``result[key]`` until it fits the
    result budgets, then ``truncated: true``; unchanged when it already fits.

    ``on_cut`` (when given) adjusts the cut result before it is measured again (a page
    moves its ``nextCursor`` back to the first item it no longer holds). Items are assumed
    to fit :data:`MAX_ITEM_CHARS` each, so the loop always ends inside the budget.
    """
    fitted = dict(result)
    items = list(fitted.get(key) or [])
    if within(fitted):
        return fitted
    # The longest prefix that fits, by bisection: five measurements for 25 items instead
    # of up to 25 (each one serializes the whole result).
    low, high = 0, len(items)
    while low < high:
        mid = (low + high + 1) // 2
        if within(_cut(fitted, key, items[:mid], on_cut)):
            low = mid
        else:
            high = mid - 1
    return _cut(fitted, key, items[:low], on_cut)


def _cut(
    result: dict[str, Any],
    key: str,
    items: list[Any],
    on_cut: Callable[[dict[str, Any]], None] | None,
) -> dict[str, Any]:
    cut = {**result, key: items, "truncated": True}
    if on_cut is not None:
        on_cut(cut)
    return cut
