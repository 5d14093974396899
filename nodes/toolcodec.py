"""A lean codec between logical ToolEnvelopes and the ``forge_msgs.ToolMessage`` row.

It produces and accepts exactly the canonical carrier schema of ``forge_msgs`` (one row,
ten columns), but encodes a row in one Arrow call and decodes with one strict JSON parse
followed by ``ToolEnvelope`` validation, instead of the several validation passes of the
generic helpers. Control-plane latency is dominated by this step on both sides of a tool
exchange; the checks that make an untrusted row safe (size bound before parsing, strict
JSON with no duplicate keys, no NaN, interoperable integers, envelope header matrix) are
all still applied.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import pyarrow as pa
from forge_msgs.tool import TOOL_MESSAGE_SCHEMA
from forge_tool import (
    MAX_SAFE_JSON_INTEGER,
    TOOL_ENDPOINT_PROTOCOL,
    ToolEnvelope,
    ToolProtocolError,
)

from doraforge.nodes.envelope_check import checked_envelope

TOOL_MESSAGE_TYPE = pa.struct(list(TOOL_MESSAGE_SCHEMA))
_COLUMNS = frozenset(TOOL_MESSAGE_SCHEMA.names)
_CARRIER_OVERHEAD_BYTES = 65_536
_HEADER = ("request_id", "invocation_id", "attempt_id", "endpoint_instance_id", "operation")


class Outbound(NamedTuple):
    """A message the sender built itself from trusted fields, encoded without a re-check.

    It has the attributes of a ``ToolEnvelope``; :func:`encode` still refuses a payload
    that is not strict JSON (NaN, lone surrogates) or is over the size limit.
    """

    message_type: str
    endpoint_id: str
    payload: Mapping[str, Any]
    request_id: str | None = None
    invocation_id: str | None = None
    attempt_id: str | None = None
    endpoint_instance_id: str | None = None
    operation: str | None = None
    sequence: int | None = None
    protocol: str = TOOL_ENDPOINT_PROTOCOL


type WireMessage = ToolEnvelope | Outbound


def encode(envelope: WireMessage, *, max_message_bytes: int) -> pa.StructArray:
    """Encode ``envelope`` as a one-row ``ToolMessage`` StructArray ready for Dora."""
    try:
        payload_json = json.dumps(
            envelope.payload,
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
            sort_keys=True,
        )
        size = len(payload_json.encode("utf-8"))
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise ToolProtocolError("FORGE_PROTOCOL_INVALID_PAYLOAD", str(exc)) from exc
    if size > max_message_bytes:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_MESSAGE_TOO_LARGE",
            f"payload exceeds {max_message_bytes} bytes",
        )
    row = {
        "protocol": envelope.protocol,
        "message_type": envelope.message_type,
        "endpoint_id": envelope.endpoint_id,
        "sequence": envelope.sequence,
        "payload_json": payload_json,
    }
    for name in _HEADER:
        row[name] = getattr(envelope, name)
    return pa.array([row], type=TOOL_MESSAGE_TYPE)


def decode(value: Any, *, max_message_bytes: int) -> ToolEnvelope:
    """Decode one untrusted carrier value; raises ``ToolProtocolError`` when invalid."""
    row = _row(value, max_message_bytes + _CARRIER_OVERHEAD_BYTES)
    payload_json = row.get("payload_json")
    if not isinstance(payload_json, str):
        raise ToolProtocolError("FORGE_PROTOCOL_INVALID_MESSAGE", "payload_json must be a string")
    if len(payload_json) > max_message_bytes or len(payload_json.encode()) > max_message_bytes:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_MESSAGE_TOO_LARGE", f"payload exceeds {max_message_bytes} bytes"
        )
    try:
        payload = strict_loads(payload_json)
    except (ValueError, RecursionError) as exc:
        raise ToolProtocolError("FORGE_PROTOCOL_INVALID_JSON", str(exc)) from exc
    return checked_envelope(row, payload, payload_json)


def strict_loads(text: str | bytes) -> Any:
    """Parse JSON the Wire way: no duplicate keys, no NaN/Infinity, safe integers only.

    Raises ``ValueError`` (``json.JSONDecodeError`` included) on any violation.
    """
    return json.loads(
        text,
        object_pairs_hook=_no_duplicates,
        parse_constant=_no_constant,
        parse_int=_safe_int,
        parse_float=_finite_float,
    )


def _row(value: Any, max_carrier_bytes: int) -> dict[str, Any]:
    if isinstance(value, pa.RecordBatch):
        value = value.to_struct_array()
    if not isinstance(value, pa.StructArray) or len(value) != 1:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_INVALID_MESSAGE", "value is not a one-row forge_msgs.ToolMessage"
        )
    if value.nbytes > max_carrier_bytes:  # bound memory before materialising anything
        raise ToolProtocolError(
            "FORGE_PROTOCOL_MESSAGE_TOO_LARGE", f"carrier exceeds {max_carrier_bytes} bytes"
        )
    # to_pylist is about twice as fast as value[0].as_py() on Dora-owned arrays; the
    # column set is checked here and every value's type by ToolEnvelope below.
    row = value.to_pylist()[0]
    if row.keys() != _COLUMNS:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_INVALID_MESSAGE", "columns differ from forge_msgs.ToolMessage"
        )
    return row


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, item in pairs:
        if key in result:
            raise ValueError(f"duplicate JSON object key {key!r}")
        result[key] = item
    return result


def _no_constant(name: str) -> None:
    raise ValueError(f"non-finite number {name} is not JSON")


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):  # "1e999" parses to infinity without passing parse_constant
        raise ValueError(f"number {text} is not finite")
    return number


def _safe_int(text: str) -> int:
    number = int(text)
    if abs(number) > MAX_SAFE_JSON_INTEGER:
        raise ValueError("integer exceeds the interoperable range ±(2^53-1)")
    return number
