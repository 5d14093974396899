"""Registry entries, policies and the server-derived principal.

Entries are strict pydantic models: unknown fields are rejected and no value is coerced
(``"1"`` is not a version). Canonical names are namespaced lower-case
(``robot.status``, ``api__weather__now``); provider names are the portable
``[A-Za-z0-9_-]{1,64}`` form every provider accepts; aliases follow the call-envelope name
alphabet. A ``ToolEntry`` never holds its adapter, so ``public()`` cannot leak one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

CANONICAL_NAME = r"^[a-z0-9][a-z0-9._-]{0,199}$"
PROVIDER_NAME = r"^[A-Za-z0-9_-]{1,64}$"
CALL_NAME = r"^[A-Za-z0-9._:-]{1,200}$"

type Adapter = Callable[[dict[str, Any]], Awaitable[Any]]
"""Gets validated arguments; returns a JSON-able result; raises ``ToolFailure``."""

type ContextAdapter = Callable[[dict[str, Any], CallContext], Awaitable[Any]]
"""An adapter that opted in (``register(..., wants_context=True)``) to learn who calls:
gets validated arguments and the :class:`CallContext`, else as :data:`Adapter`."""

type Admit = Callable[[Principal | None], None]
"""A tool's own admission check, run after the standard gates (``None``: a catalog read,
no caller); raises ``gates.Denied`` when the tool cannot run now (its reason is the tool's
availability in the native catalog)."""

_STRICT = ConfigDict(extra="forbid", strict=True, validate_by_name=True, validate_by_alias=True)

Token = Annotated[str, Field(min_length=1, max_length=200)]


class Permission(BaseModel):
    """A least-privilege permission a tool needs; a held ``(type, "*")`` covers any scope."""

    model_config = _STRICT
    type: Token
    scope: Token


class Policy(BaseModel):
    """Who may see and call a tool, and what calling it does.

    ``risk`` defaults to ``high``: a tool whose risk nobody stated is unverified, and
    unverified tools need an approval like any other high-risk tool.
    """

    model_config = _STRICT
    scopes: Annotated[list[Token], Field(min_length=1)]
    requiredCapabilities: list[Token] = []
    sideEffect: Literal["read", "write"]
    idempotent: bool
    async_: bool = Field(default=False, alias="async")
    confirmation: Literal["none", "required"] = "none"
    #: Arguments the closed input schema does not name are dropped (after the other
    #: repairs, a rename among them, had their chance) instead of refused: for
    #: tools whose callers are known to invent parameters (web search's ``lang``).
    ignoreUnknownArguments: bool = False
    risk: Literal["low", "medium", "high", "critical"] = "high"
    permissions: list[Permission] = []
    egressHosts: list[Annotated[str, Field(pattern=r"^[a-z0-9.:\[\]-]{1,253}$")]] = []
    timeoutMs: Annotated[int, Field(ge=1, le=3_600_000)] = 30_000


class Origin(BaseModel):
    """Where a tool that is not built in comes from: a machine-local saved recipe, its
    active revision and the canonical read tools it calls. Provenance only: never a
    definition's literals, bindings, history or results."""

    model_config = _STRICT
    kind: Literal["local-recipe"]
    revision: Annotated[int, Field(ge=1)]
    tools: Annotated[list[Annotated[str, Field(pattern=CANONICAL_NAME)]], Field(max_length=5)]


class ToolEntry(BaseModel):
    """A ``portos_tool`` catalog entry. ``input_schema`` must be a closed object schema."""

    model_config = _STRICT
    type: Literal["portos_tool"] = "portos_tool"
    name: Annotated[str, Field(pattern=CANONICAL_NAME)]
    version: Annotated[int, Field(ge=1)] = 1
    providerName: Annotated[str, Field(pattern=PROVIDER_NAME)]
    aliases: list[Annotated[str, Field(pattern=CALL_NAME)]] = []
    description: Annotated[str, Field(min_length=1, max_length=4000)]
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    policy: Policy
    origin: Origin | None = None

    @model_validator(mode="after")
    def _closed_input(self) -> ToolEntry:
        schema = self.input_schema
        if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
            raise ValueError(
                "input_schema must be closed: type 'object' with additionalProperties false"
            )
        return self

    @property
    def listed_name(self) -> str:
        """The one name a person reads: the name ``tools/list`` and every provider format
        list (``providerName``), shown by approvals, errors, the CLI and the console.

        MCP clients and model APIs accept ``[A-Za-z0-9_-]{1,64}`` (no dots), so the listed
        name is the only one every agent can call; the canonical ``name`` stays the
        catalog's identity and, with the aliases, is still accepted on input."""
        return self.providerName

    def names(self) -> frozenset[str]:
        """Every name a call may use: canonical, provider and aliases."""
        return frozenset({self.name, self.providerName, *self.aliases})

    def public(self) -> dict[str, Any]:
        """The portos catalog form (JSON-ready, ``async`` spelled as on the wire); ``origin``
        only for a tool that has one."""
        exclude = {"origin"} if self.origin is None else None
        return self.model_dump(mode="json", by_alias=True, exclude=exclude)


@dataclass(frozen=True)
class Principal:
    """Authority derived by the server for one caller; a request body can never claim it."""

    id: str
    scope: str
    grants: frozenset[str] = frozenset()
    permissions: frozenset[tuple[str, str]] = frozenset()
    approvals: frozenset[str] = frozenset()
    authenticated: bool = False


@dataclass(frozen=True)
class CallContext:
    """Who is calling and under which requestId: what a :data:`ContextAdapter` gets, so a
    tool that calls other tools (a recipe) calls them as that same caller."""

    principal: Principal
    request_id: str
