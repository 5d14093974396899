"""Validation of decoded ToolMessage rows, equivalent to ``ToolEnvelope.__post_init__``.

forge-tool validates an envelope by walking every string of the payload character by
character in Python. On a Query round trip that walk ran on every decode and, with the
caches cold between processes, was the largest single cost of the control plane. This
module applies the same rules (protocol section 3.2 and the header matrix of 4.2) with
C-speed checks and falls back to forge-tool's own walk only when a cheap pre-filter says
a payload could break a rule. ``tests/wire/test_envelope_check.py`` holds it to
forge-tool's verdict on a corpus of valid and invalid envelopes.
"""

from __future__ import annotations

from typing import Any

from forge_tool import (
    MAX_JSON_DEPTH,
    MAX_SAFE_JSON_INTEGER,
    TOOL_ENDPOINT_PROTOCOL,
    TOOL_MESSAGE_TYPES,
    ToolEnvelope,
    ToolProtocolError,
)
from forge_tool.wire.envelope import _is_blank, _json_value

from doraforge.wire.strict_json import escapes_a_surrogate

_MANAGEMENT = frozenset(
    {"endpoint.register", "endpoint.unregister", "endpoint.registry.response", "endpoint.status"}
)
_MANAGEMENT_WITH_REQUEST_ID = _MANAGEMENT - {"endpoint.status"}
_FIELDS = (
    "protocol",
    "message_type",
    "payload",
    "request_id",
    "invocation_id",
    "attempt_id",
    "endpoint_id",
    "endpoint_instance_id",
    "operation",
    "sequence",
)


def checked_envelope(row: dict[str, Any], payload: Any, payload_json: str) -> ToolEnvelope:
    """Validate a decoded row and its parsed payload; return the envelope it denotes.

    Raises ``ToolProtocolError`` with the code and path forge-tool would report.
    """
    _check_header(row)
    if not isinstance(payload, dict):
        raise ToolProtocolError(
            "FORGE_PROTOCOL_INVALID_PAYLOAD", "must be a JSON object", path="payload"
        )
    payload = interoperable(payload, payload_json, "payload")
    envelope = object.__new__(ToolEnvelope)
    values = dict(row, payload=payload)
    for name in _FIELDS:
        object.__setattr__(envelope, name, values.get(name))
    return envelope


def interoperable(value: Any, text: str, path: str) -> Any:
    """Hold ``value``, parsed from ``text`` by ``toolcodec.strict_loads``, to the Wire's
    JSON rules (no lone surrogates, nesting at most 64); raises ``ToolProtocolError``."""
    if _may_break_json_rules(text):
        return _json_value(value, path)  # forge-tool's exact walk
    return value


def _may_break_json_rules(text: str) -> bool:
    # Integers, NaN and infinities were refused by the parser; what is left are lone
    # surrogates (only reachable through an escape) and nesting deeper than 64.
    if escapes_a_surrogate(text):
        return True
    return text.count("{") + text.count("[") > MAX_JSON_DEPTH


def _check_header(row: dict[str, Any]) -> None:
    if row.get("protocol") != TOOL_ENDPOINT_PROTOCOL:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_UNSUPPORTED_VERSION",
            f"expected {TOOL_ENDPOINT_PROTOCOL!r}, found {row.get('protocol')!r}",
            path="protocol",
        )
    kind = row.get("message_type")
    if not isinstance(kind, str) or kind not in TOOL_MESSAGE_TYPES:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_UNKNOWN_MESSAGE_TYPE",
            f"unsupported message type: {kind!r}",
            path="message_type",
        )
    _identifier(row, "endpoint_id", required=True)
    if kind in _MANAGEMENT:
        _management_header(row, kind)
    else:
        _tool_header(row, kind)
    _sequence(row, kind)


def _management_header(row: dict[str, Any], kind: str) -> None:
    _identifier(row, "endpoint_instance_id", required=True)
    if kind in _MANAGEMENT_WITH_REQUEST_ID:
        _identifier(row, "request_id", required=True)
    else:
        _absent(row, "request_id", "must be omitted for unsolicited endpoint.status")
    for name in ("invocation_id", "attempt_id", "operation", "sequence"):
        _absent(row, name, "must be omitted for endpoint management messages")


def _tool_header(row: dict[str, Any], kind: str) -> None:
    for name in ("invocation_id", "attempt_id", "operation"):
        _identifier(row, name, required=True)
    _identifier(row, "endpoint_instance_id", required=False)
    if kind == "tool.event":
        _absent(row, "request_id", "must be omitted for tool.event")
    else:
        _identifier(row, "request_id", required=True)


def _sequence(row: dict[str, Any], kind: str) -> None:
    sequence = row.get("sequence")
    if kind == "tool.event":
        if (
            isinstance(sequence, bool)
            or not isinstance(sequence, int)
            or not 0 <= sequence <= MAX_SAFE_JSON_INTEGER
        ):
            raise ToolProtocolError(
                "FORGE_PROTOCOL_INVALID_MESSAGE",
                f"must be an integer in [0, {MAX_SAFE_JSON_INTEGER}]",
                path="sequence",
            )
    elif sequence is not None:
        _absent(row, "sequence", "must be omitted for non-event messages")


def _identifier(row: dict[str, Any], name: str, *, required: bool) -> None:
    value = row.get(name)
    if value is None and not required:
        return
    if not isinstance(value, str) or is_blank(value):
        raise ToolProtocolError(
            "FORGE_PROTOCOL_INVALID_MESSAGE", "must be a non-empty string", path=name
        )
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolProtocolError(
                "FORGE_PROTOCOL_INVALID_MESSAGE",
                "must contain only valid Unicode scalar values",
                path=name,
            ) from exc


def is_blank(value: str) -> bool:
    """forge-tool's "blank" (empty, or only the white space it names), decided at C speed
    for every id that does not start with white space: ``str.isspace`` admits every
    character forge-tool counts (and U+001C-U+001F besides), so a first character it
    rejects settles it; otherwise forge-tool's own walk decides."""
    return not value or (value[0].isspace() and _is_blank(value))


def _absent(row: dict[str, Any], name: str, message: str) -> None:
    if row.get(name) is not None:
        raise ToolProtocolError("FORGE_PROTOCOL_INVALID_MESSAGE", message, path=name)
