"""``tools call``'s interrupt rule: the first signal requests a cancel and the wait goes on,
the second abandons the wait at once."""

from __future__ import annotations

import asyncio

import pytest

from doraforge.cli.tools_call import Abandoned, Interrupts, OutcomeUnknown, call_tool
from doraforge.paos.errors import ForgeTransportError

pytestmark = pytest.mark.anyio


async def test_the_first_interrupt_ends_the_pause_and_the_wait_goes_on() -> None:
    interrupts = Interrupts()
    asyncio.get_running_loop().call_soon(interrupts._on_signal)
    await interrupts.pause(60.0)  # returns at the signal, not after a minute
    assert interrupts.requested.is_set()
    assert not interrupts.abandoned.is_set()


async def test_a_pause_without_an_interrupt_lasts_its_bound() -> None:
    interrupts = Interrupts()
    await interrupts.pause(0.0)
    assert not interrupts.requested.is_set()


async def test_the_second_interrupt_abandons_the_wait() -> None:
    interrupts = Interrupts()
    interrupts._on_signal()
    asyncio.get_running_loop().call_soon(interrupts._on_signal)
    with pytest.raises(Abandoned):
        await interrupts.pause(60.0)


class _GatewayGoneAfterAdmission:
    """A client whose Gateway admits a move and then stops answering."""

    async def tool_spec(self, tool_id: str) -> tuple[dict[str, str], str]:
        return {"semantics": "action", "endpoint_id": "mock", "operation": "move"}, "sha"

    async def invoke(self, tool_id: str, arguments: object, *, caller_id: str) -> dict[str, str]:
        return {"invocation_id": "inv_1", "attempt_id": "att_1", "phase": "running"}

    async def invocation(self, invocation_id: str) -> dict[str, object]:
        raise ForgeTransportError("FORGE_CLIENT_TRANSPORT", "connection refused")


async def test_a_gateway_lost_while_the_action_runs_is_an_unknown_outcome_not_a_failure() -> None:
    said: list[str] = []
    with pytest.raises(OutcomeUnknown) as lost:
        await call_tool(_GatewayGoneAfterAdmission(), "mock.move", {}, said.append, Interrupts())
    assert lost.value.invocation_id == "inv_1"
    assert said == ["mock.move: action inv_1 admitted (running)"]
