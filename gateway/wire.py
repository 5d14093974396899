"""Building provider-bound Wire envelopes and reading provider answers."""

from __future__ import annotations

from typing import Any

from forge_tool import (
    ToolContext,
    ToolEnvelope,
    ToolExecutionKey,
    ToolProtocolError,
    ToolRequest,
    control_response_from_payload,
    error_from_payload,
    execution_status_from_payload,
    make_control_request_envelope,
    make_invoke_request_envelope,
    make_result_request_envelope,
    make_status_request_envelope,
    result_response_from_payload,
    tool_error_to_payload,
    tool_result_to_payload,
)
from forge_tool.endpoint import ToolControlResponse, ToolExecutionStatus, ToolResultResponse

from gateway.catalog import ToolSpec


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
    context: ToolContext, arguments: dict[str, Any], *, request_id: str, instance_id: str
) -> ToolEnvelope:
    """A routed ``tool.invoke.request`` for the selected provider instance."""
    return make_invoke_request_envelope(
        ToolRequest(arguments=arguments),
        context,
        request_id=request_id,
        endpoint_instance_id=instance_id,
    )


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
