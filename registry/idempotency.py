"""Process-local idempotency: replay, in-flight sharing, conflicts and expiry.

A request id is bound to the fingerprint of its normalised call (``fingerprint``). Three
bounded windows, all measured with the injected clock:

* **results** — the last ``max_results`` finished results (default 10,000), each for at most
  ``result_ttl_s`` after it finished (default 3,600 s). A replay inside this window returns
  the retained result with ``duplicate: true``.
* **fingerprints** (tombstones) — after its result is dropped, a request id is remembered
  for ``TOMBSTONE_FACTOR`` (24) times the result age and count: by default one day and
  240,000 ids (roughly 100 bytes each). A replay then gets 409 TOOL_IDEMPOTENCY_EXPIRED and
  is never re-run. Only after this much longer window is the id forgotten.
* **in flight** — a call being executed is never evicted; a duplicate arriving meanwhile
  awaits the same future, so the tool runs once.

The same id with a different fingerprint is 409 TOOL_IDEMPOTENCY_CONFLICT in every window.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from doraforge.registry.errors import Conflict, Expired, InvalidRequest
from doraforge.wire.canonical import sha256_hex

TOMBSTONE_FACTOR = 24

type Result = dict[str, Any]


def fingerprint(canonical_name: str, arguments: dict[str, Any], scope: str) -> str:
    """SHA-256 over the canonical name, the normalised arguments and the caller scope."""
    try:
        return sha256_hex([canonical_name, arguments, scope])
    except (TypeError, ValueError) as exc:  # NaN, a lone surrogate, a non-JSON value
        raise InvalidRequest("TOOL_INVALID_CALL", "arguments are not JSON data") from exc


@dataclass(slots=True)
class _Retained:
    fingerprint: str
    finished_at: float
    result: Result


@dataclass(frozen=True)
class Begin:
    """What to do with a call: run it (then ``finish`` it), await another caller's
    in-flight ``future``, or return a retained ``result``."""

    action: str  # "run" | "await" | "replay"
    future: asyncio.Future[Result] | None = None
    result: Result | None = None


#: Every fresh call gets the same (immutable) answer.
_RUN = Begin("run")


def _conflict(request_id: str) -> Conflict:
    return Conflict(
        "TOOL_IDEMPOTENCY_CONFLICT",
        "requestId was already used for a different call",
        details={"requestId": request_id},
    )


class IdempotencyStore:
    """Bounded request-id memory; see the module docstring for the windows."""

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        result_ttl_s: float = 3600,
        max_results: int = 10_000,
    ) -> None:
        self._clock = clock
        self._result_ttl_s = result_ttl_s
        self._max_results = max_results
        self._tombstone_ttl_s = result_ttl_s * TOMBSTONE_FACTOR
        self._max_tombstones = max_results * TOMBSTONE_FACTOR
        # The future is created only when a duplicate arrives while the call runs.
        self._inflight: dict[str, tuple[str, asyncio.Future[Result] | None]] = {}
        self._results: OrderedDict[str, _Retained] = OrderedDict()
        # (fingerprint, finished_at): plain tuples of atoms, which the GC stops tracking.
        self._tombstones: OrderedDict[str, tuple[str, float]] = OrderedDict()

    def begin(self, request_id: str, fp: str) -> Begin:
        """Classify a call. Raises :class:`Conflict` TOOL_IDEMPOTENCY_CONFLICT or
        :class:`Expired` TOOL_IDEMPOTENCY_EXPIRED; on ``run`` the caller must later call
        ``finish``."""
        self._prune()
        if request_id in self._inflight:
            held, future = self._inflight[request_id]
            if held != fp:
                raise _conflict(request_id)
            if future is None:
                future = asyncio.get_running_loop().create_future()
                self._inflight[request_id] = (held, future)
            return Begin("await", future=future)
        retained = self._results.get(request_id)
        if retained is not None:
            if retained.fingerprint != fp:
                raise _conflict(request_id)
            return Begin("replay", result=retained.result)
        tombstone = self._tombstones.get(request_id)
        if tombstone is not None:
            if tombstone[0] != fp:
                raise _conflict(request_id)
            raise Expired(
                "TOOL_IDEMPOTENCY_EXPIRED",
                "the result of this requestId has expired; it will not be run again",
                details={"requestId": request_id},
            )
        self._inflight[request_id] = (fp, None)
        return _RUN

    def finish(self, request_id: str, result: Result) -> None:
        """Retain ``result`` and wake every duplicate waiting on it."""
        fp, future = self._inflight.pop(request_id)
        self._results[request_id] = _Retained(fp, self._clock(), result)
        if future is not None and not future.done():
            future.set_result(result)
        # No prune here: every read (begin, get) prunes first, so the windows hold where
        # they are observed; the store may briefly hold one result over its bound.

    def get(self, request_id: str) -> Result | None:
        """The retained result, or ``None`` (unknown, expired or still running)."""
        self._prune()
        retained = self._results.get(request_id)
        return None if retained is None else retained.result

    def is_remembered(self, request_id: str) -> bool:
        """Whether the id is running, retained or tombstoned."""
        return (
            request_id in self._inflight
            or request_id in self._tombstones
            or (request_id in self._results)
        )

    def _prune(self) -> None:
        now = self._clock()
        results = self._results
        while results:
            request_id = next(iter(results))
            oldest = results[request_id]
            if len(results) <= self._max_results and now - oldest.finished_at <= self._result_ttl_s:
                break
            del results[request_id]
            self._tombstones[request_id] = (oldest.fingerprint, oldest.finished_at)
        while self._tombstones:
            request_id, (_, finished_at) = next(iter(self._tombstones.items()))
            too_many = len(self._tombstones) > self._max_tombstones
            if not too_many and now - finished_at <= self._tombstone_ttl_s:
                break
            del self._tombstones[request_id]
