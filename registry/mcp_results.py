"""MCP tool results within the result budgets: a ``portos_tool_result`` becomes a
``CallToolResult`` (structured content and its text), a failure an ``isError`` result, and a
result carrying an image an MCP image block beside a structured part without the bytes.

A result over budget is cut by :func:`registry.result_budget.cut`, held to the tool's output
schema; one that cannot be cut validly is the ``isError`` result ``TOOL_RESULT_TOO_LARGE``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import mcp.types as types

from doraforge.registry.context.budgets import MAX_IMAGE_DATA_CHARS, dumps
from doraforge.registry.errors import ToolFailure
from doraforge.registry.result_budget import Cut, ResultTooLarge, Schema, cut
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


def tool_result(
    outcome: dict[str, Any],
    settings: ServerSettings,
    output_schema: Schema | None = None,
    *,
    name: str = "the tool",
) -> dict[str, Any]:
    """A ``portos_tool_result`` as an MCP ``CallToolResult`` within the result budgets,
    still valid against ``output_schema``; a result with a top-level ``image``
    (:func:`image_of`) becomes an image block too. ``name`` is the tool's listed name, for
    the error of a result no valid cut fits."""
    meta = {
        "doraforge/requestId": outcome.get("requestId"),
        "doraforge/duplicate": bool(outcome.get("duplicate")),
        "doraforge/state": outcome.get("state"),
    }
    if outcome.get("state") != "completed":
        return tool_error(outcome.get("error") or {}, str(outcome.get("requestId")), meta)
    value = outcome.get("result")
    structured = value if isinstance(value, dict) else {"result": value}
    schema = output_schema if isinstance(value, dict) else None  # it describes the value
    image = image_of(structured)
    try:
        if image is not None:
            return _image_result(structured, image, settings, meta, schema)
        bounded = cut(
            structured,
            schema,
            max_chars=settings.max_result_chars,
            max_items=settings.max_result_items,
        )
    except ResultTooLarge as exc:
        request_id = str(outcome.get("requestId"))
        return tool_error(too_large(name, exc, request_id), request_id, meta)
    return _structured(bounded, meta)


def too_large(name: str, exc: ResultTooLarge, request_id: str) -> dict[str, Any]:
    """The error of a completed call whose result no valid cut fits: the call's effect
    stands, and its whole result is retained under its requestId."""
    return ToolFailure(
        "TOOL_RESULT_TOO_LARGE",
        f"{name} completed, but its result ({exc.original_chars} characters) does not fit "
        f"the MCP result budget ({exc.max_chars}) in any form its output schema allows; do "
        "not call it again: its effect stands, and the whole result is retained at "
        f"GET /api/tools/calls/{request_id}",
        retryable=False,
        details={
            "requestId": request_id,
            "resultChars": exc.original_chars,
            "maxResultChars": exc.max_chars,
        },
    ).to_payload()


def _structured(bounded: Cut, meta: dict[str, Any], *before: types.ImageContent) -> dict[str, Any]:
    """The ``CallToolResult`` of a cut: its value as structured content and text, and what
    was cut in ``_meta`` (``doraforge/truncated``, ``doraforge/cut``)."""
    marks: dict[str, Any] = {"doraforge/truncated": bounded.truncated}
    if bounded.truncated:
        marks["doraforge/cut"] = bounded.meta()
    return types.CallToolResult(
        content=[*before, types.TextContent(type="text", text=dumps(bounded.value))],
        structuredContent=bounded.value,
        isError=False,
        _meta={**meta, **marks},
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
    output_schema: Schema | None,
) -> dict[str, Any]:
    """The image block (index 0), the structured result without the image's data (which
    points at that block) and its text; the structured part shrinks until the whole
    serialized result is within ``max_result_chars`` plus the image data."""
    described = {k: v for k, v in structured["image"].items() if k != "data"}
    without = {**structured, "image": {**described, "dataInContent": 0}}
    limit, result = settings.max_result_chars // 2, None
    while True:
        try:
            bounded = cut(
                without, output_schema, max_chars=limit, max_items=settings.max_result_items
            )
        except ResultTooLarge:
            if result is None:
                raise
            return result  # the smallest valid cut
        result = _structured(bounded, meta, image)
        if len(dumps(result)) - len(image.data) <= settings.max_result_chars or limit <= 256:
            return result
        limit //= 2
