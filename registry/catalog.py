"""The catalog: registration with collision checks, name resolution and filtering.

Every name an entry answers to (canonical, provider, aliases) is unique across the whole
catalog, so a call name always resolves to exactly one tool. Schemas are checked and their
validators compiled once, at registration. Scope and intent are filters only: they narrow
what is advertised and never authorise anything.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from pydantic import ValidationError

from doraforge.registry.errors import Conflict, InvalidRequest, NotFound
from doraforge.registry.model import Adapter, Admit, CallContext, ContextAdapter, ToolEntry
from doraforge.wire.json_schema import LocalValidator, SchemaRefused, local_validator
from doraforge.wire.schema_fast import compile_schema
from doraforge.wire.suggest import closest

MAX_INTENT_CHARS = 500
_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class RegisteredTool:
    """An entry with its internal adapter and compiled validators (never exposed).

    ``wants_context``: the adapter is a :data:`ContextAdapter` and gets the caller's
    :class:`CallContext`; ``admit``: the tool's own admission check (see :data:`Admit`)."""

    entry: ToolEntry
    adapter: Adapter | ContextAdapter
    input_validator: LocalValidator
    output_validator: LocalValidator
    wants_context: bool = False
    admit: Admit | None = None
    #: The egress source the tool belongs to (``api:<service>``, ``mcp:<server>``): the
    #: hosts that source declared serve this tool's calls (``registry.egress``).
    source: str | None = None
    #: The input schema compiled into plain checks (``None``: outside the compiled subset).
    input_conforms: Callable[[Any], bool] | None = None

    def arguments_valid(self, arguments: Any) -> bool:
        """Exactly ``input_validator.is_valid(arguments)``, through the compiled checks
        when the schema is in their subset (several times cheaper per call)."""
        if self.input_conforms is not None:
            return self.input_conforms(arguments)
        return self.input_validator.is_valid(arguments)

    def invoke(self, arguments: dict[str, Any], context: CallContext | None) -> Awaitable[Any]:
        """Start the adapter: with the call context when it opted in (and one is known)."""
        if self.wants_context:
            if context is None:
                raise TypeError(f"{self.entry.name} needs a call context")
            return cast(ContextAdapter, self.adapter)(arguments, context)
        return cast(Adapter, self.adapter)(arguments)


def _compile(schema: dict[str, Any], field: str, name: str) -> LocalValidator:
    """The schema's local-only validator; an invalid schema is ``TOOL_REGISTRATION_INVALID``,
    a remote or dangling ``$ref`` keeps its own code (``SCHEMA_REF_REMOTE`` ...)."""
    try:
        return local_validator(schema)
    except SchemaRefused as exc:
        invalid = exc.code == "SCHEMA_INVALID"
        raise InvalidRequest(
            "TOOL_REGISTRATION_INVALID" if invalid else exc.code,
            f"{name}: {field} is not a valid JSON Schema: {exc.message}"
            if invalid
            else f"{name}: {field}: {exc.message}",
            details={"field": field, **exc.details},
        ) from exc


def _as_entry(entry: ToolEntry | Mapping[str, Any]) -> ToolEntry:
    if isinstance(entry, ToolEntry):
        return entry
    try:
        return ToolEntry.model_validate(dict(entry))
    except ValidationError as exc:
        errors = [
            {"loc": ".".join(str(p) for p in e["loc"]), "msg": e["msg"]} for e in exc.errors()
        ]
        raise InvalidRequest(
            "TOOL_REGISTRATION_INVALID", "invalid tool entry", details={"errors": errors}
        ) from exc


def _tokens(text: str) -> set[str]:
    return set(_TOKEN.findall(text.lower()))


def _intent_tokens(intent: str | None) -> set[str]:
    if intent is None:
        return set()
    intent = intent.strip()
    if len(intent) > MAX_INTENT_CHARS:
        raise InvalidRequest(
            "TOOL_INVALID_QUERY",
            f"intent is longer than {MAX_INTENT_CHARS} characters",
            details={"field": "intent", "maxLength": MAX_INTENT_CHARS},
        )
    return _tokens(intent)


