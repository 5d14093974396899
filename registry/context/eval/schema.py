"""The fixture schema: closed pydantic models of a suite, its fake sources and its
declarative expectations, and the two macros (``$ref``, ``$repeat``) fixtures use for
opaque references and long strings."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, model_validator
from pydantic.alias_generators import to_camel

from doraforge.registry.context.service import Profile
from doraforge.registry.context.source import SCOPES, Scope, SourceStatus, opaque_ref

type Via = Literal["service", "mcp"]


class _Model(BaseModel):
    """Closed, camelCase fixture keys: a misspelt key is refused, never ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel)


def _pointer(value: str) -> str:
    if value and not value.startswith("/"):
        raise ValueError("a JSON pointer is empty or starts with '/'")
    return value


type Pointer = Annotated[str, AfterValidator(_pointer)]


class ItemSpec(_Model):
    """One fake record; its ``ref`` is ``opaque_ref(scope, key)`` (``{$ref: scope/key}``)."""

    key: str = Field(min_length=1, max_length=200)
    kind: str = Field("record", min_length=1, max_length=40)
    label: str = Field(max_length=10_000)
    route: str | None = None
    metadata: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    text: str = Field("", max_length=100_000)


class GenerateSpec(_Model):
    """``count`` generated records; ``{n}`` in ``key``, ``label`` and ``text`` is the index."""

    count: int = Field(ge=1, le=5_000)
    key: str = "item-{n}"
    kind: str = "record"
    label: str = "Item {n}"
    text: str = ""


class FailSpec(_Model):
    """The source raises :class:`~.source.SourceError` with this code and message."""

    code: str = Field(pattern=r"^[A-Z][A-Z0-9_]{1,63}$")
    message: str = Field(min_length=1, max_length=300)


class SourceSpec(_Model):
    """One scope's fake source: its records, whether it answers stale, whether it fails."""

    items: tuple[ItemSpec, ...] = ()
    generate: GenerateSpec | None = None
    status: SourceStatus = "fresh"
    fail: FailSpec | None = None


type SourceSet = dict[Scope, SourceSpec]


class Request(_Model):
    """A context tool call (``tool`` + ``arguments``) or ``method: tools/list | manifest``."""

    tool: str | None = Field(None, min_length=1, max_length=64)
    method: Literal["tools/list", "manifest"] | None = None
    arguments: dict[str, JsonValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_target(self) -> Request:
        if (self.tool is None) == (self.method is None):
            raise ValueError("give exactly one of tool and method")
        return self

    @property
    def target(self) -> str:
        return self.tool or str(self.method)


class SameAs(_Model):
    """The value another request's answer has at ``pointer`` (on the same fake sources)."""

    request: Request
    via: Via | None = None
    pointer: Pointer = ""
    unordered: bool = False


class Inspected(_Model):
    """At most ``at_most`` records of ``scope`` were inspected per snapshot, and at least
    one snapshot was taken."""

    scope: Scope
    at_most: int = Field(ge=0)


class Expectation(_Model):
    """One declarative check of the answer.

    ``is_error`` says whether a tool error is expected (then ``pointer`` reads the error
    object: ``code``, ``message``, ``details``), ``fault`` whether a protocol fault is (a
    JSON-RPC error or an HTTP status other than 200; ``pointer`` reads ``code`` and
    ``message``). ``setEquals`` and ``includes`` look at all
    the values the pointer selects together; every other matcher must hold for each.
    """

    is_error: bool = False
    fault: bool = False
    pointer: Pointer = ""
    equals: JsonValue = None
    not_equals: JsonValue = None
    exists: bool | None = None
    type: Literal["string", "integer", "number", "boolean", "null", "array", "object"] | None = None
    contains: JsonValue = None
    not_contains: str | None = None
    matches: str | None = None
    max_chars: int | None = Field(None, ge=0)
    min_items: int | None = Field(None, ge=0)
    max_items: int | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=0)
    min: float | None = None
    max: float | None = None
    set_equals: list[JsonValue] | None = None
    includes: list[JsonValue] | None = None
    same_as: SameAs | None = None
    inspected: Inspected | None = None
    fits_output_schema: bool = False

    @model_validator(mode="after")
    def _valid_regex(self) -> Expectation:
        if self.is_error and self.fault:
            raise ValueError("an answer is a tool error or a protocol fault, not both")
        if self.fits_output_schema and (self.is_error or self.fault or self.pointer):
            raise ValueError("fitsOutputSchema checks a whole result: no pointer, no error")
        if self.matches is not None:
            re.compile(self.matches)
        return self

    def given(self, name: str) -> bool:
        return name in self.model_fields_set

    @property
    def answer(self) -> str:
        """The kind of answer expected (an :class:`~.contract.Answer` kind)."""
        return "fault" if self.fault else "toolError" if self.is_error else "result"

    @property
    def label(self) -> str:
        """What the report names as checked: a pointer, ``source:<scope>`` or
        ``outputSchema``."""
        if self.inspected is not None:
            return f"source:{self.inspected.scope}"
        return "outputSchema" if self.fits_output_schema else self.pointer or "/"


