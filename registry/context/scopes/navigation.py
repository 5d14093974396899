"""The ``navigation`` scope: the console's pages and the CLI's commands.

The registry may import neither the console nor the CLI (the layers point the other
way), so both hand their tables in as plain :class:`NavigationEntry` data
(``console.navigation`` and ``cli.navigation`` build them from the real page table and
the real argument parser). Returned: labels, routes, aliases and section names; the
entry's description is private matching text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from doraforge.registry.context.scopes._common import bounded, scan_limit
from doraforge.registry.context.source import (
    MAX_SCAN_ITEMS,
    ContextItem,
    Scope,
    Snapshot,
    opaque_ref,
)

type NavigationKind = Literal["page", "command"]


@dataclass(frozen=True)
class NavigationEntry:
    """One place an operator or an agent can go: a console page (``route``
    ``/console/#/cell``) or a CLI command (``route`` ``doraforge skill start``).

    ``aliases`` are the other words it answers to; ``sections`` the headings on a page
    or the subcommands of a command group; ``description`` says what it is for.
    """

    kind: NavigationKind
    label: str
    route: str
    description: str = ""
    aliases: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()


type Entries = Sequence[NavigationEntry] | Callable[[], Sequence[NavigationEntry]]


def _item(entry: NavigationEntry) -> ContextItem:
    return ContextItem(
        ref=opaque_ref("navigation", entry.kind, entry.route),
        scope="navigation",
        kind=entry.kind,
        label=entry.label,
        route=entry.route,
        metadata={"sections": ", ".join(entry.sections)} if entry.sections else {},
        counts={"sections": len(entry.sections)},
        aliases=entry.aliases,
        text="\n".join((entry.description, *entry.sections)).strip(),
    )


class NavigationSource:
    """The navigation scope over ``entries`` (a sequence, or a callable read on every
    snapshot so a table that grows is seen). Never fails: the tables are in memory."""

    def __init__(self, entries: Entries) -> None:
        self._entries = entries

    @property
    def scope(self) -> Scope:
        return "navigation"

    async def snapshot(self, limit: int = MAX_SCAN_ITEMS) -> Snapshot:
        entries = self._entries() if callable(self._entries) else self._entries
        kept, more = bounded(entries, scan_limit(limit))
        return Snapshot(tuple(_item(entry) for entry in kept), source_truncated=more)
