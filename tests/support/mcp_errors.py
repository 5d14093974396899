"""Reading an MCP ``isError`` result the way doraforge's MCP edge answers one
(:func:`doraforge.registry.mcp_results.tool_error`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.types import CallToolResult

from doraforge.registry.mcp_results import ERROR_META


def error_of(result: CallToolResult | Mapping[str, Any]) -> dict[str, Any]:
    """The error object of an ``isError`` result, checked to be where doraforge puts it:
    in ``_meta`` under ``doraforge/error``, as ``CODE: message`` text and as the JSON text
    ``{"ok": false, "error": ...}``, with no ``structuredContent`` (which clients hold to
    the tool's ``outputSchema``)."""
    document = (
        result.model_dump(by_alias=True, exclude_none=True, mode="json")
        if isinstance(result, CallToolResult)
        else dict(result)
    )
    assert document.get("isError") is True, document
    assert document.get("structuredContent") is None, document
    error: dict[str, Any] = document["_meta"][ERROR_META]
    texts = [block["text"] for block in document["content"] if block.get("type") == "text"]
    assert texts[0].startswith(f"{error['code']}: "), texts
    assert json.loads(texts[-1]) == {"ok": False, "error": error}, texts
    return error
