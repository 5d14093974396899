"""Bounded waits: poll a condition until it holds, or fail naming what was awaited.

A wait is for state that changes elsewhere (another thread, a process, a socket, tasks on
the event loop). Time itself is never waited for: a test that needs time to pass drives a
:class:`tests.support.clock.FakeClock`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import overload

SYNC_INTERVAL_S = 0.05
ASYNC_INTERVAL_S = 0.002

type Detail = Callable[[], object]


def eventually[T](
    predicate: Callable[[], T | None],
    *,
    within: float,
    what: str,
    detail: Detail | None = None,
    interval: float = SYNC_INTERVAL_S,
) -> T:
    """Call ``predicate`` until it returns a truthy value, and return that value.

    Raises ``AssertionError`` naming ``what`` (and ``detail()``, read at that moment) when
    ``within`` seconds pass first. Blocks the calling thread, so on an event loop it also
    holds the loop still (use :func:`eventually_async` when the loop must keep running).
    """
    deadline = time.monotonic() + within
    while not (value := predicate()):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(_message(what, within, detail))
        time.sleep(min(interval, remaining))
    return value


@overload
async def eventually_async[T](
    predicate: Callable[[], Awaitable[T | None]],
    *,
    within: float = 5.0,
    what: str,
    detail: Detail | None = None,
    interval: float = ASYNC_INTERVAL_S,
) -> T: ...


@overload
async def eventually_async[T](
    predicate: Callable[[], T | None],
    *,
    within: float = 5.0,
    what: str,
    detail: Detail | None = None,
    interval: float = ASYNC_INTERVAL_S,
) -> T: ...


async def eventually_async(
    predicate: Callable[[], object],
    *,
    within: float = 5.0,
    what: str,
    detail: Detail | None = None,
    interval: float = ASYNC_INTERVAL_S,
) -> object:
    """:func:`eventually` on the event loop: ``predicate`` may be sync or return an
    awaitable (an HTTP read, say), and the loop keeps running between polls."""
    scope = asyncio.timeout(within)
    try:
        async with scope:
            # The state polled changes elsewhere and offers nothing to await on.
            while not (value := await _value(predicate())):  # noqa: ASYNC110
                await asyncio.sleep(interval)
    except TimeoutError:
        if scope.expired():
            raise AssertionError(_message(what, within, detail)) from None
        raise  # the predicate's own timeout, not this wait's
    return value


async def _value[T](result: T | Awaitable[T]) -> T:
    return await result if inspect.isawaitable(result) else result


def _message(what: str, within: float, detail: Detail | None) -> str:
    message = f"waited {within} s for {what}"
    return message if detail is None else f"{message}; {detail()}"


async def settle(rounds: int = 50) -> None:
    """Let callbacks and tasks already scheduled on the loop run (bounded; no time passes)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
