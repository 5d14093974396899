"""The provider's lean path for Query invokes.

A Query leaves no state in ``ToolEndpointHandler`` (no execution record, no permit, no
events), so the runner calls the Query SPI itself: one strict decode of the carrier row,
the route check of the embedded handler, the provider's ``query()``, one encode of the
correlated ``tool.invoke.response``. The generic binding validates the same message in
several full passes, which measured as most of a Query's control-plane latency; every
rule of protocol section 9.1/9.2 is still enforced here, once.
Actions and Sessions keep going through ``DoraToolEndpointBinding`` (response-first gate).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from forge_tool import (
    MAX_SAFE_JSON_INTEGER,
    QueryToolEndpoint,
    ToolContext,
    ToolEndpointError,
    ToolEndpointHandler,
    ToolEnvelope,
    ToolError,
    ToolExecutionKey,
    ToolProtocolError,
    ToolRequest,
    ToolResult,
    tool_error_to_payload,
    tool_result_to_payload,
)

from doraforge.wire import toolcodec
from doraforge.wire.envelope_check import is_blank

logger = logging.getLogger(__name__)

_CONTEXT_REQUIRED = frozenset({"tool_id", "implementation_id", "metadata"})
_CONTEXT_ALLOWED = _CONTEXT_REQUIRED | {"caller_id", "deadline_ms"}
_MAX_SAFE = MAX_SAFE_JSON_INTEGER


class QueryPath:
    """Answers ``tool.invoke.request`` for the handler's Query operations."""

    def __init__(
        self,
        handler: ToolEndpointHandler,
        operations: Mapping[str, Any],
        *,
        max_message_bytes: int,
    ) -> None:
        self._handler = handler
        self._queries: dict[str, QueryToolEndpoint] = {
            op.name: operations[op.name]
            for op in handler.descriptor.operations
            if op.semantics == "query"
        }
        self._max_bytes = max_message_bytes

    def serves(self, message_type: str, operation: str | None) -> bool:
        """Whether a request with this type and operation takes the lean path."""
        return message_type == "tool.invoke.request" and operation in self._queries

    async def answer(self, request: ToolEnvelope) -> pa.StructArray:
        """Run the Query and return the correlated response row.

        A request for another endpoint or instance is not trusted and is not answered:
        ``ToolProtocolError`` propagates so the caller drops it. Everything after the
        route check is answered, with a correlated ``tool.error`` when it is malformed.
        """
        self._handler.validate_request_route(request)
        try:
            arguments, context = self._parse(request)
        except (ToolProtocolError, ValueError, TypeError) as exc:
            code = getattr(exc, "code", "FORGE_PROTOCOL_INVALID_PAYLOAD")
            return self._reply(request, "tool.error", {"error": _error(code, str(exc))})
        endpoint = self._queries[str(request.operation)]
        try:
            result = await endpoint.query(arguments, context)
        except ToolEndpointError as rejection:
            payload = {"outcome": "rejected", "error": tool_error_to_payload(rejection.error)}
            return self._reply(request, "tool.invoke.response", payload)
        except Exception:
            logger.exception("query %s failed", request.operation)
            return self._internal_error(request)
        if not isinstance(result, ToolResult):
            logger.error("query %s returned %r, not a ToolResult", request.operation, result)
            return self._internal_error(request)
        payload = {"outcome": "completed", "result": tool_result_to_payload(result)}
        return self._reply(request, "tool.invoke.response", payload)

    def _parse(self, request: ToolEnvelope) -> tuple[ToolRequest, ToolContext]:
        payload = request.payload
        if set(payload) != {"arguments", "context"}:
            raise ToolProtocolError(
                "FORGE_PROTOCOL_INVALID_PAYLOAD", "payload must be {arguments, context}"
            )
        raw = payload["context"]
        if not isinstance(raw, dict) or not _CONTEXT_REQUIRED <= set(raw) <= _CONTEXT_ALLOWED:
            raise ToolProtocolError(
                "FORGE_PROTOCOL_INVALID_PAYLOAD", "payload.context has missing or unknown fields"
            )
        context = _context(request, raw)
        if not isinstance(payload["arguments"], dict):
            raise ToolProtocolError("FORGE_PROTOCOL_INVALID_PAYLOAD", "arguments must be an object")
        return _prevalidated(ToolRequest, arguments=payload["arguments"]), context

    def _reply(
        self, request: ToolEnvelope, message_type: str, payload: dict[str, Any]
    ) -> pa.StructArray:
        response = toolcodec.Outbound(
            message_type=message_type,
            endpoint_id=str(request.endpoint_id),
            payload=payload,
            request_id=request.request_id,
            invocation_id=request.invocation_id,
            attempt_id=request.attempt_id,
            endpoint_instance_id=request.endpoint_instance_id,
            operation=request.operation,
        )
        try:
            return toolcodec.encode(response, max_message_bytes=self._max_bytes)
        except ToolProtocolError as exc:
            # Keep the exchange correlated even when the result cannot be carried.
            fallback = response._replace(
                message_type="tool.error", payload={"error": _error(exc.code, exc.message)}
            )
            return toolcodec.encode(fallback, max_message_bytes=self._max_bytes)

    def _internal_error(self, request: ToolEnvelope) -> pa.StructArray:
        error = _error("FORGE_ENDPOINT_INTERNAL", "endpoint failed to produce a valid response")
        return self._reply(request, "tool.error", {"error": error})


