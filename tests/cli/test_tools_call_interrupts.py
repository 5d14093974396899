"""``tools call``'s interrupt rule: the first signal requests a cancel and the wait goes on,
the second abandons the wait at once."""

from __future__ import annotations

import asyncio

import pytest

from doraforge.cli.tools_call import Abandoned, Interrupts

pytestmark = pytest.mark.anyio


async def test_the_first_interrupt_ends_the_pause_and_the_wait_goes_on():
    interrupts = Interrupts()
    asyncio.get_running_loop().call_soon(interrupts._on_signal)
    await interrupts.pause(60.0)  # returns at the signal, not after a minute
    assert interrupts.requested.is_set()
    assert not interrupts.abandoned.is_set()


async def test_a_pause_without_an_interrupt_lasts_its_bound():
    interrupts = Interrupts()
    await interrupts.pause(0.0)
    assert not interrupts.requested.is_set()


async def test_the_second_interrupt_abandons_the_wait():
    interrupts = Interrupts()
    interrupts._on_signal()
    asyncio.get_running_loop().call_soon(interrupts._on_signal)
    with pytest.raises(Abandoned):
        await interrupts.pause(60.0)
