"""Sanitized fake sources built from fixture data (never the home or a running robot)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from doraforge.registry.context.eval.schema import FailSpec, GenerateSpec, ItemSpec, SourceSpec
from doraforge.registry.context.source import (
    MAX_SCAN_ITEMS,
    ContextItem,
    Scope,
    Snapshot,
    SourceError,
    SourceStatus,
    opaque_ref,
)


@dataclass
class FakeSource:
    """A sanitized in-memory source built from fixture data; honours ``limit`` as a real
    source must, records how many records each snapshot inspected, and fails or answers
    stale as its spec says."""

    scope: Scope
    items: tuple[ContextItem, ...]
    status: SourceStatus = "fresh"
    failure: FailSpec | None = None
    inspected: list[int] = field(default_factory=list)

    async def snapshot(self, limit: int = MAX_SCAN_ITEMS) -> Snapshot:
        if self.failure is not None:
            self.inspected.append(0)
            raise SourceError(self.failure.code, self.failure.message)
        shown = self.items[: max(limit, 0)]
        self.inspected.append(len(shown))
        return Snapshot(shown, source_truncated=len(self.items) > len(shown), status=self.status)


def build_sources(specs: Mapping[Scope, SourceSpec]) -> dict[Scope, FakeSource]:
    """Fresh fake sources, one per scope of ``specs``."""
    return {
        scope: FakeSource(scope, _items(scope, spec), spec.status, spec.fail)
        for scope, spec in specs.items()
    }


def _items(scope: Scope, spec: SourceSpec) -> tuple[ContextItem, ...]:
    items = [_item(scope, item) for item in spec.items]
    if spec.generate is not None:
        items += [_item(scope, _generated(spec.generate, n)) for n in range(spec.generate.count)]
    return tuple(items)


def _generated(spec: GenerateSpec, n: int) -> ItemSpec:
    def fill(template: str) -> str:
        return template.replace("{n}", str(n))

    return ItemSpec(
        key=fill(spec.key), kind=spec.kind, label=fill(spec.label), text=fill(spec.text)
    )


def _item(scope: Scope, spec: ItemSpec) -> ContextItem:
    return ContextItem(
        ref=opaque_ref(scope, spec.key),
        scope=scope,
        kind=spec.kind,
        label=spec.label,
        route=spec.route,
        metadata=dict(spec.metadata),
        counts=dict(spec.counts),
        aliases=spec.aliases,
        text=spec.text,
    )