def _context(request: ToolEnvelope, raw: dict[str, Any]) -> ToolContext:
    """The SPI context of ``request``; built through forge-tool's own checks (and their
    messages) unless every field plainly passes them."""
    key = _prevalidated(
        ToolExecutionKey,
        invocation_id=str(request.invocation_id),
        attempt_id=str(request.attempt_id),
    )
    fields = {
        "execution_key": key,
        "tool_id": raw["tool_id"],
        "implementation_id": raw["implementation_id"],
        "endpoint_id": str(request.endpoint_id),
        "operation": str(request.operation),
        "caller_id": raw.get("caller_id"),
        "deadline_ms": raw.get("deadline_ms"),
        "metadata": raw["metadata"],
    }
    if _plain_context(raw):
        return _prevalidated(ToolContext, **fields)
    return ToolContext(**fields)


def _plain_context(raw: dict[str, Any]) -> bool:
    """Whether the caller-supplied context fields pass ``ToolContext``'s checks: the
    header ids were checked by the envelope check, and the JSON rules by the decode."""
    caller_id = raw.get("caller_id")
    deadline_ms = raw.get("deadline_ms")
    return (
        _identifier(raw["tool_id"])
        and _identifier(raw["implementation_id"])
        and (caller_id is None or _identifier(caller_id))
        and (deadline_ms is None or (type(deadline_ms) is int and 0 <= deadline_ms <= _MAX_SAFE))
        and isinstance(raw["metadata"], dict)
    )


def _identifier(value: Any) -> bool:
    return isinstance(value, str) and not is_blank(value)


def _prevalidated[T](cls: type[T], **fields: Any) -> T:
    """A frozen forge-tool SPI value built without its ``__post_init__`` walk.

    Only for fields already held to that walk's rules: the decode checked every JSON value
    of the payload (strict JSON, interoperable integers, no lone surrogates, nesting) and
    the envelope check every header id, so walking a 200-character argument again, one
    character at a time, would only repeat them (it measured as a fifth of a Query's
    provider-side time). The value is equal to the one the constructor would build.
    """
    value = object.__new__(cls)
    for name, item in fields.items():
        object.__setattr__(value, name, item)
    return value


def _error(code: str, message: str) -> dict[str, Any]:
    return tool_error_to_payload(ToolError(code=code, message=message[:500] or code))
