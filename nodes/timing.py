"""Time as providers see it (mock behaviours, motion controllers), so tests can drive it
without real sleeping."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol


class Timing(Protocol):
    """A monotonic clock plus an interruptible pause (the controller's tick)."""

    def now(self) -> float:
        """Return monotonic seconds."""
        ...

    async def pause(self, seconds: float, wake: asyncio.Event) -> None:
        """Wait ``seconds``, or less when ``wake`` is set."""
        ...


class RealTiming:
    """Wall-time behaviour: ``time.monotonic`` and a pause that a halt cuts short."""

    def now(self) -> float:
        return time.monotonic()

    async def pause(self, seconds: float, wake: asyncio.Event) -> None:
        if wake.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout=max(0.0, seconds))
