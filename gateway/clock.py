"""Clocks: monotonic seconds for leases and deadlines, wall milliseconds for callers."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Time source injected into the Gateway core; tests drive a fake one."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going backwards."""
        ...

    def wall_ms(self) -> int:
        """Unix epoch milliseconds."""
        ...


class SystemClock:
    """The real clocks of this process."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


class FakeClock:
    """A manually advanced clock for deterministic tests."""

    def __init__(self, start_wall_ms: int = 1_800_000_000_000) -> None:
        self._mono = 1000.0
        self._wall_origin = start_wall_ms

    def monotonic(self) -> float:
        return self._mono

    def wall_ms(self) -> int:
        return self._wall_origin + int((self._mono - 1000.0) * 1000)

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds``."""
        if seconds < 0:
            raise ValueError("a clock never goes backwards")
        self._mono += seconds
