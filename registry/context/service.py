"""The five context tools over a set of sources, within every budget and one profile.

API (the MCP edge, the manifest and the contract eval build on it):

- ``ContextService(sources, *, profile="metadata", scopes=None, grants=frozenset())``:
  ``sources`` maps a scope to its :class:`~.source.ContextSource`; ``scopes`` the enabled
  ones (``None``: every scope with a source); ``grants`` the semantic grants reported by
  ``context_profile`` and the manifest. A scope is *available* when it is enabled and has a
  source.
- ``names``: the five tool names.
- ``tool_definitions()``: the MCP ``Tool`` dicts (name, description, inputSchema,
  outputSchema, annotations) generated from the models that validate calls and results.
- ``profile()``: the ``context_profile`` answer (profile, scopes, grants, limits,
  exclusions), also used by the agent manifest.
- ``await call(name, arguments)``: the structured result of one context tool within
  every budget; raises :class:`ContextArgumentError` for arguments that fail the input
  model (or name a scope that is not available) and :class:`ContextSourceError` when a
  source fails.

Profiles: ``metadata`` (default) returns labels, bounded counts, routes and opaque
references; a source's private ``text`` may match a search but never leaves. ``summaries``
adds to every item a ``summary`` of at most 320 characters made from that text by the
redaction function: an opt-in, not an anonymization guarantee.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from doraforge.registry.context import budgets
from doraforge.registry.context.items import Redact, item_out
from doraforge.registry.context.models import (
    GetInput,
    GetOutput,
    ListInput,
    ListOutput,
    NavigationInput,
    NavigationOutput,
    Profile,
    ProfileInput,
    ProfileOutput,
    SearchInput,
    SearchOutput,
    closed_schema,
)
from doraforge.registry.context.ranking import navigation_match, ranked
from doraforge.registry.context.redaction import redact
from doraforge.registry.context.source import (
    MAX_SCAN_ITEMS,
    SCOPES,
    ContextItem,
    ContextSource,
    Scope,
    Snapshot,
    SourceError,
    SourceStatus,
)
from doraforge.wire.errors import StructuredError

__all__ = [
    "EXCLUSIONS",
    "TOOL_NAMES",
    "ContextArgumentError",
    "ContextService",
    "ContextSourceError",
    "Profile",
]

log = logging.getLogger("doraforge.registry.context")

TOOL_NAMES = frozenset(
    {"context_profile", "search_context", "get_context", "list_context", "resolve_navigation"}
)

#: What no profile ever returns, reported by ``context_profile`` and the manifest.
EXCLUSIONS: tuple[tuple[str, str], ...] = (
    ("credentials", "credentials and API-tool secrets (values and their environment names)"),
    ("tokens", "bearer, operator and runtime tokens"),
    ("paths", "home-directory and repository paths (references are opaque hashes)"),
    ("raw-tool-outputs", "raw tool outputs and invocation results"),
    ("episode-physics", "physical parameters of episodes (poses, forces, joint traces)"),
    ("evidence-bytes", "evidence bytes (only source, phase, sequence, time, size, SHA-256)"),
)

_ANNOTATIONS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}


class ContextArgumentError(StructuredError):
    """Arguments a context tool refuses (``code``, ``message``, ``details``): fix the call.
    Its wire form is :meth:`~doraforge.wire.errors.StructuredError.to_payload`."""

    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(code, message, details=details)


class ContextSourceError(ContextArgumentError):
    """A source failed while answering (a tool error, never an empty result); retryable,
    since a source that could not be read now may be readable later."""

    retryable_default = True


_DESCRIPTIONS = {
    "context_profile": "What this server discloses: profile, scopes, grants, budgets and "
    "exclusions. Call it first.",
    "search_context": "Search the enabled context scopes (skills, tools, tasks, ...) by words; "
    "returns opaque refs for get_context.",
    "get_context": "One context item by the opaque ref a search or list returned; null when "
    "it is unknown or its scope is unavailable.",
    "list_context": "Page through one enabled context scope (cursor from nextCursor).",
    "resolve_navigation": "The console page or CLI command that matches a name or alias.",
}
_TITLES = {
    "context_profile": "Context profile",
    "search_context": "Search context",
    "get_context": "Get context item",
    "list_context": "List context scope",
    "resolve_navigation": "Resolve navigation",
}
_MODELS: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "context_profile": (ProfileInput, ProfileOutput),
    "search_context": (SearchInput, SearchOutput),
    "get_context": (GetInput, GetOutput),
    "list_context": (ListInput, ListOutput),
    "resolve_navigation": (NavigationInput, NavigationOutput),
}


class ContextService:
    """The five read-only context tools over ``sources`` (see the module docstring)."""

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
        handlers: dict[str, Callable[[Any], Awaitable[dict[str, Any]]]] = {
            "context_profile": self._profile,
            "search_context": self._search,
            "get_context": self._get,
            "list_context": self._list,
            "resolve_navigation": self._navigate,
        }
        self._handlers = handlers
        # Private text is matched only as redacted: a search must not be an oracle that
        # confirms a token or an address prefix by prefix.
        self._private: Redact = functools.lru_cache(maxsize=4096)(redact)
        self._redact = self._private if profile == "summaries" else None

    @property
    def available(self) -> tuple[Scope, ...]:
        """The enabled scopes that have a source, in report order."""
        return tuple(s for s in SCOPES if s in self.scopes and s in self.sources)

    def tool_definitions(self) -> list[dict[str, Any]]:
        """The five MCP ``Tool`` definitions, schemas generated from the validating models."""
        return [
            {
                "name": name,
                "title": _TITLES[name],
                "description": _DESCRIPTIONS[name],
                "inputSchema": closed_schema(inputs),
                "outputSchema": closed_schema(outputs),
                "annotations": {"title": _TITLES[name], **_ANNOTATIONS},
            }
            for name, (inputs, outputs) in _MODELS.items()
        ]

    def profile(self) -> dict[str, Any]:
        """The ``context_profile`` answer (also the manifest's profile, scopes, limits)."""
        answer = ProfileOutput.model_validate(
            {
                "profile": self.profile_name,
                "enabledScopes": [s for s in SCOPES if s in self.scopes],
                "scopes": [
                    {"name": s, "enabled": s in self.scopes, "available": s in self.available}
                    for s in SCOPES
                ],
                "grants": sorted(self.grants),
                "limits": limits(),
                "exclusions": [{"id": i, "description": d} for i, d in EXCLUSIONS],
            }
        )
        return answer.model_dump(mode="json")

    async def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """One context tool's structured result (see the module docstring for errors)."""
        if name not in self._handlers:
            raise ContextArgumentError(
                "CONTEXT_UNKNOWN_TOOL",
                f"{name!r} is not a context tool; use one of {', '.join(sorted(TOOL_NAMES))}",
                {"name": name},
            )
        inputs, outputs = _MODELS[name]
        parsed = self._parse(name, inputs, arguments)
        result = await self._handlers[name](parsed)
        # The result passes the advertised output model before it leaves: a bug here is a
        # failure in tests, never a result the schema did not promise.
        checked = outputs.model_validate(result)
        return _without_empty_summaries(checked.model_dump(mode="json"))

    def _parse(self, name: str, model: type[BaseModel], arguments: Mapping[str, Any]) -> Any:
        try:
            return model.model_validate(dict(arguments))
        except ValidationError as exc:
            problems = [
                {"loc": [str(p) for p in e["loc"]], "msg": e["msg"]} for e in exc.errors()[:5]
            ]
            enabled = list(self.available)
            fields = ", ".join(sorted({p["loc"][0] for p in problems if p["loc"]})) or "arguments"
            message = f"{name}: invalid {fields}: {problems[0]['msg']}"
            if any(p["loc"][:1] in (["scope"], ["scopes"]) for p in problems):
                message += f"; enabled scopes: {', '.join(enabled) or 'none'}"
            raise ContextArgumentError(
                "CONTEXT_INVALID_ARGUMENTS",
                message,
                {"problems": problems, "enabledScopes": enabled},
            ) from exc

    # -- the tools ---------------------------------------------------------------------

    async def _profile(self, _arguments: ProfileInput) -> dict[str, Any]:
        return self.profile()

    async def _search(self, arguments: SearchInput) -> dict[str, Any]:
        scopes = self._asked(arguments.scopes) if arguments.scopes else self.available
        snapshots = await self._read(scopes)
        pool = [item for scope in scopes for item in snapshots[scope].items]
        matches = ranked(pool, arguments.query, self._private)
        shown, cut = self._render(matches[: arguments.limit])
        coverage = _coverage(snapshots.values())
        result = {
            "items": shown,
            "total": len(matches),
            "scopes": list(scopes),
            "truncated": cut or len(matches) > arguments.limit or coverage[0],
            "sourceTruncated": coverage[0],
            "sourceStatus": coverage[1],
        }
        return budgets.fit_items(result)

    async def _get(self, arguments: GetInput) -> dict[str, Any]:
        scope = next((s for s in self.available if arguments.ref.startswith(f"{s}:")), None)
        if scope is None:
            # Unknown, disabled or sourceless: the same null, so a ref reveals nothing about
            # what the server could read were the scope enabled.
            return {
                "item": None,
                "truncated": False,
                "sourceTruncated": False,
                "sourceStatus": "fresh",
            }
        snapshot = (await self._read((scope,)))[scope]
        found = next((item for item in snapshot.items if item.ref == arguments.ref), None)
        shown, cut = self._render([found] if found is not None else [])
        return {
            "item": shown[0] if shown else None,
            "truncated": cut or (found is None and snapshot.source_truncated),
            "sourceTruncated": snapshot.source_truncated,
            "sourceStatus": snapshot.status,
        }

    async def _list(self, arguments: ListInput) -> dict[str, Any]:
        (scope,) = self._asked([arguments.scope])
        snapshot = (await self._read((scope,)))[scope]
        start = arguments.cursor
        page = list(snapshot.items[start : start + arguments.limit])
        shown, cut = self._render(page)
        total = len(snapshot.items)
        result = {
            "scope": scope,
            "items": shown,
            "total": total,
            "nextCursor": _next_cursor(start, len(shown), total),
            "truncated": cut or snapshot.source_truncated,
            "sourceTruncated": snapshot.source_truncated,
            "sourceStatus": snapshot.status,
        }

        def recursor(fitted: dict[str, Any]) -> None:
            fitted["nextCursor"] = _next_cursor(start, len(fitted["items"]), total)

        return budgets.fit_items(result, on_cut=recursor)

    async def _navigate(self, arguments: NavigationInput) -> dict[str, Any]:
        if "navigation" not in self.available:
            raise ContextArgumentError(
                "CONTEXT_SCOPE_DISABLED",
                "resolve_navigation needs the navigation scope, which this server does not "
                "enable; the operator enables it with `doraforge serve --context-scope "
                "navigation`",
                {"scope": "navigation", "enabledScopes": list(self.available)},
            )
        snapshot = (await self._read(("navigation",)))["navigation"]
        found, matched_by = navigation_match(snapshot.items, arguments.query, self._private)
        shown, cut = self._render([found] if found is not None else [])
        return {
            "item": shown[0] if shown else None,
            "matchedBy": matched_by,
            "truncated": cut or (found is None and snapshot.source_truncated),
            "sourceTruncated": snapshot.source_truncated,
            "sourceStatus": snapshot.status,
        }

    # -- helpers -----------------------------------------------------------------------

    def _asked(self, scopes: Iterable[Scope]) -> tuple[Scope, ...]:
        """``scopes`` when every one is available, else :class:`ContextArgumentError`
        ``CONTEXT_SCOPE_DISABLED`` naming the available ones."""
        asked = tuple(scopes)
        missing = [s for s in asked if s not in self.available]
        if missing:
            enabled = ", ".join(self.available) or "none"
            raise ContextArgumentError(
                "CONTEXT_SCOPE_DISABLED",
                f"scope {missing[0]!r} is not enabled on this server (enabled: {enabled}); "
                f"ask within those, or the operator enables it with `doraforge serve "
                f"--context-scope {missing[0]}`",
                {"scope": missing[0], "enabledScopes": list(self.available)},
            )
        return asked

    async def _read(self, scopes: Iterable[Scope]) -> dict[Scope, Snapshot]:
        """One snapshot per scope, read concurrently; the first failure (in scope order)
        raises :class:`ContextSourceError`."""
        order = tuple(scopes)
        answers = await asyncio.gather(
            *(self._snapshot(scope) for scope in order), return_exceptions=True
        )
        snapshots: dict[Scope, Snapshot] = {}
        for scope, answer in zip(order, answers, strict=True):
            if isinstance(answer, BaseException):
                raise answer
            snapshots[scope] = answer
        return snapshots

    async def _snapshot(self, scope: Scope) -> Snapshot:
        source = self.sources[scope]
        try:
            async with asyncio.timeout(budgets.SOURCE_TIMEOUT_S):
                snapshot = await source.snapshot(MAX_SCAN_ITEMS)
        except SourceError as exc:
            raise _source_failed(scope, exc.code, exc.message) from exc
        except TimeoutError as exc:
            raise _source_failed(
                scope, "SOURCE_TIMEOUT", f"did not answer within {budgets.SOURCE_TIMEOUT_S:g} s"
            ) from exc
        except Exception as exc:  # a broken source is a tool error, never a 5xx or []
            log.exception("context source %s crashed", scope)
            raise _source_failed(scope, "SOURCE_CRASHED", type(exc).__name__) from exc
        return _checked(scope, snapshot)

    def _render(self, items: Iterable[ContextItem]) -> tuple[list[dict[str, Any]], bool]:
        """Items as returned under the profile, and whether any was cut to its budget."""
        shown = [item_out(item, redact=self._redact) for item in items]
        return [out for out, _ in shown], any(cut for _, cut in shown)


def limits() -> dict[str, Any]:
    """Every budget of the context tools, as ``context_profile`` and the manifest say."""
    return {
        "maxItems": budgets.MAX_ITEMS,
        "defaultItems": budgets.DEFAULT_ITEMS,
        "maxScanItems": budgets.MAX_SCAN,
        "maxSummaryChars": budgets.MAX_SUMMARY_CHARS,
        "maxQueryChars": budgets.MAX_QUERY_CHARS,
        "maxRefChars": budgets.MAX_REF_CHARS,
        "maxResultChars": budgets.MAX_RESULT_CHARS,
        "maxResultTokens": budgets.MAX_RESULT_TOKENS,
        "tokenEstimator": budgets.TOKEN_ESTIMATOR,
    }


def _source_failed(scope: Scope, code: str, message: str) -> ContextSourceError:
    return ContextSourceError(
        "CONTEXT_SOURCE_FAILED",
        f"the {scope} context could not be read ({code}: {message}); try again, or leave "
        f"the {scope} scope out",
        {"scope": scope, "sourceCode": code},
    )


def _checked(scope: Scope, snapshot: Snapshot) -> Snapshot:
    """``snapshot`` held to the source contract: at most :data:`MAX_SCAN_ITEMS` items (more
    are cut and flagged), every item of ``scope`` with a reference a caller can send back."""
    items = snapshot.items
    for item in items[:MAX_SCAN_ITEMS]:
        if item.scope != scope or not 0 < len(item.ref) <= budgets.MAX_REF_CHARS:
            raise _source_failed(scope, "SOURCE_INVALID", "returned an item outside its contract")
    if len(items) <= MAX_SCAN_ITEMS:
        return snapshot
    return Snapshot(items[:MAX_SCAN_ITEMS], source_truncated=True, status=snapshot.status)


def _coverage(snapshots: Iterable[Snapshot]) -> tuple[bool, SourceStatus]:
    """Whether any snapshot was cut, and the worst status among them."""
    seen = list(snapshots)
    stale = any(s.status == "stale" for s in seen)
    return any(s.source_truncated for s in seen), "stale" if stale else "fresh"


def _next_cursor(start: int, shown: int, total: int) -> int | None:
    return start + shown if start + shown < total else None


def _without_empty_summaries(result: dict[str, Any]) -> dict[str, Any]:
    """Drop ``summary: null`` (the metadata profile has no summaries at all)."""
    for item in [*result.get("items", []), result.get("item")]:
        if isinstance(item, dict) and item.get("summary", "") is None:
            del item["summary"]
    return result
