"""The mock endpoint's pre-acceptance rejection."""

from __future__ import annotations

from forge_tool import ToolEndpointError, ToolError


def invalid_arguments(message: str) -> ToolEndpointError:
    """Return the pre-acceptance rejection for bad arguments."""
    return ToolEndpointError(ToolError(code="MOCK_INVALID_ARGUMENTS", message=message))
