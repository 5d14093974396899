"""The one fake clock of the test suite.

:class:`FakeClock` implements the Gateway's :class:`doraforge.gateway.clock.Clock` protocol
(``monotonic`` and ``wall_ms``), is itself the ``Callable[[], float]`` monotonic clock that
the registry, the provider runner and the camera take, and hands out deadlines
(:meth:`FakeClock.timeout`, the registry's ``deadline`` seam) that expire when the test
advances the clock past them. Nothing moves unless the test calls :meth:`FakeClock.advance`.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

START_MONOTONIC_S = 1000.0
START_WALL_MS = 1_800_000_000_000


class FakeClock:
    """A clock the test moves by hand; monotonic seconds and wall milliseconds move together.

    Time is kept in whole nanoseconds, so advancing by 0.199 s and then 0.001 s reaches a
    deadline set 0.2 s ahead exactly, as it would on a real clock.
    """

    def __init__(
        self, start: float = START_MONOTONIC_S, *, start_wall_ms: int = START_WALL_MS
    ) -> None:
        self._start_ns = self._now_ns = _ns(start)
        self._start_wall_ms = start_wall_ms
        self._armed: list[FakeDeadline] = []
        self.requested: list[float | None] = []  # every delay handed to timeout(), in order

    @property
    def now(self) -> float:
        """The monotonic reading, in seconds."""
        return self._now_ns / 1e9

    def monotonic(self) -> float:
        return self.now

    def __call__(self) -> float:
        return self.now

    def wall_ms(self) -> int:
        return self._start_wall_ms + (self._now_ns - self._start_ns) // 1_000_000

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` and expire every deadline now due."""
        if seconds < 0:
            raise ValueError("a clock never goes backwards")
        self._now_ns += _ns(seconds)
        for deadline in list(self._armed):
            deadline.expire_if_due(self._now_ns)

    def timeout(self, delay: float | None) -> FakeDeadline:
        """An ``asyncio.timeout(delay)`` measured on this clock (``None``: no deadline)."""
        self.requested.append(delay)
        return FakeDeadline(self, None if delay is None else self._now_ns + _ns(delay))

    def _arm(self, deadline: FakeDeadline) -> None:
        self._armed.append(deadline)
        deadline.expire_if_due(self._now_ns)

    def _disarm(self, deadline: FakeDeadline) -> None:
        if deadline in self._armed:
            self._armed.remove(deadline)


class FakeDeadline:
    """An ``asyncio.timeout`` scope whose deadline lies on a :class:`FakeClock`.

    When the clock reaches ``when_ns`` the scope expires exactly as a real one does: the task
    inside is cancelled on the next loop iteration and the block raises ``TimeoutError``.
    """

    def __init__(self, clock: FakeClock, when_ns: int | None) -> None:
        self.when_ns = when_ns
        self._clock = clock
        self._scope = asyncio.timeout(None)
        self._fired = False

    async def __aenter__(self) -> asyncio.Timeout:
        await self._scope.__aenter__()
        self._clock._arm(self)
        return self._scope

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._clock._disarm(self)
        await self._scope.__aexit__(exc_type, exc, traceback)  # it never suppresses

    def expire_if_due(self, now_ns: int) -> None:
        if self.when_ns is not None and now_ns >= self.when_ns and not self._fired:
            self._fired = True
            self._scope.reschedule(asyncio.get_running_loop().time())


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)
