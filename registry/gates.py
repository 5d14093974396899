"""The call gates, in order, fail-closed.

lookup + version pin -> risk approval -> capabilities (scope, grants, authentication for
writes) -> permissions -> input validation with repair -> the tool's own admission check
(a recipe's availability and its children's grants) -> egress policy (per principal,
``registry.egress``) -> execution with a deadline -> output validation. Each
pre-execution gate either passes or raises ``Denied``; the first failing gate decides.
Where an operator can be asked, a call the risk gate holds for approval waits for the
decision after the egress gate (``registry.approvals``), so an operator only ever decides
a call that would otherwise run.
Execution and output validation produce the ``timeout`` and ``failed`` outcomes.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from doraforge.registry.catalog import Catalog, RegisteredTool
from doraforge.registry.egress import EgressPolicy
from doraforge.registry.errors import Forbidden, ToolFailure
from doraforge.registry.model import CallContext, Principal, ToolEntry
from doraforge.registry.repair import Repair, repair
from doraforge.wire.json_schema import LocalValidator
from doraforge.wire.schema_words import expected_text, json_path, located
from doraforge.wire.suggest import offered

logger = logging.getLogger(__name__)

MAX_REPORTED_ERRORS = 10
MAX_MESSAGE_CHARS = 300
MAX_RESULT_DEPTH = 64

#: Opens the scope a call runs in, given its deadline in seconds: ``asyncio.timeout`` in
#: production; tests pass a fake clock's, so a deadline expires when they advance it.
type Deadline = Callable[[float], AbstractAsyncContextManager[object]]


class Denied(Forbidden):
    """A gate refused the call; it becomes a ``denied`` result, nothing was executed.

    Whichever gate refused (an unknown tool, a version pin, grants, arguments), the caller
    may not run this call as sent: an edge answers a denial as it answers :class:`Forbidden`."""


@dataclass(frozen=True)
class Outcome:
    """What execution produced: ``state`` plus a result or an error payload."""

    state: str  # "completed" | "failed" | "timeout"
    result: Any = None
    error: dict[str, Any] | None = None


def lookup(catalog: Catalog, name: str, version: int | None) -> RegisteredTool:
    """Resolve by canonical, provider or alias name and enforce the version pin."""
    tool = catalog.resolve(name)
    if tool is None:
        suggestions = catalog.suggestions(name)
        raise Denied(
            "TOOL_NOT_FOUND",
            f"no tool named {name!r}{offered(suggestions)}",
            details={"suggestions": suggestions},
        )
    if version is not None and version != tool.entry.version:
        raise Denied(
            "TOOL_VERSION_MISMATCH",
            f"{tool.entry.listed_name} is at version {tool.entry.version}, not {version}",
            details={"requested": version, "current": tool.entry.version},
        )
    return tool


def needs_approval(entry: ToolEntry) -> bool:
    """High/critical risk, or a tool requiring confirmation, needs an explicit approval."""
    return entry.policy.risk in ("high", "critical") or entry.policy.confirmation == "required"


def approval(entry: ToolEntry, principal: Principal, *, attended: bool = False) -> bool:
    """Whether an operator must still decide this call.

    ``False`` when the tool needs no approval or a standing rule (``principal.approvals``,
    ``--approve TOOL``) covers it; no standing rule covers a tool with ``confirmation:
    "required"`` (a meta tool such as ``api_tools_save``): each of its calls is a fresh
    operator decision. Otherwise, where an operator can be asked (``attended``),
    ``True``: the caller asks after the remaining pre-execution gates passed, so nobody is
    asked about a call that would be refused anyway (``registry.approvals``). Unattended,
    raises :class:`Denied` ``TOOL_APPROVAL_REQUIRED`` at once.
    """
    # A standing rule may name the tool by any name it answers to (listed, canonical, alias).
    named = not entry.names().isdisjoint(principal.approvals)
    standing = named and entry.policy.confirmation != "required"
    if not needs_approval(entry) or standing:
        return False
    if attended:
        return True
    raise Denied(
        "TOOL_APPROVAL_REQUIRED",
        f"{entry.listed_name} ({entry.policy.risk} risk) needs explicit approval",
        details={"risk": entry.policy.risk, "confirmation": entry.policy.confirmation},
    )


def capabilities(entry: ToolEntry, principal: Principal, *, require_auth_for_writes: bool) -> None:
    """The caller's scope must be a tool scope, its grants must cover the requirements, and
    writes need an authenticated caller when the service demands it."""
    if principal.scope not in entry.policy.scopes:
        raise Denied(
            "TOOL_CAPABILITY_DENIED",
            f"{entry.listed_name} is not available in scope {principal.scope!r}",
            details={"scope": principal.scope, "scopes": entry.policy.scopes},
        )
    required = entry.policy.requiredCapabilities
    missing = (
        [] if principal.grants.issuperset(required) else sorted(set(required) - principal.grants)
    )
    if missing:
        raise Denied(
            "TOOL_CAPABILITY_DENIED",
            f"{entry.listed_name} needs grant(s): {', '.join(missing)}",
            details={"missing": missing},
        )
    if (
        require_auth_for_writes
        and entry.policy.sideEffect == "write"
        and not (principal.authenticated)
    ):
        raise Denied("TOOL_AUTH_REQUIRED", f"{entry.listed_name} writes; authenticate first")


def permissions(entry: ToolEntry, principal: Principal) -> None:
    """Every declared permission needs a held ``(type, scope)`` or ``(type, "*")``."""
    if not entry.policy.permissions:
        return
    held = principal.permissions
    missing = [
        p.model_dump()
        for p in entry.policy.permissions
        if (p.type, p.scope) not in held and (p.type, "*") not in held
    ]
    if missing:
        raise Denied(
            "TOOL_PERMISSION_DENIED",
            f"{entry.listed_name} needs permission(s) not held",
            details={"missing": missing},
        )


def _parameters(schema: dict[str, Any]) -> dict[str, Any]:
    described: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        info = {k: prop[k] for k in ("type", "enum", "minimum", "maximum") if k in prop}
        described[name] = info
    return described


def normalise(
    tool: RegisteredTool, arguments: dict[str, Any]
) -> tuple[dict[str, Any], list[Repair], bool]:
    """Arguments after schema-driven repair, the repairs made, and whether they are valid.

    Computed before the gates (only for a caller the grant gates admit: the service checks
    them first) so the idempotency fingerprint covers the normalised call.
    """
    if tool.arguments_valid(arguments):
        return arguments, [], True
    validator = tool.input_validator
    try:
        repaired, repairs = repair(validator, arguments)
    except Exception:  # repair is best effort; a bug in it must not turn into a crash
        logger.exception("argument repair for %s failed", tool.entry.name)
        return arguments, [], False
    changed = bool(repairs)
    if tool.entry.policy.ignoreUnknownArguments:
        known = tool.entry.input_schema.get("properties", {})
        kept = {name: value for name, value in repaired.items() if name in known}
        changed = changed or len(kept) < len(repaired)
        repaired = kept
    return repaired, repairs, changed and tool.arguments_valid(repaired)


def validate_input(tool: RegisteredTool, arguments: dict[str, Any], valid: bool) -> None:
    """Deny arguments that are still invalid after repair. The denial names the first
    failing path and what belongs there, and lists the valid parameters, the required ones
    and enum values so the caller can correct itself."""
    if valid:
        return
    errors = list(tool.input_validator.iter_errors(arguments))
    if not errors:
        return
    schema = tool.entry.input_schema
    where, expected = located(errors[0], arguments)
    words = expected_text(expected)
    raise Denied(
        "TOOL_INVALID_ARGUMENTS",
        f"arguments do not match {tool.entry.listed_name}'s input schema: {json_path(where)}: "
        f"{errors[0].message[:MAX_MESSAGE_CHARS]}" + (f"; expected {words}" if words else ""),
        details={
            "errors": [
                {
                    "path": ".".join(str(p) for p in e.absolute_path) or "(arguments)",
                    "message": e.message[:MAX_MESSAGE_CHARS],
                }
                for e in errors[:MAX_REPORTED_ERRORS]
            ],
            "parameters": _parameters(schema),
            "required": list(schema.get("required", [])),
        },
    )


def admit(tool: RegisteredTool, principal: Principal) -> None:
    """The tool's own admission check, when it has one (``RegisteredTool.admit``): it
    raises :class:`Denied` when the tool cannot run for this caller now."""
    if tool.admit is not None:
        tool.admit(principal)


def availability(tool: RegisteredTool) -> dict[str, Any] | None:
    """``{"available", "code", "reason"}`` of a tool with an admission check, judged on
    the registry's state alone (no caller); ``None`` for a tool without one."""
    if tool.admit is None:
        return None
    try:
        tool.admit(None)
    except Denied as denied:
        reason = denied.message[:MAX_MESSAGE_CHARS]
        return {"available": False, "code": denied.code, "reason": reason}
    return {"available": True, "code": None, "reason": None}


