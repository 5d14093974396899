"""MCP tool results within the result budgets: a ``portos_tool_result`` becomes a
``CallToolResult`` (structured content and its text), a failure an ``isError`` result, and a
result carrying an image an MCP image block beside a structured part without the bytes.

:func:`apply_budget` is the one cut of a structured result: lists capped, the largest
top-level members left out first (named in ``elided``), then strings shortened, and every
cut flagged with ``truncated`` so partial data never looks complete.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import mcp.types as types

from doraforge.registry.context.budgets import MAX_IMAGE_DATA_CHARS, dumps
from doraforge.registry.settings import ServerSettings

IMAGE_TYPES = ("image/jpeg", "image/png")


# Said in the text an agent reads, not only in structured content it may ignore: a call
# whose effect is unknown must never be repeated to "make sure".
_OUTCOME_UNKNOWN = (
    " (outcome unknown: the call may have taken effect. Do not retry it; reconcile by "
    "reading its status first.)"
)


#: Where an ``isError`` result carries its error object for programs (``_meta``).
ERROR_META = "doraforge/error"


def tool_error(
    error: dict[str, Any], request_id: str, meta: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """An ``isError`` result: the error as a line of text (``CODE: message``) and as the
    JSON document ``{"ok": false, "error": {...}}``, and the error object in ``_meta``
    under :data:`ERROR_META`; no ``structuredContent``.

    A tool that advertises an ``outputSchema`` promises it for its results, and the
    official TypeScript SDK and MCP Inspector hold an error's structured content to it as
    well: an ``{ok: false, error}`` never fits a result schema, so those clients threw a
    schema error in place of the tool's own. MCP's reference servers answer errors with
    text alone; so does this one, and the model reads the whole error object either way."""
    text = f"{error.get('code')}: {error.get('message')}"
    details = error.get("details")
    if isinstance(details, dict) and details.get("remoteState") == "unknown":
        text += _OUTCOME_UNKNOWN
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=text),
            types.TextContent(type="text", text=dumps({"ok": False, "error": error})),
        ],
        isError=True,
        _meta={"doraforge/requestId": request_id, **(meta or {}), ERROR_META: error},
    ).model_dump(by_alias=True, exclude_none=True, mode="json")


def tool_result(outcome: dict[str, Any], settings: ServerSettings) -> dict[str, Any]:
    """A ``portos_tool_result`` as an MCP ``CallToolResult`` within the result budgets; a
    result with a top-level ``image`` (:func:`image_of`) becomes an image block too."""
    meta = {
        "doraforge/requestId": outcome.get("requestId"),
        "doraforge/duplicate": bool(outcome.get("duplicate")),
        "doraforge/state": outcome.get("state"),
    }
    if outcome.get("state") != "completed":
        return tool_error(outcome.get("error") or {}, str(outcome.get("requestId")), meta)
    value = outcome.get("result")
    structured = value if isinstance(value, dict) else {"result": value}
    image = image_of(structured)
    if image is not None:
        return _image_result(structured, image, settings, meta)
    bounded, truncated = apply_budget(
        structured, max_chars=settings.max_result_chars, max_items=settings.max_result_items
    )
    meta["doraforge/truncated"] = truncated
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=dumps(bounded))],
        structuredContent=bounded,
        isError=False,
        _meta=meta,
    ).model_dump(by_alias=True, exclude_none=True, mode="json")


def image_of(structured: Mapping[str, Any]) -> types.ImageContent | None:
    """The MCP image block of a result whose top level holds ``image: {"mediaType":
    "image/jpeg" | "image/png", "data": <base64>, ...}``, or ``None``.

    Data over :data:`MAX_IMAGE_DATA_CHARS` or not base64 is not passed on as an image: the
    result stays structured only (where the ordinary budget leaves an oversized image out
    and names it in ``elided``), so a model is never handed bytes it cannot decode or more
    than the result budget allows.
    """
    image = structured.get("image")
    if not isinstance(image, Mapping) or image.get("mediaType") not in IMAGE_TYPES:
        return None
    data = image.get("data")
    if not isinstance(data, str) or not 0 < len(data) <= MAX_IMAGE_DATA_CHARS:
        return None
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return types.ImageContent(type="image", data=data, mimeType=image["mediaType"])


def _image_result(
    structured: dict[str, Any],
    image: types.ImageContent,
    settings: ServerSettings,
    meta: dict[str, Any],
) -> dict[str, Any]:
    """The image block (index 0), the structured result without the image's data (which
    points at that block) and its text; the structured part shrinks until the whole
    serialized result is within ``max_result_chars`` plus the image data."""
    described = {k: v for k, v in structured["image"].items() if k != "data"}
    without = {**structured, "image": {**described, "dataInContent": 0}}
    limit = settings.max_result_chars // 2
    while True:
        bounded, truncated = apply_budget(
            without, max_chars=limit, max_items=settings.max_result_items
        )
        result = types.CallToolResult(
            content=[image, types.TextContent(type="text", text=dumps(bounded))],
            structuredContent=bounded,
            isError=False,
            _meta={**meta, "doraforge/truncated": truncated},
        ).model_dump(by_alias=True, exclude_none=True, mode="json")
        if len(dumps(result)) - len(image.data) <= settings.max_result_chars or limit <= 256:
            return result
        limit //= 2


def _cap_items(value: Any, max_items: int) -> tuple[Any, bool]:
    if isinstance(value, list):
        capped = [_cap_items(v, max_items) for v in value[:max_items]]
        return [v for v, _ in capped], len(value) > max_items or any(t for _, t in capped)
    if isinstance(value, dict):
        pairs = {k: _cap_items(v, max_items) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(t for _, t in pairs.values())
    return value, False


def _cap_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit]
    if isinstance(value, list):
        return [_cap_strings(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: _cap_strings(v, limit) for k, v in value.items()}
    return value


def apply_budget(
    structured: dict[str, Any], *, max_chars: int, max_items: int
) -> tuple[dict[str, Any], bool]:
    """``structured`` with lists capped at ``max_items`` and its JSON within ``max_chars``.

    A truncated result carries ``truncated: true`` (plus ``originalChars`` when characters
    were cut) so partial data never looks complete.
    """
    capped, truncated = _cap_items(structured, max_items)
    original = len(dumps(structured))
    capped, elided = _elide_largest(capped, max_chars - 256)
    truncated = truncated or bool(elided)
    limit = max_chars
    while len(dumps(capped)) > max_chars - 64 and limit > 16:
        limit //= 2
        capped = _cap_strings(capped, limit)
        truncated = True
    if len(dumps(capped)) > max_chars - 64:
        preview = dumps(structured)[: max_chars // 3]  # re-escaping at most doubles it
        capped = {"preview": preview}
        truncated = True
    if truncated:
        capped = {**capped, "truncated": True, "originalChars": original}
        if elided and "preview" not in capped:
            capped["elided"] = elided
    return capped, truncated


def _elide_largest(value: dict[str, Any], budget: int) -> tuple[dict[str, Any], list[str]]:
    """Leave out the largest top-level members until ``value`` fits ``budget``.

    A big answer (a task with its records and evidence) keeps its small, decisive fields
    (``status``, ``verdict``, ids) whole instead of having every string shortened or the
    whole answer reduced to a preview; the keys left out are named so the agent knows what
    it did not get. Nothing is left out of an answer that already fits.
    """
    sizes = {key: len(dumps(member)) for key, member in value.items()}
    total = len(dumps(value))
    kept = dict(value)
    elided: list[str] = []
    for key in sorted(sizes, key=lambda k: -sizes[k]):
        if total <= budget:
            break
        del kept[key]
        elided.append(key)
        total -= sizes[key] + len(dumps(key)) + 2
    return kept, elided
