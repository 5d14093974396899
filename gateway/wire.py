"""Building provider-bound Wire envelopes and reading provider answers."""

from __future__ import annotations

from typing import Any

from forge_tool import (
    ToolContext,
    ToolEnvelope,
    ToolExecutionKey,
    ToolProtocolError,
    control_response_from_payload,
    error_from_payload,
    execution_status_from_payload,
    make_control_request_envelope,
    make_result_request_envelope,
    make_status_request_envelope,
    result_response_from_payload,
    tool_error_to_payload,
    tool_result_to_payload,
)
from forge_tool.endpoint import ToolControlResponse, ToolExecutionStatus, ToolResultResponse

from doraforge.gateway.catalog import ToolSpec
from doraforge.wire.toolcodec import Outbound

_RESULT_KEYS = frozenset({"status", "outputs", "error"})
_RESULT_STATUSES = frozenset({"succeeded", "failed", "cancelled", "stopped", "unknown"})
_ERROR_KEYS = frozenset({"code", "message", "retryable", "details"})


def execution_context(
    spec: ToolSpec,
    invocation_id: str,
    attempt_id: str,
    *,
    caller_id: str | None = None,
    deadline_ms: int | None = None,
) -> ToolContext:
    """The Wire context of one attempt of ``spec``."""
    return ToolContext(
        execution_key=ToolExecutionKey(invocation_id=invocation_id, attempt_id=attempt_id),
        tool_id=spec.tool_id,
        implementation_id=spec.config.implementation_id,
        endpoint_id=spec.endpoint_id,
        operation=spec.operation,
        caller_id=caller_id,
        deadline_ms=deadline_ms,
    )


def invoke_request(
    spec: ToolSpec,
    invocation_id: str,
    attempt_id: str,
    arguments: dict[str, Any],
    *,
    request_id: str,
    instance_id: str,
    caller_id: str | None,
    deadline_ms: int,
) -> Outbound:
    """A routed ``tool.invoke.request`` for the selected provider instance.

    Built from Gateway-owned fields without the generic factory's validation passes: the
    arguments were already checked as interoperable JSON and against the input schema.
    """
    context: dict[str, Any] = {
        "tool_id": spec.tool_id,
        "implementation_id": spec.config.implementation_id,
        "metadata": {},
        "deadline_ms": deadline_ms,
    }
    if caller_id is not None:
        context["caller_id"] = caller_id
    return Outbound(
        message_type="tool.invoke.request",
        endpoint_id=spec.endpoint_id,
        payload={"arguments": arguments, "context": context},
        request_id=request_id,
        invocation_id=invocation_id,
        attempt_id=attempt_id,
        endpoint_instance_id=instance_id,
        operation=spec.operation,
    )


def read_invoke_response(envelope: ToolEnvelope) -> tuple[str, dict[str, Any]]:
    """Decode a ``tool.invoke.response`` as ``(outcome, body)``.

    ``completed`` gives the terminal result document, ``accepted`` the acceptance
    details, ``rejected`` the error. Shapes are closed, as protocol section 9.2 requires;
    the JSON values themselves were validated when the envelope was decoded.
    """
    _expect(envelope, "tool.invoke.response")
    payload = envelope.payload
    outcome = payload.get("outcome")
    key = {"completed": "result", "accepted": "accepted", "rejected": "error"}.get(str(outcome))
    if key is None or set(payload) != {"outcome", key}:
        raise _invalid("payload", "outcome must be completed, accepted or rejected, alone")
    body = payload[key]
    if outcome == "completed":
        return "completed", checked_result(body, "payload.result")
    if outcome == "rejected":
        return "rejected", checked_error(body, "payload.error")
    if (
        not isinstance(body, dict)
        or set(body) != {"details"}
        or not isinstance(body["details"], dict)
    ):
        raise _invalid("payload.accepted", "must be exactly {details: object}")
    return "accepted", body


