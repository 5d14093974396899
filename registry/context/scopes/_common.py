"""What every scope shares: the scan cap, times as text, the task store opened for reads."""

from __future__ import annotations

import asyncio
import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from doraforge.paos.errors import PaosError
from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.registry.context.source import MAX_SCAN_ITEMS, Scope, Snapshot, SourceError


def scan_limit(limit: int) -> int:
    """``limit`` within ``0..MAX_SCAN_ITEMS``: no caller can widen the spec's scan cap."""
    return max(0, min(int(limit), MAX_SCAN_ITEMS))


def bounded[T](items: Iterable[T], limit: int) -> tuple[list[T], bool]:
    """At most ``limit`` of ``items`` and whether more existed; reads ``limit + 1`` at most,
    so a lazy ``items`` is never walked further than the cap."""
    taken = list(itertools.islice(items, limit + 1))
    return taken[:limit], len(taken) > limit


def iso_ms(ms: int | None) -> str | None:
    """A Unix time in milliseconds as ISO 8601 UTC text (``None`` stays ``None``)."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def iso_ns(ns: int | None) -> str | None:
    """A Unix time in nanoseconds as ISO 8601 UTC text (``None`` stays ``None``)."""
    return None if ns is None else iso_ms(ns // 1_000_000)


@contextmanager
def task_store(home: PaosHome, scope_name: str) -> Iterator[AgentTaskStore | None]:
    """The home's task store on a connection of its own for this one read (``None`` when
    the home has no store yet: nothing recorded, so nothing is created either).

    A connection of its own: the server's TaskService writes on its connection from the
    event loop, and a read must never see the inside of one of its transactions.
    Raises :class:`SourceError` ``CONTEXT_STORE_UNAVAILABLE`` when the store cannot be read.
    """
    if not home.store_path.is_file():
        yield None
        return
    try:
        store = AgentTaskStore(home.store_path)
    except PaosError as exc:
        raise _store_failure(scope_name) from exc
    try:
        yield store
    except PaosError as exc:
        raise _store_failure(scope_name) from exc
    finally:
        store.close()


def _store_failure(scope_name: str) -> SourceError:
    return SourceError(
        "CONTEXT_STORE_UNAVAILABLE",
        f"the {scope_name} scope cannot read the task store; retry, "
        "or check it with `doraforge task list`",
    )


class HomeSource(ABC):
    """A scope of the PAOS home read by one blocking :meth:`read` in a worker thread, so
    a slow disk or a busy store never stalls the server's event loop."""

    scope_name: Scope

    def __init__(self, home: PaosHome) -> None:
        self._home = home

    @property
    def scope(self) -> Scope:
        return self.scope_name

    async def snapshot(self, limit: int = MAX_SCAN_ITEMS) -> Snapshot:
        return await asyncio.to_thread(self.read, scan_limit(limit))

    @abstractmethod
    def read(self, limit: int) -> Snapshot:
        """At most ``limit`` items of the scope now (blocking)."""