class Catalog:
    """Registered tools by canonical name, plus an index of every callable name."""

    def __init__(self) -> None:
        self._tools: dict[str, RegisteredTool] = {}
        self._by_name: dict[str, str] = {}
        self._search: dict[str, set[str]] = {}

    def register(
        self,
        entry: ToolEntry | Mapping[str, Any],
        adapter: Adapter | ContextAdapter,
        *,
        wants_context: bool = False,
        admit: Admit | None = None,
        source: str | None = None,
    ) -> ToolEntry:
        """Add a tool (of egress source ``source``, when it has one). :class:`Conflict`
        TOOL_REGISTRATION_CONFLICT if any name is taken, :class:`InvalidRequest`
        TOOL_REGISTRATION_INVALID for a malformed entry or schema."""
        tool_entry = _as_entry(entry)
        taken = sorted(n for n in tool_entry.names() if n in self._by_name)
        if taken:
            raise Conflict(
                "TOOL_REGISTRATION_CONFLICT",
                f"{tool_entry.name}: name(s) already registered: {', '.join(taken)}",
                details={"names": taken, "owners": sorted({self._by_name[n] for n in taken})},
            )
        tool = RegisteredTool(
            entry=tool_entry,
            adapter=adapter,
            input_validator=_compile(tool_entry.input_schema, "input_schema", tool_entry.name),
            output_validator=_compile(tool_entry.output_schema, "output_schema", tool_entry.name),
            wants_context=wants_context,
            admit=admit,
            source=source,
            input_conforms=compile_schema(tool_entry.input_schema),
        )
        self._tools[tool_entry.name] = tool
        for name in tool_entry.names():
            self._by_name[name] = tool_entry.name
        words = " ".join([tool_entry.description, *tool_entry.names()])
        self._search[tool_entry.name] = _tokens(words)
        return tool_entry

    def unregister(self, name: str) -> ToolEntry:
        """Remove the tool ``name`` (any of its names) refers to; :class:`NotFound`
        TOOL_NOT_FOUND."""
        tool = self.resolve(name)
        if tool is None:
            raise NotFound("TOOL_NOT_FOUND", f"no tool {name!r}")
        for alias in tool.entry.names():
            del self._by_name[alias]
        del self._tools[tool.entry.name]
        del self._search[tool.entry.name]
        return tool.entry

    def resolve(self, name: str) -> RegisteredTool | None:
        """The tool a canonical, provider or alias name refers to, or ``None``."""
        canonical = self._by_name.get(name)
        return None if canonical is None else self._tools[canonical]

    def suggestions(self, name: str) -> list[str]:
        """The listed names of the tools whose names (any of them) are closest to ``name``,
        best first: a misspelled ``forge.tool_start_actoin`` is offered
        ``forge_tool_start_action``, the name an agent can call."""
        found = closest(name, self._by_name)
        listed = (self._tools[self._by_name[match]].entry.listed_name for match in found)
        return list(dict.fromkeys(listed))

    def filter(self, *, scope: str | None = None, intent: str | None = None) -> list[ToolEntry]:
        """Entries in ``scope`` (``None`` or ``"all"``: every scope), narrowed by ``intent``.

        The intent keeps a tool when any intent word occurs among the words of its names and
        description; an empty intent keeps everything. It only ever removes tools.
        Raises :class:`InvalidRequest` TOOL_INVALID_QUERY for an intent over 500 characters.
        """
        wanted = _intent_tokens(intent)
        selected = []
        for name in sorted(self._tools):
            entry = self._tools[name].entry
            if scope not in (None, "all") and scope not in entry.policy.scopes:
                continue
            if wanted and not wanted & self._search[name]:
                continue
            selected.append(entry)
        return selected
