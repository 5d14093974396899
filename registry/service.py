"""``RegistryService``: the one governed path from a call envelope to a tool adapter.

HTTP, MCP and in-process callers all go through ``call``. Authority comes only from the
``Principal`` the edge derives; the body names a tool and arguments, nothing else. See
``registry.gates`` for the gate order, ``registry.idempotency`` for the retention windows
and ``registry.approvals`` for how a high-risk call waits for an operator.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from doraforge.registry import gates
from doraforge.registry.approvals import ApprovalRequest, ApprovalStore
from doraforge.registry.audit import AuditLog
from doraforge.registry.catalog import Catalog, RegisteredTool
from doraforge.registry.egress import EgressPolicy, EgressSettings
from doraforge.registry.envelope import ToolCall, parse_call
from doraforge.registry.errors import NotFound, RegistryError, ToolFailure
from doraforge.registry.idempotency import IdempotencyStore, fingerprint
from doraforge.registry.model import (
    Adapter,
    Admit,
    CallContext,
    ContextAdapter,
    Principal,
    ToolEntry,
)
from doraforge.registry.projections import check_format, etag, project
from doraforge.registry.repair import Repair

logger = logging.getLogger(__name__)

type ToolResult = dict[str, Any]
#: Where hosts given the pre-policy way (``egress_allowlist``, ``allow_egress``) live.
LEGACY_SOURCE = "registry:legacy-allowlist"


def _egress_sources(tool: RegisteredTool) -> tuple[str, ...]:
    """Whose declared hosts serve ``tool``'s calls: its own source, and the hosts the
    constructing code gave the pre-policy way (every registered tool's, as before)."""
    return (LEGACY_SOURCE,) if tool.source is None else (tool.source, LEGACY_SOURCE)


class RegistryService:
    """Catalog, projections and governed calls over registered tools.

    ``call`` returns a ``portos_tool_result`` for every gate outcome and raises
    :class:`InvalidRequest` only for a malformed envelope or key and :class:`Conflict` for
    idempotency conflicts or :class:`Expired`. ``clock`` measures the retention windows and
    ``deadline`` opens each execution's deadline (``asyncio.timeout``); tests inject a fake
    clock for both. With ``approvals`` a call that needs an approval and has no standing
    rule waits for an operator's decision there; without, it is denied
    ``TOOL_APPROVAL_REQUIRED`` at once.
    """

    def __init__(
        self,
        *,
        audit: AuditLog | None = None,
        clock: Callable[[], float] = time.monotonic,
        result_ttl_s: float = 3600,
        max_results: int = 10_000,
        require_auth_for_writes: bool = False,
        egress_allowlist: frozenset[str] = frozenset(),
        egress: EgressSettings | None = None,
        deadline: gates.Deadline = asyncio.timeout,
        approvals: ApprovalStore | None = None,
    ) -> None:
        self._catalog = Catalog()
        self._audit = audit if audit is not None else AuditLog()
        self._store = IdempotencyStore(
            clock=clock, result_ttl_s=result_ttl_s, max_results=max_results
        )
        self._require_auth_for_writes = require_auth_for_writes
        self._egress = EgressPolicy(egress, audit=self._audit)
        if egress_allowlist:  # the pre-policy spelling: hosts the constructing code vetted
            self._egress.declare(LEGACY_SOURCE, egress_allowlist)
        self._running: set[asyncio.Task[ToolResult]] = set()
        self._deadline = deadline
        self._clock = clock
        self._approvals = approvals
        # How many callers await each in-flight requestId (the first and its retries).
        self._callers: Counter[str] = Counter()

    @property
    def audit(self) -> AuditLog:
        """The audit log every outcome is recorded in."""
        return self._audit

    @property
    def egress(self) -> EgressPolicy:
        """The live egress policy the egress gate asks (sources declare their hosts here,
        the operator's routes change it)."""
        return self._egress

    @property
    def approvals(self) -> ApprovalStore | None:
        """Where calls wait for an operator's decision; ``None`` when nobody is asked."""
        return self._approvals

    def ask_operators(self, timeout_s: float) -> ApprovalStore | None:
        """Let calls that need an approval wait, at most ``timeout_s``, for an operator's
        decision (a serving process, where operators can answer, turns this on once at
        start). ``0`` keeps denying them at once; returns the store calls wait in."""
        if timeout_s > 0 and self._approvals is None:
            self._approvals = ApprovalStore(
                audit=self._audit, timeout_s=timeout_s, clock=self._clock, deadline=self._deadline
            )
        return self._approvals

    def register(
        self,
        entry: ToolEntry | Mapping[str, Any],
        adapter: Adapter | ContextAdapter,
        *,
        wants_context: bool = False,
        admit: Admit | None = None,
        source: str | None = None,
    ) -> ToolEntry:
        """Register a tool; :class:`Conflict` TOOL_REGISTRATION_CONFLICT on any name
        collision, :class:`InvalidRequest` TOOL_REGISTRATION_INVALID for a malformed entry or
        schema. ``wants_context``: ``adapter`` is a ``ContextAdapter`` and gets each call's
        :class:`CallContext` (the caller's principal and requestId), so it can call other
        tools as that caller; ``admit``: the tool's own admission check, run after the
        standard pre-execution gates and reported as its availability in the native catalog
        (see ``model.Admit``); ``source``: the egress source whose declared hosts serve this
        tool's calls (``egress.declare``), and no other tool's. Other adapters are untouched."""
        return self._catalog.register(
            entry, adapter, wants_context=wants_context, admit=admit, source=source
        )

    def unregister(self, name: str) -> ToolEntry:
        """Remove a tool; calls already running finish, retained results stay readable."""
        return self._catalog.unregister(name)

    def allow_egress(self, hosts: Iterable[str]) -> None:
        """Deprecated: declare hosts under a source id instead (``egress.declare``), so
        they go when the source goes. Adds ``hosts`` to one legacy source that is never
        retracted."""
        legacy = self._egress.declared().get(LEGACY_SOURCE, [])
        self._egress.declare(LEGACY_SOURCE, [*legacy, *hosts])

    def resolve(self, name: str) -> ToolEntry | None:
        """The entry a canonical, provider or alias name refers to."""
        tool = self._catalog.resolve(name)
        return None if tool is None else tool.entry

    def entries(
        self,
        *,
        scope: str | None = None,
        intent: str | None = None,
        principal: Principal | None = None,
    ) -> list[ToolEntry]:
        """Entries in ``scope`` narrowed by ``intent``; with a principal, only the tools
        whose required capabilities it holds."""
        selected = self._catalog.filter(scope=scope, intent=intent)
        if principal is None:
            return selected
        return [e for e in selected if set(e.policy.requiredCapabilities) <= principal.grants]

    def catalog(
        self,
        *,
        scope: str | None,
        intent: str | None,
        fmt: str,
        principal: Principal | None = None,
    ) -> tuple[dict[str, Any], str]:
        """``({"format", "tools"}, etag)``; :class:`InvalidRequest` TOOL_INVALID_QUERY for an
        unknown format or an over-long intent."""
        check_format(fmt)
        tools = [
            self.project(e, fmt)
            for e in self.entries(scope=scope, intent=intent, principal=principal)
        ]
        body = {"format": fmt, "tools": tools}
        return body, etag(body)

    def project(self, entry: ToolEntry, fmt: str) -> dict[str, Any]:
        """``entry`` in portos, openai, anthropic or mcp form; the portos form of a tool
        with an admission check also says whether it is available now (and why not)."""
        projected = project(entry, fmt)
        tool = self._catalog.resolve(entry.name)
        if fmt == "portos" and tool is not None and tool.entry is entry:
            status = gates.availability(tool)
            if status is not None:
                projected["availability"] = status
        return projected

    def get_call(self, request_id: str) -> ToolResult:
        """The retained result; :class:`NotFound` TOOL_CALL_NOT_FOUND when unknown,
        expired or still running."""
        result = self._store.get(request_id)
        if result is None:
            raise NotFound(
                "TOOL_CALL_NOT_FOUND",
                "no retained result for this requestId",
                details={"requestId": request_id},
            )
        return dict(result)

    async def call(
        self,
        body: Mapping[str, Any],
        principal: Principal,
        *,
        idempotency_key: str | None = None,
    ) -> ToolResult:
        """Run one call through every gate and return its ``portos_tool_result``."""
        started = time.perf_counter()
        try:
            call = parse_call(body, idempotency_key)
            tool = self._catalog.resolve(call.name)
            arguments, repairs, valid = self._normalised(tool, call.arguments, principal)
            canonical = tool.entry.name if tool else call.name
            begin = self._store.begin(
                call.requestId, fingerprint(canonical, arguments, principal.scope)
            )
        except RegistryError as exc:
            self._record_refusal(body, principal, exc, started)
            raise
        if begin.action == "run":
            # An eager task runs synchronously until its first suspension (a fast tool never
            # touches the event loop), and, shielded, it finishes and is retained even if
            # this caller goes away: a physical action is never abandoned half-way.
            task = asyncio.eager_task_factory(
                asyncio.get_running_loop(),
                self._run(call, tool, principal, arguments, repairs, valid, started),
            )
            if task.done():
                return dict(task.result())
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            return dict(await self._attend(call.requestId, task))
        if begin.action == "await":
            assert begin.future is not None
            result = await self._attend(call.requestId, begin.future)
        else:
            assert begin.result is not None
            result = begin.result
        duplicate = {**result, "duplicate": True}
        self._record(duplicate, principal, call.arguments, started)
        return duplicate

    def _normalised(
        self, tool: RegisteredTool | None, arguments: dict[str, Any], principal: Principal
    ) -> tuple[dict[str, Any], list[Repair], bool]:
        """``gates.normalise`` for a caller the grant gates admit; a caller they refuse
        gets its arguments back untouched (the gate denies the call), so no work on a
        tool's own schema is ever done for a caller who may not call it."""
        if tool is None:
            return arguments, [], False
        try:
            gates.capabilities(
                tool.entry, principal, require_auth_for_writes=self._require_auth_for_writes
            )
            gates.permissions(tool.entry, principal)
        except gates.Denied:
            return arguments, [], False
        return gates.normalise(tool, arguments)

    async def _attend(self, request_id: str, pending: asyncio.Future[ToolResult]) -> ToolResult:
        """Await an in-flight call as one of its callers (the first, or a retry with the
        same requestId). When the last caller goes away while the call still waits for an
        operator, its approval request is withdrawn; a call already executing runs on."""
        self._callers[request_id] += 1
        try:
            return await asyncio.shield(pending)
        finally:
            self._callers[request_id] -= 1
            if not self._callers[request_id]:
                del self._callers[request_id]
                if self._approvals is not None and not pending.done():
                    self._approvals.withdraw(request_id)

    async def _run(
        self,
        call: ToolCall,
        tool: RegisteredTool | None,
        principal: Principal,
        arguments: dict[str, Any],
        repairs: list[Repair],
        valid: bool,
        started: float,
    ) -> ToolResult:
        result: ToolResult | None = None
        try:
            result = await self._gated(call, tool, principal, arguments, repairs, valid)
        except Exception as exc:  # a registry bug must still settle the call and its waiters
            logger.exception("registry call %s failed internally", call.requestId)
            error = ToolFailure("TOOL_INTERNAL_ERROR", type(exc).__name__).to_payload()
            result = _result(call, tool, "failed", error=error)
        finally:
            if result is None:  # cancelled before settling: never run again
                error = ToolFailure("TOOL_CALL_INTERRUPTED", "call was interrupted").to_payload()
                result = _result(call, tool, "failed", error=error)
            self._store.finish(call.requestId, result)
            self._record(result, principal, call.arguments, started)
        return result

    async def _gated(
        self,
        call: ToolCall,
        tool: RegisteredTool | None,
        principal: Principal,
        arguments: dict[str, Any],
        repairs: list[Repair],
        valid: bool,
    ) -> ToolResult:
        try:
            tool = gates.lookup(self._catalog, call.name, call.version)
            entry = tool.entry
            ask = gates.approval(entry, principal, attended=self._approvals is not None)
            gates.capabilities(
                entry, principal, require_auth_for_writes=self._require_auth_for_writes
            )
            gates.permissions(entry, principal)
            gates.validate_input(tool, arguments, valid)
            gates.admit(tool, principal)
            gates.egress(entry, self._egress, principal, _egress_sources(tool))
            if ask and self._approvals is not None:
                await self._approvals.clear(_approval_request(call, entry, principal, arguments))
        except gates.Denied as denied:
            return _result(call, tool, "denied", error=denied.to_payload(), repairs=repairs)
        context = CallContext(principal=principal, request_id=call.requestId)
        outcome = await gates.execute(tool, arguments, deadline=self._deadline, context=context)
        if outcome.state != "completed":
            return _result(call, tool, outcome.state, error=outcome.error, repairs=repairs)
        error = gates.validate_output(tool.output_validator, outcome.result)
        if error is not None:
            return _result(call, tool, "failed", error=error, repairs=repairs)
        return _result(call, tool, "completed", value=outcome.result, repairs=repairs)

    def _record(
        self, result: ToolResult, principal: Principal, arguments: Mapping[str, Any], t0: float
    ) -> None:
        error = result.get("error")
        self._audit.record(
            request_id=result["requestId"],
            name=result["name"],
            principal_id=principal.id,
            scope=principal.scope,
            state=result["state"],
            error_code=error["code"] if error else None,
            duration_s=time.perf_counter() - t0,
            argument_keys=arguments.keys(),
            duplicate=result["duplicate"],
        )

    def _record_refusal(
        self, body: Any, principal: Principal, exc: RegistryError, t0: float
    ) -> None:
        fields = body if isinstance(body, Mapping) else {}
        request_id, name = fields.get("requestId"), fields.get("name")
        arguments = fields.get("arguments")
        self._audit.record(
            request_id=request_id[:200] if isinstance(request_id, str) else None,
            name=name[:200] if isinstance(name, str) else None,
            principal_id=principal.id,
            scope=principal.scope,
            state="rejected",
            error_code=exc.code,
            duration_s=time.perf_counter() - t0,
            argument_keys=[str(k)[:200] for k in arguments] if isinstance(arguments, dict) else (),
        )


def _approval_request(
    call: ToolCall, entry: ToolEntry, principal: Principal, arguments: dict[str, Any]
) -> ApprovalRequest:
    """What the operator decides on: the call as it would run, with its caller."""
    return ApprovalRequest(
        tool=entry.name,
        version=entry.version,
        arguments=copy.deepcopy(arguments),  # what the operator saw, whatever runs later
        caller=principal.id,
        request_id=call.requestId,
        risk=entry.policy.risk,
        listed_name=entry.listed_name,
    )


def _result(
    call: ToolCall,
    tool: RegisteredTool | None,
    state: str,
    *,
    value: Any = None,
    error: dict[str, Any] | None = None,
    repairs: list[Repair] | None = None,
) -> ToolResult:
    result: ToolResult = {
        "type": "portos_tool_result",
        "requestId": call.requestId,
        "name": tool.entry.name if tool else call.name,
        "version": tool.entry.version if tool else call.version,
        "state": state,
        "duplicate": False,
    }
    if state == "completed":
        result["result"] = value
    else:
        result["error"] = error
    if repairs:
        result["repairs"] = repairs
    return result
