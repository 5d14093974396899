"""Arrow carrier helpers for the provider side of ``forge.tool.endpoint/v1alpha1``.

Everything that arrives on the request input is untrusted: these helpers bound its size
and shape before any JSON is parsed, and raise :class:`MalformedInput` for anything that
is not one well-formed ``forge_msgs.ToolMessage`` row.
"""

from __future__ import annotations

import pyarrow as pa
from forge_msgs import ToolMessage
from forge_tool import ToolEnvelope, ToolProtocolError, validate_message_envelope
from forge_tool.dora import tool_envelope_to_message, tool_message_to_envelope

EXECUTION_REQUEST_TYPES = frozenset(
    ("tool.invoke.request", "tool.status.request", "tool.result.request", "tool.control.request")
)
REGISTRY_RESPONSE_TYPE = "endpoint.registry.response"


class MalformedInput(ValueError):
    """An input value is not one bounded, well-formed ToolMessage row."""


def _single_row(value: object, max_carrier_bytes: int) -> pa.RecordBatch | pa.StructArray:
    if not isinstance(value, pa.RecordBatch | pa.StructArray):
        raise MalformedInput(f"expected a StructArray or RecordBatch, got {type(value).__name__}")
    if len(value) != 1:
        raise MalformedInput(f"expected exactly one row, got {len(value)}")
    if value.nbytes > max_carrier_bytes:
        raise MalformedInput(f"carrier of {value.nbytes} bytes exceeds {max_carrier_bytes}")
    return value


def peek_message_type(value: object, *, max_carrier_bytes: int) -> str:
    """Return the ``message_type`` of one carrier row without decoding its payload.

    Raises :class:`MalformedInput` when the value is not a bounded single-row carrier
    with a non-null string ``message_type`` column.
    """
    row = _single_row(value, max_carrier_bytes)
    schema_type = row.schema if isinstance(row, pa.RecordBatch) else row.type
    index = schema_type.get_field_index("message_type")
    if index < 0 or not pa.types.is_string(schema_type.field(index).type):
        raise MalformedInput("carrier has no string message_type column")
    column = row.column(index) if isinstance(row, pa.RecordBatch) else row.field(index)
    message_type = column[0].as_py()
    if not isinstance(message_type, str):
        raise MalformedInput("carrier message_type is null")
    return message_type


def decode_envelope(value: object, *, max_message_bytes: int) -> ToolEnvelope:
    """Decode and validate one carrier row into a logical envelope.

    Raises :class:`MalformedInput` for any carrier, schema, JSON or size violation.
    """
    row = _single_row(value, max_message_bytes * 2)
    try:
        message = ToolMessage.from_arrow(row, max_payload_json_bytes=max_message_bytes)
        envelope = tool_message_to_envelope(message, max_message_bytes=max_message_bytes)
        validate_message_envelope(envelope)
    except (ToolProtocolError, ValueError, TypeError) as exc:
        raise MalformedInput(f"invalid ToolMessage: {exc}") from exc
    return envelope


def encode_envelope(envelope: ToolEnvelope, *, max_message_bytes: int) -> pa.RecordBatch:
    """Encode one provider-originated envelope as a single-row carrier batch."""
    return tool_envelope_to_message(envelope, max_message_bytes=max_message_bytes).to_arrow()