class Case(_Model):
    """One case: a fresh contract over ``sources`` (a named set or inline), one request.

    ``mcp_enabled`` (``via: mcp`` only) turns the server's MCP endpoint off, to check what
    the manifest says while it is.
    """

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,79}$")
    description: str | None = Field(None, max_length=500)
    via: Via = "service"
    sources: str | SourceSet = "default"
    profile: Profile = "metadata"
    scopes: list[Scope] | None = None
    grants: list[str] = Field(default_factory=list)
    mcp_enabled: bool = True
    request: Request
    expect: list[Expectation] = Field(min_length=1)
    skip: str | None = Field(None, min_length=1, max_length=300)

    @model_validator(mode="before")
    @classmethod
    def _one_expectation(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("expect"), dict):
            return {**data, "expect": [data["expect"]]}
        return data

    @model_validator(mode="after")
    def _manifest_over_mcp(self) -> Case:
        if self.request.method == "manifest" and self.via != "mcp":
            raise ValueError("the manifest is read over HTTP: give via: mcp")
        if not self.mcp_enabled and self.via != "mcp":
            raise ValueError("mcpEnabled is a setting of the MCP server: give via: mcp")
        if self.request.tool is None and any(e.fits_output_schema for e in self.expect):
            raise ValueError("fitsOutputSchema needs a tool request (a tool has the schema)")
        return self


class Fixture(_Model):
    """A suite: named fake source sets and its cases (ids unique)."""

    version: Literal[1]
    suite: str = Field(min_length=1, max_length=80)
    sources: dict[str, SourceSet] = Field(default_factory=dict)
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self) -> Fixture:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"case id {case.id!r} is used twice")
            seen.add(case.id)
            if isinstance(case.sources, str) and case.sources not in self.sources:
                raise ValueError(f"case {case.id!r} names unknown source set {case.sources!r}")
        return self


def expand(value: Any) -> Any:
    """``value`` with its macros replaced: ``{$ref: scope/key}`` is the fake record's opaque
    reference (:func:`~.source.opaque_ref`), ``{$repeat: text, times: n}`` is ``text``
    repeated ``n`` times. Raises ``ValueError`` for a malformed macro."""
    if isinstance(value, list):
        return [expand(member) for member in value]
    if not isinstance(value, dict):
        return value
    if "$ref" in value:
        return _ref_macro(value)
    if "$repeat" in value:
        return _repeat_macro(value)
    return {key: expand(member) for key, member in value.items()}


def _ref_macro(value: dict[str, Any]) -> str:
    target = value["$ref"]
    scope, _, key = str(target).partition("/")
    if len(value) != 1 or not key or scope not in SCOPES:
        raise ValueError(f"$ref must be one 'scope/key' string with a known scope, not {target!r}")
    return opaque_ref(scope, key)


def _repeat_macro(value: dict[str, Any]) -> str:
    text, times = value["$repeat"], value.get("times")
    if set(value) != {"$repeat", "times"} or not isinstance(text, str):
        raise ValueError("$repeat takes a string and times")
    if not isinstance(times, int) or isinstance(times, bool) or not 0 <= times <= 100_000:
        raise ValueError("$repeat times must be an integer from 0 to 100000")
    return text * times


def check_macros(*values: Any) -> None:
    """Raise ``ValueError`` for the first malformed macro in ``values``."""
    for value in values:
        expand(value)
