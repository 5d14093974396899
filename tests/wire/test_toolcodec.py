"""The ToolMessage codec: the buffer reader gives what Arrow gives, or hands the row back."""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
import pytest
from forge_tool import TOOL_ENDPOINT_PROTOCOL, ToolEnvelope, ToolProtocolError
from hypothesis import given, settings
from hypothesis import strategies as st

from doraforge.wire import toolcodec
from doraforge.wire.envelope_check import is_blank

MAX = 1 << 20
COLUMNS = toolcodec.TOOL_MESSAGE_TYPE
HEADER = {
    "protocol": TOOL_ENDPOINT_PROTOCOL,
    "message_type": "tool.invoke.request",
    "request_id": "req-1",
    "invocation_id": "inv-1",
    "attempt_id": "att-1",
    "endpoint_id": "mock",
    "endpoint_instance_id": "epinst-1",
    "operation": "echo",
    "sequence": None,
    "payload_json": '{"arguments":{"message":"hi"},"context":{}}',
}
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
REQUIRED = ("protocol", "message_type", "endpoint_id", "payload_json")


def column(name: str) -> st.SearchStrategy[Any]:
    """Values a column may hold: int64 for ``sequence``, text, and null where nullable."""
    if name == "sequence":
        return st.integers(-(2**63), 2**63 - 1) | st.none()
    return text if name in REQUIRED else text | st.none()


rows = st.fixed_dictionaries({name: column(name) for name in HEADER})


def one_row(row: dict[str, Any]) -> pa.StructArray:
    return pa.array([row], type=COLUMNS)


@settings(max_examples=300, deadline=None)
@given(rows)
def test_the_buffer_reader_reads_every_row_as_arrow_does(row: dict[str, Any]) -> None:
    array = one_row(row)
    assert toolcodec.plain_row(array) == array.to_pylist()[0] == row


def test_a_row_delivered_with_offsets_is_read_by_arrow_instead() -> None:
    array = pa.array([HEADER, HEADER], type=COLUMNS).slice(1, 1)
    assert toolcodec.plain_row(array) is None
    envelope = toolcodec.decode(array, max_message_bytes=MAX)
    assert envelope.request_id == "req-1"


def test_a_row_of_other_column_types_is_read_by_arrow_and_checked_there() -> None:
    fields = [pa.field(f.name, pa.large_string()) if f.type == pa.string() else f for f in COLUMNS]
    array = pa.array([HEADER], type=pa.struct(fields))
    assert toolcodec.plain_row(array) is None
    assert toolcodec.decode(array, max_message_bytes=MAX).operation == "echo"


def test_a_record_batch_decodes_like_its_struct_array() -> None:
    batch = pa.RecordBatch.from_struct_array(one_row(HEADER))
    assert toolcodec.decode(batch, max_message_bytes=MAX) == toolcodec.decode(
        one_row(HEADER), max_message_bytes=MAX
    )


def test_a_null_row_is_refused_as_an_invalid_message() -> None:
    for array in (pa.array([None], type=COLUMNS), pa.array([None, HEADER], type=COLUMNS)[:1]):
        with pytest.raises(ToolProtocolError) as caught:
            toolcodec.decode(array, max_message_bytes=MAX)
        assert caught.value.code == "FORGE_PROTOCOL_INVALID_MESSAGE"


def _with_column(name: str, offsets: tuple[int, int], data: bytes) -> pa.StructArray:
    """The header row with one string column replaced by raw (possibly hostile) buffers."""
    children = []
    for field in COLUMNS:
        if field.name == name:
            buffers = [None, pa.py_buffer(struct.pack("<ii", *offsets)), pa.py_buffer(data)]
            children.append(pa.Array.from_buffers(field.type, 1, buffers))
        else:
            children.append(pa.array([HEADER[field.name]], type=field.type))
    return pa.StructArray.from_arrays(children, fields=list(COLUMNS))


def test_a_column_that_is_not_utf8_is_refused_as_an_invalid_message() -> None:
    with pytest.raises(ToolProtocolError) as caught:
        toolcodec.plain_row(_with_column("request_id", (0, 2), b"\xff\xfe"))
    assert caught.value.code == "FORGE_PROTOCOL_INVALID_MESSAGE"


def test_offsets_outside_their_data_are_refused_not_read() -> None:
    # Arrow refuses to build such a column (so do Dora's copies); a foreign array imported
    # without validation could still carry one, and the reader checks before it reads.
    offsets = pa.py_buffer(struct.pack("<ii", 0, 4))
    with pytest.raises(ToolProtocolError, match="outside its data"):
        toolcodec._text(offsets, pa.py_buffer(b"ok"), "request_id")
    with pytest.raises(ToolProtocolError, match="outside its data"):
        toolcodec._text(offsets, None, "request_id")


def test_a_round_trip_through_the_codec_keeps_the_envelope() -> None:
    envelope = ToolEnvelope(
        protocol=TOOL_ENDPOINT_PROTOCOL,
        message_type="tool.event",
        endpoint_id="mock",
        payload={"event_type": "progress", "data": {"p": 0.5, "s": "é\U0001f600"}},
        invocation_id="inv-2",
        attempt_id="att-2",
        operation="move",
        sequence=7,
        endpoint_instance_id="epinst-2",
    )
    row = toolcodec.encode(envelope, max_message_bytes=MAX)
    assert toolcodec.plain_row(row) is not None
    assert toolcodec.decode(row, max_message_bytes=MAX) == envelope


@pytest.mark.parametrize("value", ["", " ", "\u3000\t", "\x1c", "a", " a", "\x1ca", "\u2003b"])
def test_is_blank_agrees_with_forge_tool(value: str) -> None:
    from forge_tool.wire.envelope import _is_blank

    assert is_blank(value) == _is_blank(value)


def test_every_character_forge_tool_calls_white_space_is_white_space_to_python() -> None:
    from forge_tool.wire.envelope import _is_unicode_whitespace

    spaces = [chr(c) for c in range(0x110000) if _is_unicode_whitespace(chr(c))]
    assert spaces
    assert all(character.isspace() for character in spaces)