def egress(
    entry: ToolEntry, policy: EgressPolicy, principal: Principal, sources: tuple[str, ...] = ()
) -> None:
    """Every declared host must pass the egress policy for the caller's principal (off by
    default; an enabled, empty allowlist denies every host), or be declared by one of
    ``sources`` (the tool's own source: its declarations serve its tools alone). The denial
    names the first refused host, the principal and the operator route that allows it."""
    refused = policy.refused(entry.policy.egressHosts, principal, sources=sources)
    if refused:
        denial = policy.denial(refused[0], principal, what=entry.listed_name)
        details = {**denial["details"], "hosts": refused}
        raise Denied(denial["code"], denial["message"], details=details)


async def execute(
    tool: RegisteredTool,
    arguments: dict[str, Any],
    *,
    deadline: Deadline = asyncio.timeout,
    context: CallContext | None = None,
) -> Outcome:
    """Run the adapter under ``deadline(policy.timeoutMs / 1000)`` (``asyncio.timeout``);
    an adapter that opted in gets ``context`` (who calls, under which requestId).

    At the deadline the adapter is cancelled and the call returns; an adapter must let
    ``CancelledError`` propagate. A write that timed out may or may not have taken effect,
    so its timeout is not retryable and its remote state is unknown.
    """
    policy = tool.entry.policy
    try:
        result = await _within(deadline, policy.timeoutMs / 1000, tool.invoke(arguments, context))
        return Outcome("completed", result=result)
    except TimeoutError:
        write = policy.sideEffect == "write"
        error = ToolFailure(
            "TOOL_TIMEOUT",
            f"{tool.entry.listed_name} did not finish within {policy.timeoutMs} ms",
            retryable=not write,
            details={"timeoutMs": policy.timeoutMs, "remoteState": "unknown" if write else "none"},
        )
        return Outcome("timeout", error=error.to_payload())
    except ToolFailure as failure:
        return Outcome("failed", error=failure.to_payload())
    except Exception as exc:  # an adapter bug must become a result, never leak
        logger.warning("adapter for %s raised", tool.entry.name, exc_info=exc)
        message = f"{tool.entry.listed_name} adapter raised {type(exc).__name__}"
        return Outcome("failed", error=ToolFailure("TOOL_ADAPTER_ERROR", message).to_payload())


