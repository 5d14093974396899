"""The five context tools over a set of sources (skeleton: implemented by the context work).

API (kept by the implementation):

- ``ContextService(sources, *, profile="metadata", scopes=None, grants=frozenset())``:
  ``sources`` maps a scope to its :class:`~.source.ContextSource`; ``scopes`` the enabled
  ones (``None``: every scope with a source); ``grants`` the semantic grants reported by
  ``context_profile`` and the manifest.
- ``names``: the five tool names.
- ``tool_definitions()``: the MCP ``Tool`` dicts (name, description, inputSchema,
  outputSchema, annotations) generated from the models that validate calls and results.
- ``profile()``: the ``context_profile`` answer (profile, scopes, grants, limits,
  exclusions), also used by the agent manifest.
- ``await call(name, arguments)``: the structured result of one context tool within
  every budget; raises :class:`ContextArgumentError` for arguments that fail the input
  model and :class:`ContextSourceError` when a source fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from doraforge.registry.context.source import ContextSource, Scope

type Profile = Literal["metadata", "summaries"]

TOOL_NAMES = frozenset(
    {"context_profile", "search_context", "get_context", "list_context", "resolve_navigation"}
)


class ContextArgumentError(Exception):
    """Arguments a context tool's input model refuses (``code``, ``message``, ``details``)."""

    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, dict(details or {})


class ContextSourceError(ContextArgumentError):
    """A source failed while answering (a tool error, never an empty result)."""


class ContextService:
    """Skeleton; see the module docstring for the API the implementation keeps."""

    names = TOOL_NAMES

    def __init__(
        self,
        sources: Mapping[Scope, ContextSource],
        *,
        profile: Profile = "metadata",
        scopes: frozenset[Scope] | None = None,
        grants: frozenset[str] = frozenset(),
    ) -> None:
        self.sources = dict(sources)
        self.profile_name: Profile = profile
        self.scopes = frozenset(self.sources) if scopes is None else scopes
        self.grants = grants

    def tool_definitions(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def profile(self) -> dict[str, Any]:
        raise NotImplementedError

    async def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError
