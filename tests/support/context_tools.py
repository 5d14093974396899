"""The agent-context contract's five MCP tool names, spelled out here rather than imported
from doraforge: the tests check the contract, not the code's own list."""

from __future__ import annotations

CONTEXT_TOOLS = frozenset(
    {"context_profile", "search_context", "get_context", "list_context", "resolve_navigation"}
)
