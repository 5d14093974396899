"""The context source contract: one scope, snapshotted as bounded, opaque records.

A source never returns a filesystem path, a token, a credential or a raw tool output; it
returns :class:`ContextItem` records whose ``ref`` is an opaque hash (:func:`opaque_ref`)
stable for the same underlying thing. ``text`` is private: it may be matched by a search
and, under the *redacted summaries* profile only, summarised after redaction; it is never
returned as is. A source that cannot read its state raises :class:`SourceError` (answered
as a tool error, never as an empty result); one that answers from a retained copy instead
of a live read says ``status="stale"``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

type Scope = Literal["navigation", "skills", "tools", "tasks", "evidence", "runtime"]
type SourceStatus = Literal["fresh", "stale"]
type Scalar = str | int | float | bool | None

#: Every scope doraforge has, in the order they are reported.
SCOPES: tuple[Scope, ...] = ("navigation", "skills", "tools", "tasks", "evidence", "runtime")
#: At most this many source items are inspected per scope and call.
MAX_SCAN_ITEMS = 1_000
_REF_HASH_CHARS = 24


def opaque_ref(scope: Scope, *parts: str) -> str:
    """A stable opaque reference ``<scope>:<hash>`` for the thing named by ``parts``.

    The same parts always give the same reference, and the reference reveals nothing of
    them (a SHA-256 prefix): a path or an id in ``parts`` never reaches a caller.
    """
    digest = hashlib.sha256("\x1f".join((scope, *parts)).encode()).hexdigest()
    return f"{scope}:{digest[:_REF_HASH_CHARS]}"


@dataclass(frozen=True)
class ContextItem:
    """One context record of a scope.

    ``label`` and ``metadata`` are returned under every profile, so they hold only
    metadata (names, versions, states, counts, times, digests); ``route`` is the console
    route or CLI command that shows the thing; ``aliases`` are extra words a navigation
    lookup matches; ``text`` is private matching text (see the module docstring).
    """

    ref: str
    scope: Scope
    kind: str
    label: str
    route: str | None = None
    metadata: Mapping[str, Scalar] = field(default_factory=dict)
    counts: Mapping[str, int] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    text: str = ""


@dataclass(frozen=True)
class Snapshot:
    """What one read of a source saw: at most ``MAX_SCAN_ITEMS`` items, whether more
    existed (``source_truncated``), and whether it was a live read (``fresh``)."""

    items: tuple[ContextItem, ...]
    source_truncated: bool = False
    status: SourceStatus = "fresh"


class SourceError(Exception):
    """A source could not be read: ``code`` and a one-line ``message`` saying what to do."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class ContextSource(Protocol):
    """One scope's reader. ``snapshot`` inspects at most ``limit`` source items."""

    @property
    def scope(self) -> Scope: ...

    async def snapshot(self, limit: int = MAX_SCAN_ITEMS) -> Snapshot:
        """The scope's items now; raises :class:`SourceError` when it cannot be read."""
        ...
