"""The navigation scope: pages and commands handed in as plain data become items with
stable opaque references, their routes and aliases, and a capped scan."""

from __future__ import annotations

import pytest

from doraforge.registry.context.scopes import NavigationEntry, NavigationSource
from doraforge.registry.context.source import ContextSource

pytestmark = pytest.mark.anyio

ENTRIES = (
    NavigationEntry(
        "page",
        "Cell",
        "/console/#/cell",
        "cameras and joint state",
        ("camera", "live view"),
        ("Joint state", "Invocations"),
    ),
    NavigationEntry("page", "Tasks", "/console/#/tasks", "recent tasks", ("verdicts",)),
    NavigationEntry(
        "command",
        "doraforge skill start",
        "doraforge skill start",
        "start a skill",
        ("skill start",),
    ),
)


def test_a_navigation_source_is_a_context_source() -> None:
    source: ContextSource = NavigationSource(ENTRIES)
    assert source.scope == "navigation"


async def test_pages_and_commands_become_items_with_routes_aliases_and_sections() -> None:
    snapshot = await NavigationSource(ENTRIES).snapshot()
    assert snapshot.status == "fresh"
    assert not snapshot.source_truncated
    by_route = {item.route: item for item in snapshot.items}
    cell = by_route["/console/#/cell"]
    assert (cell.kind, cell.label, cell.aliases) == ("page", "Cell", ("camera", "live view"))
    assert cell.metadata == {"sections": "Joint state, Invocations"}
    assert cell.counts == {"sections": 2}
    assert "cameras and joint state" in cell.text
    command = by_route["doraforge skill start"]
    assert command.kind == "command"
    assert command.aliases == ("skill start",)
    assert all(item.ref.startswith("navigation:") for item in snapshot.items)


async def test_references_are_stable_across_snapshots_and_distinct_per_entry() -> None:
    source = NavigationSource(ENTRIES)
    first, second = await source.snapshot(), await source.snapshot()
    assert [i.ref for i in first.items] == [i.ref for i in second.items]
    assert len({i.ref for i in first.items}) == len(ENTRIES)
    assert all("cell" not in i.ref and "skill" not in i.ref for i in first.items)


async def test_a_scan_capped_below_the_table_says_the_source_was_truncated() -> None:
    source = NavigationSource(ENTRIES)
    capped = await source.snapshot(limit=2)
    assert len(capped.items) == 2
    assert capped.source_truncated
    whole = await source.snapshot(limit=3)
    assert len(whole.items) == 3
    assert not whole.source_truncated


async def test_a_table_given_as_a_callable_is_read_on_every_snapshot() -> None:
    table = list(ENTRIES[:1])
    source = NavigationSource(lambda: table)
    assert len((await source.snapshot()).items) == 1
    table.append(ENTRIES[1])
    assert len((await source.snapshot()).items) == 2
