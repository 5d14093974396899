"""The provider's lean Query path hands the SPI the values forge-tool would build, and
answers a context forge-tool refuses with forge-tool's own message."""

from __future__ import annotations

from typing import Any

import pytest
from forge_tool import (
    TOOL_ENDPOINT_PROTOCOL,
    ToolContext,
    ToolEndpointDescriptor,
    ToolEndpointHandler,
    ToolEnvelope,
    ToolExecutionKey,
    ToolOperationDescriptor,
    ToolRequest,
    ToolResult,
)

from doraforge.nodes.query_path import QueryPath
from doraforge.wire import toolcodec

pytestmark = pytest.mark.anyio

INSTANCE = "epinst-q"
MAX = 1 << 20


class Recording:
    """A Query that keeps what it was handed."""

    def __init__(self) -> None:
        self.seen: list[tuple[ToolRequest, ToolContext]] = []

    async def query(self, request: ToolRequest, context: ToolContext) -> ToolResult:
        self.seen.append((request, context))
        return ToolResult(status="succeeded", outputs={"n": len(self.seen)})


def query_path() -> tuple[QueryPath, Recording]:
    descriptor = ToolEndpointDescriptor(
        protocol_version=TOOL_ENDPOINT_PROTOCOL,
        endpoint_id="fake",
        operations=(ToolOperationDescriptor(name="look", semantics="query"),),
    )
    recording = Recording()
    handler = ToolEndpointHandler(
        descriptor, endpoint_instance_id=INSTANCE, operations={"look": recording}
    )
    return QueryPath(handler, {"look": recording}, max_message_bytes=MAX), recording


def invoke(arguments: Any, context: dict[str, Any]) -> ToolEnvelope:
    """A request as it arrives: through the carrier row and the codec's decode."""
    envelope = toolcodec.Outbound(
        message_type="tool.invoke.request",
        endpoint_id="fake",
        payload={"arguments": arguments, "context": context},
        request_id="req-1",
        invocation_id="inv-1",
        attempt_id="att-1",
        endpoint_instance_id=INSTANCE,
        operation="look",
    )
    row = toolcodec.encode(envelope, max_message_bytes=MAX)
    return toolcodec.decode(row, max_message_bytes=MAX)


BASE = {"tool_id": "fake.look", "implementation_id": "fake.look.v1", "metadata": {}}
CONTEXTS = [
    BASE,
    {**BASE, "caller_id": "agent-7", "deadline_ms": 1_764_000_000_000},
    {**BASE, "metadata": {"trace": {"span": [1, 2.5, None, True, "é"]}}},
    {**BASE, "deadline_ms": 0},
]
REFUSED = [
    {**BASE, "tool_id": "  "},
    {**BASE, "tool_id": 7},
    {**BASE, "implementation_id": "\u3000"},
    {**BASE, "caller_id": ""},
    {**BASE, "deadline_ms": True},
    {**BASE, "deadline_ms": -1},
    {**BASE, "deadline_ms": 1.5},
    {**BASE, "metadata": []},
]


def forge_context(request: ToolEnvelope, raw: dict[str, Any]) -> ToolContext:
    return ToolContext(
        execution_key=ToolExecutionKey(
            invocation_id=str(request.invocation_id), attempt_id=str(request.attempt_id)
        ),
        tool_id=raw["tool_id"],
        implementation_id=raw["implementation_id"],
        endpoint_id=str(request.endpoint_id),
        operation=str(request.operation),
        caller_id=raw.get("caller_id"),
        deadline_ms=raw.get("deadline_ms"),
        metadata=raw["metadata"],
    )


@pytest.mark.parametrize("context", CONTEXTS)
async def test_the_query_gets_the_request_and_context_forge_tool_would_build(
    context: dict[str, Any],
) -> None:
    path, recording = query_path()
    arguments = {"message": "x" * 200, "nested": {"list": [1, -2, 3.25]}}
    request = invoke(arguments, context)
    answer = toolcodec.decode(await path.answer(request), max_message_bytes=MAX)
    assert answer.message_type == "tool.invoke.response"
    [(seen_request, seen_context)] = recording.seen
    assert seen_request == ToolRequest(arguments=arguments)
    assert seen_context == forge_context(request, context)
    assert seen_context.invocation_id == "inv-1"


@pytest.mark.parametrize("context", REFUSED)
async def test_a_context_forge_tool_refuses_gets_its_message_in_a_tool_error(
    context: dict[str, Any],
) -> None:
    path, recording = query_path()
    request = invoke({}, context)
    with pytest.raises((TypeError, ValueError)) as forge:
        forge_context(request, context)
    answer = toolcodec.decode(await path.answer(request), max_message_bytes=MAX)
    assert answer.message_type == "tool.error"
    assert answer.request_id == "req-1"
    assert answer.payload["error"]["message"] == str(forge.value)
    assert recording.seen == []


async def test_arguments_that_are_not_an_object_get_a_tool_error() -> None:
    path, recording = query_path()
    answer = toolcodec.decode(await path.answer(invoke([1], BASE)), max_message_bytes=MAX)
    assert answer.payload["error"]["code"] == "FORGE_PROTOCOL_INVALID_PAYLOAD"
    assert answer.protocol == TOOL_ENDPOINT_PROTOCOL
    assert recording.seen == []
