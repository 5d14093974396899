"""The inputs and outputs of the five context tools, as closed pydantic models.

One set of models does three jobs: it validates a call's arguments, it validates every
result before it leaves the service, and it generates the MCP ``inputSchema`` and
``outputSchema`` (:func:`closed_schema`), so what is advertised is exactly what is checked.
Every model is strict (no coercion: ``"5"`` is not a limit) and closed (an unknown field is
refused, and the schema says ``additionalProperties: false``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from doraforge.registry.context.budgets import (
    DEFAULT_ITEMS,
    MAX_ITEMS,
    MAX_QUERY_CHARS,
    MAX_REF_CHARS,
    MAX_SUMMARY_CHARS,
)
from doraforge.registry.context.source import Scope, SourceStatus

type Profile = Literal["metadata", "summaries"]
type Scalar = str | int | float | bool | None

Query = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_QUERY_CHARS)
]
Limit = Annotated[int, Field(ge=1, le=MAX_ITEMS)]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


# -- inputs ------------------------------------------------------------------------------


class ProfileInput(_Closed):
    """``context_profile`` takes no arguments."""


class SearchInput(_Closed):
    """``search_context``: a trimmed query of 1..200 characters over some enabled scopes
    (all of them when ``scopes`` is left out), at most ``limit`` items."""

    query: Query
    scopes: Annotated[
        list[Scope] | None, Field(min_length=1, json_schema_extra={"uniqueItems": True})
    ] = None
    limit: Limit = DEFAULT_ITEMS

    @field_validator("scopes")
    @classmethod
    def _unique(cls, scopes: list[Scope] | None) -> list[Scope] | None:
        if scopes is not None and len(set(scopes)) != len(scopes):
            raise ValueError("scopes must not repeat a scope")
        return scopes


class GetInput(_Closed):
    """``get_context``: one opaque reference as a search or list returned it."""

    ref: Annotated[str, Field(min_length=1, max_length=MAX_REF_CHARS)]


class ListInput(_Closed):
    """``list_context``: one page of one enabled scope, from ``cursor`` (an offset a
    previous page returned as ``nextCursor``)."""

    scope: Scope
    cursor: Annotated[int, Field(ge=0)] = 0
    limit: Limit = DEFAULT_ITEMS


class NavigationInput(_Closed):
    """``resolve_navigation``: a page or command name, alias or description."""

    query: Query


# -- outputs -----------------------------------------------------------------------------


class ItemOut(_Closed):
    """One returned context item: metadata only, plus ``summary`` under the summaries
    profile. Private source text is never a field."""

    ref: Annotated[str, Field(max_length=MAX_REF_CHARS)]
    scope: Scope
    kind: str
    label: str
    route: str | None
    metadata: dict[str, Scalar]
    counts: dict[str, int]
    summary: Annotated[str, Field(max_length=MAX_SUMMARY_CHARS)] | None = Field(
        default=None,
        description="summaries profile only: the item's text after redaction (≤320 characters)",
    )


class _Coverage(_Closed):
    truncated: bool = Field(description="the answer does not hold everything it could have")
    sourceTruncated: bool = Field(description="a source had more items than were inspected")
    sourceStatus: SourceStatus = Field(
        description="stale when any scope read answered from a retained copy"
    )


class SearchOutput(_Coverage):
    """``search_context``: the best ``limit`` matches of ``total`` among inspected items."""

    items: list[ItemOut]
    total: int = Field(ge=0)
    scopes: list[Scope]


class GetOutput(_Coverage):
    """``get_context``: the item, or ``null`` when it is unknown or its scope unavailable."""

    item: ItemOut | None


class ListOutput(_Coverage):
    """``list_context``: one page of ``total`` inspected items; ``nextCursor`` continues."""

    scope: Scope
    items: list[ItemOut]
    total: int = Field(ge=0)
    nextCursor: int | None = Field(ge=0)


class NavigationOutput(_Coverage):
    """``resolve_navigation``: the best navigation match, or ``null``."""

    item: ItemOut | None
    matchedBy: Literal["label", "alias", "route", "words"] | None


class ScopeState(_Closed):
    name: Scope
    enabled: bool
    available: bool = Field(description="enabled and backed by a source on this server")


class Limits(_Closed):
    maxItems: int
    defaultItems: int
    maxScanItems: int
    maxSummaryChars: int
    maxQueryChars: int
    maxRefChars: int
    maxResultChars: int
    maxResultTokens: int
    tokenEstimator: str


class Exclusion(_Closed):
    id: str
    description: str


class ProfileOutput(_Closed):
    """``context_profile``: what this server discloses and within which budgets."""

    profile: Profile
    enabledScopes: list[Scope]
    scopes: list[ScopeState]
    grants: list[str]
    limits: Limits
    exclusions: list[Exclusion]


def closed_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON Schema with every ``$ref`` inlined (some MCP clients resolve none)
    and every object closed (``additionalProperties: false`` unless it types its values)."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})
    inlined: dict[str, Any] = _inline(schema, definitions)
    return inlined


def _inline(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_inline(member, definitions) for member in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[1]]
        return _inline({**target, **{k: v for k, v in node.items() if k != "$ref"}}, definitions)
    closed = {key: _inline(value, definitions) for key, value in node.items()}
    if closed.get("type") == "object" and "additionalProperties" not in closed:
        closed["additionalProperties"] = False
    return closed
