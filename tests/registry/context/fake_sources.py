"""Small in-memory context sources for the unit tests of the context service and the MCP
edge: they implement :class:`~doraforge.registry.context.source.ContextSource` exactly.
:func:`context_app` is the registry app over them and the demo tools."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from fastapi import FastAPI

from doraforge.registry.context.source import (
    MAX_SCAN_ITEMS,
    ContextItem,
    ContextSource,
    Scope,
    Snapshot,
    SourceError,
    SourceStatus,
    opaque_ref,
)
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import DemoTools

#: A secret in private text: it may match a search but must never be returned.
SECRET = "ghp_Zq8rT2vLx9Kw3mNp7Yb4Hc6Jd1Fs5Ga0Qe"


@dataclass
class FakeSource:
    """A source answering ``items`` (or raising ``error``); counts its reads."""

    scope: Scope
    items: tuple[ContextItem, ...] = ()
    status: SourceStatus = "fresh"
    error: Exception | None = None
    hang: bool = False
    reads: list[int] = field(default_factory=list)

    async def snapshot(self, limit: int = MAX_SCAN_ITEMS) -> Snapshot:
        self.reads.append(limit)
        if self.hang:
            await asyncio.Event().wait()  # never set: the service's timeout ends it
        if self.error is not None:
            raise self.error
        return Snapshot(
            self.items[:limit], source_truncated=len(self.items) > limit, status=self.status
        )


def item(scope: Scope, name: str, **fields: object) -> ContextItem:
    """A context item of ``scope`` named ``name`` (its label unless one is given)."""
    values: dict[str, object] = {"kind": "thing", "label": name, **fields}
    return ContextItem(ref=opaque_ref(scope, name), scope=scope, **values)  # type: ignore[arg-type]


def cell() -> dict[Scope, FakeSource]:
    """A small cell: console pages and CLI commands, two skills, three tools, the runtime,
    a task and an evidence record."""
    return {
        "navigation": FakeSource(
            "navigation",
            (
                item(
                    "navigation",
                    "Skills",
                    kind="page",
                    route="/console/skills",
                    aliases=("installed skills", "bundles"),
                ),
                item(
                    "navigation",
                    "Approvals",
                    kind="page",
                    route="/console/approvals",
                    aliases=("pending approvals",),
                ),
                item(
                    "navigation",
                    "skill install",
                    kind="command",
                    route="doraforge skill install",
                    aliases=("install a skill",),
                ),
            ),
        ),
        "skills": FakeSource(
            "skills",
            (
                item(
                    "skills",
                    "pick-place",
                    kind="skill",
                    route="/console/skills/pick-place",
                    metadata={"version": "1.2.0", "profile": "sim"},
                    counts={"tools": 3},
                    text=f"Pick a cube and place it in the zone. token={SECRET}",
                ),
                item(
                    "skills",
                    "inspect",
                    kind="skill",
                    metadata={"version": "0.3.1"},
                    text="Look at the cell with the wrist camera.",
                ),
            ),
        ),
        "tools": FakeSource(
            "tools",
            (
                item("tools", "arm.move", kind="tool", metadata={"ready": True}),
                item("tools", "gripper.close", kind="tool", metadata={"ready": True}),
                item(
                    "tools",
                    "camera.capture",
                    kind="tool",
                    metadata={"ready": False},
                    text="captures a frame from the wrist camera",
                ),
            ),
        ),
        "runtime": FakeSource(
            "runtime",
            (item("runtime", "runtime", kind="runtime", metadata={"state": "running"}),),
        ),
        "tasks": FakeSource(
            "tasks",
            (
                item(
                    "tasks",
                    "task-1",
                    label="pick the red cube",
                    kind="task",
                    metadata={"verdict": "succeeded"},
                ),
            ),
        ),
        "evidence": FakeSource(
            "evidence",
            (
                item(
                    "evidence",
                    "ev-1",
                    label="frame 12",
                    kind="evidence",
                    metadata={"sha256": "ab" * 32, "size": 4096},
                ),
            ),
        ),
    }


def failing(scope: Scope) -> FakeSource:
    """A source whose read fails with a :class:`SourceError`."""
    return FakeSource(scope, error=SourceError("SKILLS_UNREADABLE", "the skill index is locked"))


def context_app(
    settings: ServerSettings,
    sources: Mapping[Scope, ContextSource] | None = None,
    tools: DemoTools | None = None,
) -> FastAPI:
    """The server app over the demo tools and ``sources`` (by default :func:`cell`)."""
    service = new_service(settings)
    (tools or DemoTools()).register(service)
    return build_app(service, settings, context_sources=cell() if sources is None else sources)
