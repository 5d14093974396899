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

import struct
from collections.abc import Mapping
from typing import Any, NamedTuple

import pyarrow as pa
from forge_msgs.tool import TOOL_MESSAGE_SCHEMA
from forge_tool import TOOL_ENDPOINT_PROTOCOL, ToolEnvelope, ToolProtocolError

from doraforge.wire import strict_json
from doraforge.wire.canonical import canonical_json
from doraforge.wire.envelope_check import checked_envelope

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
        payload_json = canonical_json(envelope.payload)
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
    except strict_json.JSONRefused as exc:
        raise ToolProtocolError("FORGE_PROTOCOL_INVALID_JSON", exc.message) from exc
    return checked_envelope(row, payload, payload_json)


def strict_loads(text: str | bytes) -> Any:
    """Parse a payload the Wire way: no duplicate keys, no NaN/Infinity, safe integers only.

    The rules are :mod:`doraforge.wire.strict_json`'s; nesting and lone surrogates are left
    to :func:`~doraforge.wire.envelope_check.interoperable`, which reports them with the
    codes forge-tool gives. Raises :class:`~doraforge.wire.strict_json.JSONRefused` (a
    ``ValueError``) on any violation.
    """
    return strict_json.loads(text, structure=False)


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
    row = plain_row(value)
    return _general_row(value) if row is None else row


def _general_row(value: pa.StructArray) -> dict[str, Any]:
    """Any one-row struct with the ToolMessage columns (other layouts, other value types);
    the column set is checked here and every value's type by the envelope check."""
    row: dict[str, Any] | None = value.to_pylist()[0]
    if row is None:
        raise ToolProtocolError("FORGE_PROTOCOL_INVALID_MESSAGE", "the ToolMessage row is null")
    if row.keys() != _COLUMNS:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_INVALID_MESSAGE", "columns differ from forge_msgs.ToolMessage"
        )
    return row


# A one-row column starting at offset 0 has exactly two int32 offsets, or one int64 value.
_ONE_ROW_BYTES = 8
_READ_INT64 = struct.Struct("<q").unpack_from  # Arrow buffers are little-endian
_READ_OFFSETS = struct.Struct("<ii").unpack_from


def _layout() -> tuple[tuple[str, bool, int], ...]:
    """``(column, is_int64, index of its validity buffer)`` in ``StructArray.buffers()``
    order: the struct's validity first, then (validity, offsets, data) per string column
    and (validity, values) for the int64 ``sequence``."""
    columns = []
    at = 1
    for field in TOOL_MESSAGE_SCHEMA:
        is_int = field.type == pa.int64()
        columns.append((field.name, is_int, at))
        at += 2 if is_int else 3
    return tuple(columns)


_LAYOUT = _layout()
_BUFFER_COUNT = _LAYOUT[-1][2] + (2 if _LAYOUT[-1][1] else 3)


def plain_row(value: pa.StructArray) -> dict[str, Any] | None:
    """Read a one-row ToolMessage straight from its Arrow buffers, or ``None`` when the
    array is not laid out as Dora delivers one (exact schema, one row, no offsets).

    Dora copies every output into a fresh layout without offsets, so a received row takes
    this path; it reads about twice as fast as ``to_pylist`` and gives the same dict
    (``tests/wire/test_toolcodec.py`` holds it to ``to_pylist``). Every read is
    bounds-checked against its buffer; a column that is not UTF-8 is refused.
    """
    if value.offset != 0 or value.type != TOOL_MESSAGE_TYPE:
        return None
    buffers = value.buffers()
    if len(buffers) != _BUFFER_COUNT:
        return None
    if not _valid(buffers[0]):
        raise ToolProtocolError("FORGE_PROTOCOL_INVALID_MESSAGE", "the ToolMessage row is null")
    row: dict[str, Any] = {}
    for name, is_int, at in _LAYOUT:
        first = buffers[at + 1]  # the int64 values, or a string column's offsets
        if first is None or first.size != _ONE_ROW_BYTES:
            return None  # an offset or a padded layout: let Arrow read it
        if not _valid(buffers[at]):
            row[name] = None
        elif is_int:
            row[name] = _READ_INT64(first)[0]
        else:
            row[name] = _text(first, buffers[at + 2], name)
    return row


def _valid(bitmap: pa.Buffer | None) -> bool:
    """Whether row 0 is valid: no bitmap means every row is."""
    return bitmap is None or (bitmap.size > 0 and bitmap.to_pybytes()[0] & 1 == 1)


def _text(offsets: pa.Buffer, data: pa.Buffer | None, name: str) -> str:
    start, end = _READ_OFFSETS(offsets)
    if start == end == 0:
        return ""
    if data is None or not 0 <= start <= end <= data.size:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_INVALID_MESSAGE", f"column {name} points outside its data"
        )
    # A one-row column's data buffer is normally exactly its value; copy no more than that.
    raw: bytes = (data if start == 0 and end == data.size else data[start:end]).to_pybytes()
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_INVALID_MESSAGE", f"column {name} is not UTF-8"
        ) from exc
