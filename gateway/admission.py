"""Checks and outcome documents shared by the Query path and the Tool Runtime."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doraforge.gateway.catalog import Catalog, ToolSpec
from doraforge.gateway.config import GatewayConfig
from doraforge.gateway.errors import Conflict, InvalidRequest, NotFound, Unavailable, Unprocessable
from doraforge.gateway.registry import EndpointRecord, EndpointRegistry


@dataclass(frozen=True)
class InvokeBody:
    """A validated invoke request body."""

    arguments: dict[str, Any]
    caller_id: str | None = None
    timeout_ms: int | None = None


def unknown_result(code: str, message: str, **details: Any) -> dict[str, Any]:
    """A terminal ``unknown`` result: the physical outcome cannot be recovered."""
    return {
        "status": "unknown",
        "outputs": {},
        "error": {"code": code, "message": message, "retryable": False, "details": details},
    }


def failed_result(code: str, message: str, **details: Any) -> dict[str, Any]:
    """A terminal ``failed`` result produced by the Gateway itself."""
    return {
        "status": "failed",
        "outputs": {},
        "error": {"code": code, "message": message, "retryable": False, "details": details},
    }


def query_spec(catalog: Catalog, endpoint_id: str, operation: str) -> ToolSpec:
    """The Query ToolSpec bound to ``endpoint_id/operation``; 404 or 409 otherwise."""
    spec = catalog.by_route(endpoint_id, operation)
    if spec is not None:
        if spec.semantics != "query":
            raise Conflict(
                "FORGE_TOOL_SEMANTICS_MISMATCH",
                f"{endpoint_id}/{operation} is {spec.semantics}; POST /tools/{spec.tool_id}:invoke",
            )
        return spec
    if not any(s.endpoint_id == endpoint_id for s in catalog.all()):
        raise NotFound("FORGE_TOOL_ENDPOINT_UNKNOWN", f"no endpoint {endpoint_id!r}")
    raise NotFound("FORGE_TOOL_OPERATION_NOT_FOUND", f"no operation {endpoint_id}/{operation}")


def bound_record(registry: EndpointRegistry, spec: ToolSpec) -> EndpointRecord:
    """The current endpoint instance ``spec`` binds to; 503 when absent or unbound."""
    record = registry.current(spec.endpoint_id)
    reason = spec.binding_error(record.descriptor if record else None)
    if record is None or reason is not None:
        raise Unavailable(
            "FORGE_TOOL_ENDPOINT_UNAVAILABLE",
            reason or "endpoint unavailable",
            details={"endpoint_id": spec.endpoint_id},
        )
    return record


def max_concurrency(spec: ToolSpec, record: EndpointRecord) -> int:
    """The operation's ``max_concurrency`` as its live descriptor declares it."""
    operation = spec.descriptor_operation(record.descriptor)
    return operation.max_concurrency if operation is not None else 1


def busy(spec: ToolSpec, limit: int) -> Unavailable:
    """The retryable 503 for an operation at its concurrency limit."""
    return Unavailable(
        "FORGE_TOOL_GATEWAY_BUSY",
        f"{spec.tool_id} is at max_concurrency {limit}",
        details={"max_concurrency": limit},
    )


def validate_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> None:
    """400 when ``arguments`` violate the input schema, naming the failing path, what
    belongs there (``details.expected``) and the whole schema (``details.input_schema``)."""
    violation = spec.input_schema.first_violation(arguments)
    if violation is not None:
        expected = violation.expected_text()
        raise InvalidRequest(
            "FORGE_TOOL_INVALID_ARGUMENTS",
            f"arguments {violation.path}: {violation.message}"
            + (f"; expected {expected}" if expected else ""),
            details={
                "path": violation.path,
                "tool_id": spec.tool_id,
                "expected": violation.expected,
                "input_schema": spec.config.input_schema,
            },
        )


def checked_outputs(spec: ToolSpec, result: dict[str, Any]) -> dict[str, Any]:
    """A succeeded result whose outputs break the output schema becomes ``failed``."""
    if result["status"] != "succeeded":
        return result
    violation = spec.output_schema.first_violation(result["outputs"])
    if violation is None:
        return result
    return failed_result(
        "FORGE_TOOL_OUTPUT_SCHEMA_VIOLATION",
        f"provider outputs {violation.path}: {violation.message}",
        path=violation.path,
    )


def effective_timeout(config: GatewayConfig, requested_ms: int | None) -> int:
    """The deadline actually used: the default when unset, clamped to the cap."""
    wanted = config.default_timeout_ms if requested_ms is None else requested_ms
    return min(wanted, config.invoke_timeout_cap_ms)


ADMISSION_REJECTED = {
    "action": "FORGE_TOOL_ACTION_ADMISSION_REJECTED",
    "session": "FORGE_TOOL_SESSION_ADMISSION_REJECTED",
}
"""The caller code for a provider's refusal to admit an Action or Session.

PhyAgentOS (``forge/task.py``) reads ``FORGE_TOOL_ACTION_ADMISSION_REJECTED`` as a
pre-dispatch rejection: the record is definitively failed, not unknown. The provider's
own code stays in ``details.provider_code`` (and whole in ``details.provider_error``).
A Query rejection keeps the provider's code as its caller code.
"""


def rejection(
    error: dict[str, Any], semantics: str = "query", **details: Any
) -> Unavailable | Unprocessable:
    """The caller error for a provider's pre-acceptance rejection of a ``semantics`` call."""
    extra = {"provider_error": error, "provider_code": error["code"], **details}
    code = ADMISSION_REJECTED.get(semantics, error["code"])
    if error["code"] == "FORGE_ENDPOINT_CAPACITY":
        return Unavailable(code, error["message"], details=extra)
    return Unprocessable(code, error["message"], retryable=error["retryable"], details=extra)
