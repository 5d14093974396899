"""Bounded retention of invocations, the caller_id index and eviction tombstones."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from doraforge.gateway.config import RetentionConfig
from doraforge.gateway.invocation import Invocation


class InvocationStore:
    """Invocations in creation order; only terminal, unfenced ones are ever evicted.

    Bounds: at most ``max_invocations`` retained (plus the active ones, which the
    endpoints' ``max_concurrency`` already bounds), none older than ``max_age_s`` once
    terminal, and the ids of the last ``evicted_ids_remembered`` evictions so that a read
    of an evicted invocation answers 410 rather than 404.
    """

    def __init__(self, retention: RetentionConfig) -> None:
        self._retention = retention
        self._items: OrderedDict[str, Invocation] = OrderedDict()
        self._by_caller: dict[str, str] = {}
        self._evicted: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Invocation]:
        return iter(list(self._items.values()))

    def add(self, invocation: Invocation) -> None:
        """Retain ``invocation`` and index its caller_id."""
        self._items[invocation.invocation_id] = invocation
        if invocation.caller_id is not None:
            self._by_caller[invocation.caller_id] = invocation.invocation_id

    def get(self, invocation_id: str) -> Invocation | None:
        """Return the retained invocation with this id."""
        return self._items.get(invocation_id)

    def was_evicted(self, invocation_id: str) -> bool:
        """Whether this id was retained once and has since been evicted."""
        return invocation_id in self._evicted

    def latest_for_caller(self, caller_id: str) -> Invocation | None:
        """The newest retained invocation admitted under ``caller_id``."""
        invocation_id = self._by_caller.get(caller_id)
        return None if invocation_id is None else self._items.get(invocation_id)

    def all_for_caller(self, caller_id: str) -> list[Invocation]:
        """Every retained invocation admitted under ``caller_id``, oldest first."""
        return [inv for inv in self._items.values() if inv.caller_id == caller_id]

    def active(self) -> list[Invocation]:
        """Invocations that are not terminal or still hold a concurrency slot."""
        return [inv for inv in self._items.values() if not inv.terminal or inv.slot_held]

    def evict(self, now_ms: int) -> int:
        """Drop terminal invocations past the age or count bound; return how many."""
        max_age_ms = self._retention.max_age_s * 1000
        evicted = 0
        for invocation in list(self._items.values()):
            if not invocation.terminal or invocation.slot_held:
                continue  # never evict what a caller may still be waiting on
            over_count = len(self._items) > self._retention.max_invocations
            expired = now_ms - (invocation.terminal_at_ms or now_ms) > max_age_ms
            if not over_count and not expired:
                break  # creation order approximates age; the rest is younger
            self._drop(invocation)
            evicted += 1
        return evicted

    def _drop(self, invocation: Invocation) -> None:
        del self._items[invocation.invocation_id]
        caller = invocation.caller_id
        if caller is not None and self._by_caller.get(caller) == invocation.invocation_id:
            del self._by_caller[caller]
        if self._retention.evicted_ids_remembered:
            self._evicted[invocation.invocation_id] = None
            while len(self._evicted) > self._retention.evicted_ids_remembered:
                self._evicted.popitem(last=False)
