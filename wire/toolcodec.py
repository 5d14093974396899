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
from collections.abc import Mapping, Sequence
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
#: Rows one carrier value may hold between doraforge's own Gateway and providers. The
#: Forge carrier is one row per Dora message; a doraforge provider says in its status
#: details (:data:`BATCH_ROWS_DETAIL`) that it also takes several, and the Gateway then
#: sends a burst of concurrent Queries as one message (one ``send_output``, one Dora
#: transit, one wake on each side instead of one per Query). A provider answers several
#: rows in one message only to rows that came that way, so a peer that never batches is
#: never sent a batch.
MAX_BATCH_ROWS = 32
BATCH_ROWS_DETAIL = "doraforge.batch_rows"


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
    return pa.array([_encoded_row(envelope, max_message_bytes)], type=TOOL_MESSAGE_TYPE)


def encode_many[M: ToolEnvelope | Outbound](
    envelopes: Sequence[M], *, max_message_bytes: int
) -> tuple[pa.StructArray, list[tuple[M, ToolProtocolError]]]:
    """Encode ``envelopes`` as one ``ToolMessage`` StructArray of that many rows (at most
    :data:`MAX_BATCH_ROWS`), and the envelopes left out because they cannot be carried."""
    if len(envelopes) > MAX_BATCH_ROWS:
        raise ValueError(f"at most {MAX_BATCH_ROWS} rows per carrier value")
    rows: list[dict[str, Any]] = []
    refused: list[tuple[M, ToolProtocolError]] = []
    for envelope in envelopes:
        try:
            rows.append(_encoded_row(envelope, max_message_bytes))
        except ToolProtocolError as exc:
            refused.append((envelope, exc))
    return pa.array(rows, type=TOOL_MESSAGE_TYPE), refused


def _encoded_row(envelope: WireMessage, max_message_bytes: int) -> dict[str, Any]:
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
    return row


def decode(value: Any, *, max_message_bytes: int) -> ToolEnvelope:
    """Decode one untrusted carrier value; raises ``ToolProtocolError`` when invalid."""
    return _envelope(_row(value, max_message_bytes + _CARRIER_OVERHEAD_BYTES), max_message_bytes)


def decode_rows(
    value: Any, *, max_message_bytes: int, max_rows: int = MAX_BATCH_ROWS
) -> list[ToolEnvelope | ToolProtocolError]:
    """Decode an untrusted carrier value of one to ``max_rows`` rows, each row on its own:
    a malformed row is its ``ToolProtocolError`` in the list, the others still decode.

    Raises ``ToolProtocolError`` when the value as a whole is not a ToolMessage array of
    at most ``max_rows`` rows within ``max_message_bytes`` (plus carrier overhead) a row.
    """
    if isinstance(value, pa.RecordBatch):
        value = value.to_struct_array()
    if not isinstance(value, pa.StructArray) or not 1 <= len(value) <= max_rows:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_INVALID_MESSAGE",
            f"value is not a forge_msgs.ToolMessage array of 1 to {max_rows} rows",
        )
    if len(value) == 1:
        try:
            return [decode(value, max_message_bytes=max_message_bytes)]
        except ToolProtocolError as exc:
            return [exc]
    limit = len(value) * (max_message_bytes + _CARRIER_OVERHEAD_BYTES)
    if value.nbytes > limit:  # bound memory before materialising anything
        raise ToolProtocolError(
            "FORGE_PROTOCOL_MESSAGE_TOO_LARGE", f"carrier exceeds {limit} bytes"
        )
    rows = plain_rows(value)
    decoded: list[ToolEnvelope | ToolProtocolError] = []
    for index in range(len(value)):
        try:
            row = rows[index] if rows is not None else _general_row(value.slice(index, 1))
            decoded.append(_envelope(row, max_message_bytes))
        except ToolProtocolError as exc:
            decoded.append(exc)
    return decoded