def checked_result(value: Any, path: str) -> dict[str, Any]:
    """Validate a ``ToolResult`` document (section 7.2) and return it."""
    if not isinstance(value, dict) or not {"status", "outputs"} <= set(value) <= _RESULT_KEYS:
        raise _invalid(path, "must have status, outputs and optionally error")
    if value["status"] not in _RESULT_STATUSES or not isinstance(value["outputs"], dict):
        raise _invalid(path, "invalid status or outputs")
    needs_error = value["status"] in ("failed", "unknown")
    if needs_error != ("error" in value):
        raise _invalid(path, f"error is required exactly for failed/unknown, not {value['status']}")
    if needs_error:
        checked_error(value["error"], f"{path}.error")
    return value


def checked_error(value: Any, path: str) -> dict[str, Any]:
    """Validate a ``ToolError`` document (section 7.1) and return it."""
    if not isinstance(value, dict) or set(value) != _ERROR_KEYS:
        raise _invalid(path, "must be exactly {code, message, retryable, details}")
    if not (
        isinstance(value["code"], str)
        and value["code"].strip()
        and isinstance(value["message"], str)
        and value["message"].strip()
        and isinstance(value["retryable"], bool)
        and isinstance(value["details"], dict)
    ):
        raise _invalid(path, "code/message must be non-empty strings, retryable a boolean")
    return value


def _invalid(path: str, message: str) -> ToolProtocolError:
    return ToolProtocolError("FORGE_PROTOCOL_INVALID_PAYLOAD", message, path=path)


def status_request(context: ToolContext, *, request_id: str, instance_id: str) -> ToolEnvelope:
    """A routed ``tool.status.request``."""
    return make_status_request_envelope(
        context, request_id=request_id, endpoint_instance_id=instance_id
    )


def result_request(context: ToolContext, *, request_id: str, instance_id: str) -> ToolEnvelope:
    """A routed ``tool.result.request``."""
    return make_result_request_envelope(
        context, request_id=request_id, endpoint_instance_id=instance_id
    )


def control_request(
    context: ToolContext, command: str, *, request_id: str, instance_id: str
) -> ToolEnvelope:
    """A routed ``tool.control.request`` (``cancel`` or ``stop``)."""
    return make_control_request_envelope(
        command,  # type: ignore[arg-type]
        context,
        request_id=request_id,
        endpoint_instance_id=instance_id,
    )


def provider_error(envelope: ToolEnvelope) -> dict[str, Any] | None:
    """The error payload when ``envelope`` is a correlated ``tool.error``."""
    if envelope.message_type != "tool.error":
        return None
    try:
        return tool_error_to_payload(error_from_payload(envelope.payload))
    except ToolProtocolError:
        return {
            "code": "FORGE_TOOL_PROVIDER_ERROR",
            "message": "malformed tool.error",
            "retryable": False,
            "details": {},
        }


def read_status(envelope: ToolEnvelope) -> ToolExecutionStatus:
    """Decode a ``tool.status.response``; raises ``ToolProtocolError`` when malformed."""
    _expect(envelope, "tool.status.response")
    return execution_status_from_payload(envelope.payload.get("status"))


def read_result(envelope: ToolEnvelope) -> ToolResultResponse:
    """Decode a ``tool.result.response``."""
    _expect(envelope, "tool.result.response")
    return result_response_from_payload(envelope.payload)


def read_control(envelope: ToolEnvelope) -> ToolControlResponse:
    """Decode a ``tool.control.response``."""
    _expect(envelope, "tool.control.response")
    return control_response_from_payload(envelope.payload)


def result_payload(response: ToolResultResponse) -> dict[str, Any] | None:
    """The terminal result document of an ``available`` lookup, else ``None``."""
    if response.status != "available" or response.result is None:
        return None
    return tool_result_to_payload(response.result)


def _expect(envelope: ToolEnvelope, message_type: str) -> None:
    if envelope.message_type != message_type:
        raise ToolProtocolError(
            "FORGE_PROTOCOL_UNEXPECTED_RESPONSE",
            f"expected {message_type}, got {envelope.message_type}",
            path="message_type",
        )
