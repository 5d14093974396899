"""Queries to a provider that takes batches leave together, and fail alone."""

from __future__ import annotations

import asyncio

import pytest
from forge_tool import TOOL_ENDPOINT_PROTOCOL, ToolEnvelope, ToolProtocolError

from doraforge.gateway.exchange import Exchanges
from doraforge.wire.toolcodec import Outbound, WireMessage

pytestmark = pytest.mark.anyio


def _request(request_id: str) -> Outbound:
    return Outbound(
        message_type="tool.invoke.request",
        endpoint_id="mock",
        payload={"arguments": {}, "context": {}},
        request_id=request_id,
    )


def _answer(request: WireMessage) -> ToolEnvelope:
    return ToolEnvelope(
        protocol=TOOL_ENDPOINT_PROTOCOL,
        message_type="tool.invoke.response",
        endpoint_id="mock",
        payload={"outcome": "completed", "result": {"status": "succeeded", "outputs": {}}},
        request_id=request.request_id,
        invocation_id="inv-1",
        attempt_id="att-1",
        endpoint_instance_id="epinst-1",
        operation="echo",
    )


class Carrier:
    """Records what left as one value; answers each request on the next loop turn."""

    def __init__(self) -> None:
        self.values: list[list[str]] = []
        self.exchanges = Exchanges(self.send, self.send_many)
        self.refuse: set[str] = set()
        self.broken = False

    def send(self, endpoint_id: str, message: WireMessage) -> None:
        self.send_many(endpoint_id, [message])

    def send_many(
        self, endpoint_id: str, messages: list[WireMessage]
    ) -> list[tuple[WireMessage, ToolProtocolError]]:
        if self.broken:
            raise ConnectionError("dora send_output 'mock' failed: closed")
        refused = [
            (m, ToolProtocolError("FORGE_PROTOCOL_MESSAGE_TOO_LARGE", "too large"))
            for m in messages
            if m.request_id in self.refuse
        ]
        sent = [m for m in messages if m.request_id not in self.refuse]
        self.values.append([str(m.request_id) for m in sent])
        loop = asyncio.get_running_loop()
        for message in sent:
            loop.call_soon(self.exchanges.resolve, endpoint_id, _answer(message))
        return refused


async def _ask(carrier: Carrier, request_id: str, batch_rows: int) -> str:
    answer = await carrier.exchanges.request("mock", _request(request_id), 5, batch_rows=batch_rows)
    return str(answer.request_id)


async def test_queries_issued_in_one_loop_turn_leave_as_one_value_of_at_most_batch_rows() -> None:
    carrier = Carrier()
    ids = [f"req-{index}" for index in range(5)]
    answered = await asyncio.gather(*(_ask(carrier, rid, batch_rows=2) for rid in ids))
    assert answered == ids  # each caller got its own answer
    # The first leaves at once; the rest of the turn leaves together, two to a value.
    assert carrier.values == [["req-0"], ["req-1", "req-2"], ["req-3", "req-4"]]
    assert len(carrier.exchanges) == 0


async def test_without_batch_rows_every_query_leaves_alone_and_at_once() -> None:
    carrier = Carrier()
    ids = [f"req-{index}" for index in range(3)]
    assert await asyncio.gather(*(_ask(carrier, rid, batch_rows=1) for rid in ids)) == ids
    assert carrier.values == [["req-0"], ["req-1"], ["req-2"]]


async def test_a_refused_row_fails_its_own_caller_and_the_others_are_answered() -> None:
    carrier = Carrier()
    carrier.refuse = {"req-2"}
    results = await asyncio.gather(
        *(_ask(carrier, f"req-{index}", batch_rows=8) for index in range(4)),
        return_exceptions=True,
    )
    assert results[:2] == ["req-0", "req-1"]
    assert results[3] == "req-3"
    assert isinstance(results[2], ToolProtocolError)
    assert carrier.values == [["req-0"], ["req-1", "req-3"]]


async def test_a_carrier_that_cannot_send_fails_the_whole_batch_with_connection_error() -> None:
    carrier = Carrier()
    carrier.broken = True  # the first of the turn is refused at once, the batch at the flush
    results = await asyncio.gather(
        *(_ask(carrier, f"req-{index}", batch_rows=8) for index in range(3)),
        return_exceptions=True,
    )
    assert all(isinstance(result, ConnectionError) for result in results)
    assert len(carrier.exchanges) == 0


async def test_a_caller_that_gave_up_before_the_flush_is_never_sent() -> None:
    carrier = Carrier()
    first = asyncio.ensure_future(_ask(carrier, "req-first", batch_rows=8))
    kept = asyncio.ensure_future(_ask(carrier, "req-kept", batch_rows=8))
    gone = asyncio.ensure_future(_ask(carrier, "req-gone", batch_rows=8))
    await asyncio.sleep(0)  # the first sent, the other two queued, the flush not yet run
    carrier.exchanges.close("req-gone")  # what the caller's request() does once it gives up
    assert [await first, await kept] == ["req-first", "req-kept"]
    assert carrier.values == [["req-first"], ["req-kept"]]
    gone.cancel()