def _envelope(row: dict[str, Any] | None, max_message_bytes: int) -> ToolEnvelope:
    if row is None:
        raise ToolProtocolError("FORGE_PROTOCOL_INVALID_MESSAGE", "the ToolMessage row is null")
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
    array is not laid out as Dora delivers one (exact schema, no offsets).

    Dora copies every output into a fresh layout without offsets, so a received row takes
    this path; it reads about twice as fast as ``to_pylist`` and gives the same dict
    (``tests/wire/test_toolcodec.py`` holds it to ``to_pylist``). Every read is
    bounds-checked against its buffer; a column that is not UTF-8 is refused.
    """
    rows = plain_rows(value) if len(value) == 1 else None
    if rows is None:
        return None
    if rows[0] is None:
        raise ToolProtocolError("FORGE_PROTOCOL_INVALID_MESSAGE", "the ToolMessage row is null")
    return rows[0]


def plain_rows(value: pa.StructArray) -> list[dict[str, Any] | None] | None:
    """Every row of a ToolMessage array read from its Arrow buffers (``None`` for a null
    row), or ``None`` when the array is not laid out as Dora delivers one."""
    if value.offset != 0 or value.type != TOOL_MESSAGE_TYPE:
        return None
    buffers = value.buffers()
    count = len(value)
    if len(buffers) != _BUFFER_COUNT or not _sized(buffers, count):
        return None  # an offset or a padded layout: let Arrow read it
    # Each buffer is copied out once; rows are then cut from Python bytes.
    columns = [
        (name, is_int, _bits(buffers[at]), buffers[at + 1], None if is_int else buffers[at + 2])
        for name, is_int, at in _LAYOUT
    ]
    texts = {name: _bytes(data) for name, is_int, _, _, data in columns if not is_int}
    struct_bits = _bits(buffers[0])
    rows: list[dict[str, Any] | None] = []
    for index in range(count):
        if not _set(struct_bits, index):
            rows.append(None)
            continue
        row: dict[str, Any] = {}
        for name, is_int, bits, first, _ in columns:
            if not _set(bits, index):
                row[name] = None
            elif is_int:
                row[name] = _READ_INT64(first, 8 * index)[0]
            else:
                row[name] = _text(first, texts[name], name, index)
        rows.append(row)
    return rows


def _bits(bitmap: pa.Buffer | None) -> bytes | None:
    """A validity bitmap's bytes; ``None`` (every row valid) when there is none."""
    return None if bitmap is None else bitmap.to_pybytes()


def _bytes(data: pa.Buffer | None) -> bytes:
    return b"" if data is None else data.to_pybytes()


def _set(bits: bytes | None, index: int) -> bool:
    """Whether row ``index`` is valid in ``bits``."""
    return bits is None or bool(bits[index >> 3] >> (index & 7) & 1)


def _sized(buffers: list[pa.Buffer | None], count: int) -> bool:
    """Whether every column's values/offsets buffer is exactly as long as ``count`` rows
    need: 8 bytes a row for int64 values, 4 bytes a row plus one for string offsets."""
    for _, is_int, at in _LAYOUT:
        first = buffers[at + 1]
        if first is None or first.size != (8 * count if is_int else 4 * (count + 1)):
            return False
        if not _bitmap_fits(buffers[at], count):
            return False
    return _bitmap_fits(buffers[0], count)


def _bitmap_fits(bitmap: pa.Buffer | None, count: int) -> bool:
    return bitmap is None or bitmap.size * 8 >= count


def _text(offsets: pa.Buffer, data: bytes, name: str, index: int) -> str:
    start, end = _READ_OFFSETS(offsets, 4 * index)
    if start == end:
        return ""
    if not 0 <= start <= end <= len(data):
        raise ToolProtocolError(
            "FORGE_PROTOCOL_INVALID_MESSAGE", f"column {name} points outside its data"
        )
    try:
        return data[start:end].decode()
    except UnicodeDecodeError as exc:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_INVALID_MESSAGE", f"column {name} is not UTF-8"
        ) from exc
