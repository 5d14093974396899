"""``tools.min.json``: every registered tool as a minimized provider-neutral record, sized
for an agent to read whole: its input schema, side effect, risk and grants, its HTTP binding
(``POST /api/tools/call`` with the call's body template given once) and the failure codes
its policy can add to the ones every call may answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from doraforge.registry.gates import needs_approval
from doraforge.registry.model import ToolEntry

type Document = dict[str, Any]

CALL_PATH = "/api/tools/call"
MAX_DESCRIPTION = 240

#: Codes any ``POST /api/tools/call`` may answer, whatever the tool (envelope,
#: idempotency, lookup, grants, arguments, execution), as raised in ``registry.envelope``,
#: ``registry.idempotency``, ``registry.gates``, ``registry.service`` and ``registry.http``.
COMMON_FAILURE_CODES = (
    "INVALID_CALL",
    "TOOL_INVALID_CALL",
    "TOOL_IDEMPOTENCY_KEY_MISMATCH",
    "TOOL_IDEMPOTENCY_CONFLICT",
    "TOOL_IDEMPOTENCY_EXPIRED",
    "TOOL_NOT_FOUND",
    "TOOL_VERSION_MISMATCH",
    "TOOL_CAPABILITY_DENIED",
    "TOOL_INVALID_ARGUMENTS",
    "TOOL_TIMEOUT",
    "TOOL_ADAPTER_ERROR",
    "TOOL_OUTPUT_INVALID",
    "TOOL_INTERNAL_ERROR",
    "TOOL_CALL_INTERRUPTED",
    "REGISTRY_STOPPING",
)
#: Codes of the gates only some tools pass through (``registry.gates``,
#: ``registry.approvals``), each with the policy that puts a tool through that gate.
CONDITIONAL_FAILURE_CODES: tuple[tuple[Callable[[ToolEntry], bool], tuple[str, ...]], ...] = (
    (
        needs_approval,
        (
            "TOOL_APPROVAL_REQUIRED",
            "TOOL_APPROVAL_DENIED",
            "TOOL_APPROVAL_TIMEOUT",
            "TOOL_APPROVAL_WITHDRAWN",
            "TOOL_APPROVAL_MISMATCH",
            "TOOL_APPROVAL_QUEUE_FULL",
        ),
    ),
    (lambda entry: entry.policy.sideEffect == "write", ("TOOL_AUTH_REQUIRED",)),
    (lambda entry: bool(entry.policy.permissions), ("TOOL_PERMISSION_DENIED",)),
    (
        lambda entry: (
            bool(entry.policy.egressHosts)
            or any(p.type == "network" for p in entry.policy.permissions)
        ),
        ("TOOL_EGRESS_DENIED",),
    ),
    # A saved recipe (``registry.recipes.run``) fails closed on its own codes too.
    (
        lambda entry: entry.origin is not None,
        (
            "RECIPE_SCHEMA_DRIFT",
            "RECIPE_TOOL_UNAVAILABLE",
            "RECIPE_BINDING_UNRESOLVED",
            "RECIPE_BUDGET_EXCEEDED",
            "RECIPE_STEP_FAILED",
        ),
    ),
)


def _bounded(text: str, limit: int = MAX_DESCRIPTION) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def failure_codes(entry: ToolEntry) -> list[str]:
    """The codes a call of ``entry`` may answer beyond :data:`COMMON_FAILURE_CODES`."""
    return [
        code for applies, codes in CONDITIONAL_FAILURE_CODES if applies(entry) for code in codes
    ]


def tool_record(entry: ToolEntry) -> Document:
    """``entry`` minimized: what a caller needs to call it over HTTP, nothing else."""
    policy = entry.policy
    return {
        "name": entry.name,
        "providerName": entry.providerName,
        "description": _bounded(entry.description),
        "inputSchema": entry.input_schema,
        "sideEffect": policy.sideEffect,
        "risk": policy.risk,
        "requiredCapabilities": policy.requiredCapabilities,
        "http": {"method": "POST", "path": CALL_PATH},
        "failureCodes": failure_codes(entry),
    }


def tools_min(entries: Sequence[ToolEntry]) -> Document:
    """The ``tools.min.json`` document of ``entries``: the call's body template once
    (``<name>`` is a record's ``name``, ``<arguments>`` an object its ``inputSchema``
    accepts, ``<requestId>`` unique per call and also its ``Idempotency-Key``), then one
    record per tool with its binding."""
    return {
        "call": {
            "method": "POST",
            "path": CALL_PATH,
            "headers": {"Idempotency-Key": "<requestId>"},
            "body": {
                "type": "portos_tool_call",
                "requestId": "<requestId>",
                "name": "<name>",
                "arguments": "<arguments>",
            },
        },
        "commonFailureCodes": list(COMMON_FAILURE_CODES),
        "tools": [tool_record(entry) for entry in entries],
    }
