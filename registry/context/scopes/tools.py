"""The ``tools`` scope: the ToolSpecs and live readiness of every running skill's Gateway.

Each item: the tool's id and cell (skill, runtime instance, and the robot its ToolSpec's
frame profile names), its kind (Query, Action or Session), whether it is ready and
bound, its endpoint's state and its concurrency, and its spec's SHA-256, routed to the
console's Tools page; the ToolSpec's description is private matching text. Never a
schema, a Gateway URL or a token.

A running skill's Gateway is resolved as every registry read resolves it (its recorded
runtime, health-checked: ``SkillGateways.url``) and read through the TaskService's shared
client, which presents that runtime's own token. When it cannot be reached, the items of
the last good read of that skill are returned and the snapshot says ``stale``; with no
earlier read the scope fails (:class:`SourceError` ``CONTEXT_TOOLS_UNREACHABLE``): an
unreachable Gateway never reads as "no tools". No running skill is an empty, fresh scope.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from doraforge.paos.errors import PaosError
from doraforge.paos.home import PaosHome
from doraforge.registry.cells import robot_of
from doraforge.registry.context.scopes._common import bounded, scan_limit
from doraforge.registry.context.source import (
    MAX_SCAN_ITEMS,
    ContextItem,
    Scalar,
    Scope,
    Snapshot,
    SourceError,
    opaque_ref,
)
from doraforge.registry.errors import ToolFailure

ROUTE = "/console/#/tools"
#: What resolving a recorded-running skill answers when it is in fact no longer running.
_GONE = frozenset({"SKILL_NOT_RUNNING", "SKILL_NOT_INSTALLED"})


class ToolApi(Protocol):
    """The part of the Forge Tool API client (``paos.client.ForgeToolClient``) read here."""

    async def list_tools(self) -> dict[str, Any]: ...

    async def context(self, tool_id: str) -> dict[str, Any]: ...


#: A running skill's Gateway URL (``SkillGateways.url``: raises ``ToolFailure``).
type GatewayUrl = Callable[[str], Awaitable[str]]
#: The shared Tool API client of a Gateway URL (``TaskService.client``).
type ToolClients = Callable[[str], ToolApi]


@dataclass(frozen=True)
class _Read:
    items: tuple[ContextItem, ...]
    more: bool
    stale: bool = False


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _item(
    cell: tuple[str, str], tool: Mapping[str, Any], context: Mapping[str, Any]
) -> ContextItem:
    skill, instance = cell
    tool_id = str(tool["tool_id"])
    kind = str(tool.get("semantics") or context.get("semantics") or "").capitalize()
    ready = context.get("ready") is True
    endpoint = context.get("endpoint_status")
    metadata: dict[str, Scalar] = {
        "tool_id": tool_id,
        "skill": skill,
        "runtime_instance_id": instance,
        "robot": robot_of(context) or robot_of(tool),
        "kind": kind or None,
        "ready": ready,
        "bound": context.get("binding_error") is None,
        "endpoint_state": str(endpoint.get("state")) if isinstance(endpoint, Mapping) else None,
        "active_invocations": _int(context.get("active_invocations")),
        "max_concurrency": _int(context.get("max_concurrency")),
        "spec_sha256": str(context["spec_sha256"]) if context.get("spec_sha256") else None,
    }
    binding_error = context.get("binding_error")
    return ContextItem(
        ref=opaque_ref("tools", skill, tool_id),
        scope="tools",
        kind="tool",
        label=f"{tool_id} ({kind or 'unknown kind'}): {'ready' if ready else 'not ready'}",
        route=f"{ROUTE}/{quote(tool_id, safe='')}",
        metadata=metadata,
        text="\n".join(str(t) for t in (tool.get("description"), binding_error) if t),
    )


def _running(home: PaosHome) -> list[tuple[str, str]]:
    """``(skill, runtime_instance_id)`` of every skill recorded running."""
    from doraforge.skill_runtime import all_states

    return [
        (state.name, state.runtime_instance_id)
        for state in all_states(home.runtime_dir)
        if state.state == "running"
    ]


class ToolsSource:
    """The tools scope of ``home``'s running skills (see the module docstring).

    ``gateway_url`` resolves a skill to its running Gateway; ``clients`` gives the Tool
    API client of a URL. The last good read of each skill is retained in memory (at most
    the scan cap of items per skill) for the ``stale`` answer.
    """

    def __init__(self, home: PaosHome, gateway_url: GatewayUrl, clients: ToolClients) -> None:
        self._home = home
        self._gateway_url = gateway_url
        self._clients = clients
        self._retained: dict[str, _Read] = {}

    @property
    def scope(self) -> Scope:
        return "tools"

    async def snapshot(self, limit: int = MAX_SCAN_ITEMS) -> Snapshot:
        limit = scan_limit(limit)
        try:
            running = await asyncio.to_thread(_running, self._home)
        except OSError as exc:
            raise SourceError(
                "CONTEXT_RUNTIME_UNAVAILABLE",
                "the runtime states cannot be read; check them with `doraforge skill status`",
            ) from exc
        items: list[ContextItem] = []
        more = stale = False
        for cell in running:
            if len(items) >= limit:
                more = True  # a running skill left unread
                break
            read = await self._skill(cell, limit - len(items))
            if read is not None:
                items += read.items
                more, stale = more or read.more, stale or read.stale
        return Snapshot(tuple(items), source_truncated=more, status="stale" if stale else "fresh")

    async def _skill(self, cell: tuple[str, str], budget: int) -> _Read | None:
        """One running skill's tools (at most ``budget``), ``None`` when it turned out not
        to run; the retained read when its Gateway cannot be reached."""
        name = cell[0]
        try:
            url = await self._gateway_url(name)
        except ToolFailure as failure:
            if failure.code in _GONE:
                self._retained.pop(name, None)
                return None
            return self._fallback(name, failure.code, budget)
        try:
            read = await self._live(cell, self._clients(url), budget)
        except PaosError as exc:
            return self._fallback(name, exc.code, budget)
        self._retained[name] = read
        return read

    async def _live(self, cell: tuple[str, str], client: ToolApi, budget: int) -> _Read:
        listing = await client.list_tools()
        listed = listing.get("tools")
        tools = [
            t for t in listed or [] if isinstance(t, Mapping) and isinstance(t.get("tool_id"), str)
        ]
        kept, more = bounded(tools, budget)
        items = [_item(cell, tool, await client.context(tool["tool_id"])) for tool in kept]
        return _Read(tuple(items), more)

    def _fallback(self, name: str, code: str, budget: int) -> _Read:
        retained = self._retained.get(name)
        if retained is None:
            raise SourceError(
                "CONTEXT_TOOLS_UNREACHABLE",
                f"the Gateway of running skill {name!r} cannot be read ({code}) and no "
                f"earlier read is retained; check it with `doraforge skill status {name}`",
            )
        kept, more = bounded(retained.items, budget)
        return _Read(tuple(kept), more or retained.more, stale=True)