async def _within(deadline: Deadline, seconds: float, work: Awaitable[Any]) -> Any:
    """``await work`` under ``deadline(seconds)``.

    ``work`` starts as an eager task, so it runs at once up to its first wait. An adapter
    that answers without waiting (a catalog read, a cached value) has then finished before
    any timer could have fired, and its deadline is never armed: arming and cancelling the
    timer cost more than such an adapter. Otherwise the deadline opens at that first wait
    (what ran before it could not have been interrupted either), and when it expires the
    wait is cancelled, and with it the adapter.
    """
    if not asyncio.iscoroutine(work):  # a plain awaitable cannot start as a task
        async with deadline(seconds):
            return await work
    task = asyncio.eager_task_factory(asyncio.get_running_loop(), work)
    if task.done():
        return task.result()
    try:
        async with deadline(seconds):
            return await task
    finally:
        task.cancel()  # a no-op once it is done; ends the adapter if this caller is cancelled


def is_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON data: finite numbers, string keys, bounded nesting."""
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth >= MAX_RESULT_DEPTH:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_json(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(is_json(v, depth + 1) for v in value)
    return False


# Output schemas that constrain nothing beyond "a JSON object" (the common open result);
# for them a type check is the whole validation, so the compiled validator is skipped.
_OPEN_OBJECT_SCHEMAS = (
    {"type": "object"},
    {"type": "object", "additionalProperties": True},
)


def validate_output(validator: LocalValidator, result: Any) -> dict[str, Any] | None:
    """``None`` when the result is JSON data matching the output schema, else an error."""
    if not is_json(result):
        return ToolFailure("TOOL_OUTPUT_INVALID", "tool result is not JSON data").to_payload()
    if validator.schema in _OPEN_OBJECT_SCHEMAS:
        if isinstance(result, dict):
            return None
    elif validator.is_valid(result):
        return None
    error = next(iter(validator.iter_errors(result)))
    return ToolFailure(
        "TOOL_OUTPUT_INVALID",
        "tool result does not match its output schema",
        details={"path": ".".join(str(p) for p in error.absolute_path) or "(result)"},
    ).to_payload()
