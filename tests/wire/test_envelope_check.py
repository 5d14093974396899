"""The lean envelope check reaches forge-tool's verdict on every case of a corpus."""

from __future__ import annotations

import json
from typing import Any

import pytest
from forge_tool import TOOL_ENDPOINT_PROTOCOL, ToolEnvelope, ToolProtocolError

from doraforge.wire import toolcodec
from doraforge.wire.envelope_check import checked_envelope

BASE: dict[str, Any] = {
    "protocol": TOOL_ENDPOINT_PROTOCOL,
    "message_type": "tool.invoke.request",
    "request_id": "req-1",
    "invocation_id": "inv-1",
    "attempt_id": "att-1",
    "endpoint_id": "mock",
    "endpoint_instance_id": "epinst-1",
    "operation": "echo",
    "sequence": None,
}
PAYLOAD = (
    '{"arguments":{"message":"hi"},"context":{"tool_id":"t","implementation_id":"i","metadata":{}}}'
)
MANAGEMENT = {
    **BASE,
    "message_type": "endpoint.register",
    "invocation_id": None,
    "attempt_id": None,
    "operation": None,
}
EVENT = {**BASE, "message_type": "tool.event", "request_id": None, "sequence": 0}
STATUS = {**MANAGEMENT, "message_type": "endpoint.status", "request_id": None}

HEADERS: list[dict[str, Any]] = [
    BASE,
    MANAGEMENT,
    EVENT,
    STATUS,
    {**BASE, "endpoint_instance_id": None},
    {**BASE, "protocol": "forge.tool.endpoint/v2"},
    {**BASE, "message_type": "tool.bogus"},
    {**BASE, "message_type": None},
    {**BASE, "endpoint_id": ""},
    {**BASE, "endpoint_id": "   "},
    {**BASE, "endpoint_id": "\u3000\u2003"},
    {**BASE, "endpoint_id": "mo\ud800ck"},
    {**BASE, "endpoint_id": "moçk"},
    {**BASE, "request_id": None},
    {**BASE, "invocation_id": None},
    {**BASE, "attempt_id": ""},
    {**BASE, "operation": None},
    {**BASE, "sequence": 3},
    {**BASE, "endpoint_instance_id": " "},
    {**MANAGEMENT, "endpoint_instance_id": None},
    {**MANAGEMENT, "request_id": None},
    {**MANAGEMENT, "operation": "echo"},
    {**MANAGEMENT, "sequence": 1},
    {**STATUS, "request_id": "req-2"},
    {**EVENT, "request_id": "req-3"},
    {**EVENT, "sequence": None},
    {**EVENT, "sequence": -1},
    {**EVENT, "sequence": True},
    {**EVENT, "sequence": 2**53},
]
PAYLOADS = [
    PAYLOAD,
    "{}",
    '{"s":"\\ud800"}',
    '{"s":"\\\\ud800"}',
    '{"s":"\\uDBFF\\uDFFF"}',
    '{"s":"\\ud83d\\ude00"}',
    "[1,2]",
    '"text"',
    json.dumps({"deep": json.loads("[" * 64 + "]" * 64)}),
    json.dumps({"deep": json.loads("[" * 65 + "]" * 65)}),
    '{"brackets":"' + "[" * 80 + '"}',
    '{"n":9007199254740991}',
    '{"x":1.5e300}',
]


def forge_verdict(row: dict[str, Any], text: str) -> str:
    try:
        ToolEnvelope(**row, payload=json.loads(text))
    except ToolProtocolError as exc:
        return exc.code
    return "ok"


def lean_verdict(row: dict[str, Any], text: str) -> str:
    try:
        envelope = checked_envelope(row, toolcodec.strict_loads(text), text)
    except ToolProtocolError as exc:
        return exc.code
    assert envelope == ToolEnvelope(**row, payload=json.loads(text))
    return "ok"


@pytest.mark.parametrize(
    "row", HEADERS, ids=[f"{i}-{row['message_type']}" for i, row in enumerate(HEADERS)]
)
def test_header_matrix_matches_forge_tool(row: dict[str, Any]) -> None:
    assert lean_verdict(row, PAYLOAD) == forge_verdict(row, PAYLOAD)


@pytest.mark.parametrize("text", PAYLOADS)
def test_payload_rules_match_forge_tool(text: str) -> None:
    assert lean_verdict(BASE, text) == forge_verdict(BASE, text)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"n":9007199254740992}', "interoperable"),
        ('{"x":NaN}', "not JSON"),
        ('{"x":1e999}', "not finite"),
        ('{"a":1,"a":2}', "duplicate"),
    ],
)
def test_the_parser_refuses_what_the_wire_forbids(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        toolcodec.strict_loads(text)


def test_a_decoded_row_equals_the_envelope_forge_tool_builds() -> None:
    envelope = ToolEnvelope(**BASE, payload=json.loads(PAYLOAD))
    row = toolcodec.encode(envelope, max_message_bytes=1 << 20)
    assert toolcodec.decode(row, max_message_bytes=1 << 20) == envelope


def test_an_oversized_carrier_is_refused_before_it_is_read() -> None:
    envelope = ToolEnvelope(**BASE, payload={"arguments": {"m": "x" * 5000}, "context": {}})
    row = toolcodec.encode(envelope, max_message_bytes=1 << 20)
    with pytest.raises(ToolProtocolError) as caught:
        toolcodec.decode(row, max_message_bytes=100)
    assert caught.value.code == "FORGE_PROTOCOL_MESSAGE_TOO_LARGE"
