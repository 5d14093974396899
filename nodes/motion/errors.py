"""Pre-acceptance rejections of the motion providers."""

from __future__ import annotations

from typing import Any

from forge_tool import ToolEndpointError, ToolError

#: forge-tool's retryable capacity code; the Gateway answers it with 503.
CAPACITY_CODE = "FORGE_ENDPOINT_CAPACITY"


def rejection(
    code: str, message: str, *, retryable: bool = False, **details: Any
) -> ToolEndpointError:
    """Return a rejection raised from ``start``/``query`` before any motion (Gateway: 422)."""
    return ToolEndpointError(
        ToolError(code=code, message=message, retryable=retryable, details=details)
    )
