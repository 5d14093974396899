"""The Tool Runtime: caller-visible invocations over provider attempts.

The Runtime owns ``invocation_id``/``attempt_id``, phases that never regress, deadlines,
concurrency slots, caller_id dedupe and the journal. It never retries and never
re-dispatches: when it cannot know what happened physically it says ``unknown``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from forge_tool import (
    ToolEnvelope,
    ToolProtocolError,
    event_from_payload,
)

from gateway import wire
from gateway.canonical import sha256_hex
from gateway.catalog import Catalog, ToolSpec
from gateway.clock import Clock
from gateway.config import GatewayConfig
from gateway.errors import (
    Conflict,
    Gone,
    InvalidRequest,
    NotFound,
    ProviderProtocolError,
    QueryTimeout,
    Unavailable,
    Unprocessable,
)
from gateway.exchange import Exchanges
from gateway.invocation import TERMINAL_PHASES, Invocation
from gateway.journal import Journal, JournalRecord
from gateway.registry import EndpointRecord, EndpointRegistry
from gateway.store import InvocationStore
from nodes.toolcodec import WireMessage

log = logging.getLogger(__name__)

type Send = Callable[[str, WireMessage], None]

_TERMINAL_EVENTS = frozenset({"executor_completed", "executor_failed", "cancelled", "stopped"})
_CONTROL_FOR = {"action": "cancel", "session": "stop"}


class InstanceLost(ConnectionError):
    """The provider instance serving an exchange stopped being current."""


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


class ToolRuntime:
    """Admission, reconciliation and control of Query, Action and Session invocations."""

    def __init__(
        self,
        *,
        config: GatewayConfig,
        catalog: Catalog,
        registry: EndpointRegistry,
        exchanges: Exchanges,
        send: Send,
        journal: Journal,
        clock: Clock,
    ) -> None:
        self._config = config
        self._catalog = catalog
        self._registry = registry
        self._exchanges = exchanges
        self._send = send
        self._journal = journal
        self._clock = clock
        self.store = InvocationStore(config.retention)
        self._slots: Counter[tuple[str, str]] = Counter()
        self._queries: Counter[tuple[str, str]] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._orphans: list[Invocation] = []
        self.dispatch_counts: Counter[str] = Counter()

    # ------------------------------------------------------------------ queries

    async def query(self, endpoint_id: str, operation: str, body: InvokeBody) -> dict[str, Any]:
        """Invoke a Query and return ``{endpoint_id, operation, response}``."""
        spec = self._query_spec(endpoint_id, operation)
        self._validate_arguments(spec, body.arguments)
        record = self._bound_record(spec)
        key = (endpoint_id, operation)
        limit = self._max_concurrency(spec, record)
        if self._queries[key] >= limit:
            raise Unavailable(
                "FORGE_TOOL_GATEWAY_BUSY",
                f"{endpoint_id}/{operation} is at max_concurrency {limit}",
                details={"max_concurrency": limit},
            )
        timeout_ms = self._effective_timeout(body.timeout_ms)
        self._queries[key] += 1
        try:
            answer = await self._query_exchange(spec, record, body, timeout_ms)
        finally:
            self._queries[key] -= 1
        return {"endpoint_id": endpoint_id, "operation": operation, "response": answer}

    async def _query_exchange(
        self, spec: ToolSpec, record: EndpointRecord, body: InvokeBody, timeout_ms: int
    ) -> dict[str, Any]:
        envelope = wire.invoke_request(
            spec,
            uuid.uuid4().hex,
            uuid.uuid4().hex,
            body.arguments,
            request_id=self._exchanges.new_request_id(),
            instance_id=record.instance_id,
            caller_id=body.caller_id,
            deadline_ms=self._clock.wall_ms() + timeout_ms,
        )
        try:
            response = await self._exchange(spec.endpoint_id, envelope, timeout_ms / 1000)
        except TimeoutError as exc:
            raise QueryTimeout(
                "FORGE_TOOL_INVOKE_TIMEOUT",
                f"Query did not answer within {timeout_ms} ms; its outcome is unknown",
                details={"timeout_ms": timeout_ms},
            ) from exc
        except InstanceLost as exc:
            raise Unavailable(
                "FORGE_TOOL_ENDPOINT_UNAVAILABLE", "the provider instance went away"
            ) from exc
        return self._query_answer(spec, response)

    def _query_answer(self, spec: ToolSpec, response: ToolEnvelope) -> dict[str, Any]:
        error = wire.provider_error(response)
        if error is not None:
            raise ProviderProtocolError(
                "FORGE_TOOL_PROVIDER_ERROR", error["message"], details={"provider_error": error}
            )
        try:
            outcome, body = wire.read_invoke_response(response)
        except ToolProtocolError as exc:
            raise ProviderProtocolError("FORGE_TOOL_PROVIDER_PROTOCOL", exc.message) from exc
        if outcome == "rejected":
            raise self._rejection(body)
        if outcome == "accepted":
            raise ProviderProtocolError(
                "FORGE_TOOL_QUERY_NON_TERMINAL_RESPONSE",
                "the provider answered a Query without a terminal result",
            )
        return {"outcome": "completed", "result": self._checked_outputs(spec, body)}

    # ------------------------------------------------------------------ actions, sessions

    async def start(self, tool_id: str, body: InvokeBody) -> tuple[Invocation, bool]:
        """Admit an Action or Session; returns the invocation and whether it is a replay."""
        spec = self._catalog.get(tool_id)
        if spec is None:
            raise NotFound("FORGE_TOOL_NOT_FOUND", f"no tool {tool_id!r}")
        if spec.semantics == "query":
            raise Conflict(
                "FORGE_TOOL_SEMANTICS_MISMATCH",
                f"{tool_id!r} is a Query; POST /tools/{spec.endpoint_id}/{spec.operation}:invoke",
            )
        self._validate_arguments(spec, body.arguments)
        fingerprint = sha256_hex({"tool_id": tool_id, "arguments": body.arguments})
        replay = self._replay(body.caller_id, fingerprint)
        if replay is not None:
            return replay, True
        record = self._bound_record(spec)
        self._reserve_slot(spec, record)
        invocation = self._admit(spec, record, body, fingerprint)
        await self._dispatch(spec, invocation, body.arguments)
        return invocation, False

    def _replay(self, caller_id: str | None, fingerprint: str) -> Invocation | None:
        if caller_id is None:
            return None
        previous = self.store.latest_for_caller(caller_id)
        if previous is None:
            return None
        age_s = (self._clock.wall_ms() - previous.created_at_ms) / 1000
        if age_s > self._config.retention.dedupe_window_s:
            return None
        if previous.fingerprint != fingerprint:
            raise Conflict(
                "FORGE_TOOL_CALLER_ID_CONFLICT",
                "caller_id was already used for a different tool or arguments",
                details={"caller_id": caller_id, "invocation_id": previous.invocation_id},
            )
        return previous

    def _reserve_slot(self, spec: ToolSpec, record: EndpointRecord) -> None:
        limit = self._max_concurrency(spec, record)
        if self._slots[(spec.endpoint_id, spec.operation)] >= limit:
            raise Unavailable(
                "FORGE_TOOL_GATEWAY_BUSY",
                f"{spec.tool_id} is at max_concurrency {limit}",
                details={"max_concurrency": limit},
            )

    def _admit(
        self, spec: ToolSpec, record: EndpointRecord, body: InvokeBody, fingerprint: str
    ) -> Invocation:
        timeout_ms = self._effective_timeout(body.timeout_ms)
        now_ms = self._clock.wall_ms()
        invocation = Invocation(
            invocation_id=f"inv_{uuid.uuid4().hex}",
            attempt_id=f"att_{uuid.uuid4().hex}",
            tool_id=spec.tool_id,
            endpoint_id=spec.endpoint_id,
            operation=spec.operation,
            semantics=spec.semantics,
            caller_id=body.caller_id,
            fingerprint=fingerprint,
            created_at_ms=now_ms,
            updated_at_ms=now_ms,
            deadline_ms=now_ms + timeout_ms,
            deadline_mono=self._clock.monotonic() + timeout_ms / 1000,
            max_events=self._config.retention.max_events_per_invocation,
            endpoint_instance_id=record.instance_id,
            last_contact_mono=self._clock.monotonic(),
        )
        self._journal.append(_admit_record(invocation))
        self.store.add(invocation)
        self._take_slot(invocation)
        if len(self.store) > self._config.retention.max_invocations:
            self.store.evict(now_ms)
        return invocation

    async def _dispatch(self, spec: ToolSpec, invocation: Invocation, arguments: dict) -> None:
        envelope = wire.invoke_request(
            spec,
            invocation.invocation_id,
            invocation.attempt_id,
            arguments,
            request_id=self._exchanges.new_request_id(),
            instance_id=str(invocation.endpoint_instance_id),
            caller_id=invocation.caller_id,
            deadline_ms=invocation.deadline_ms,
        )
        self.dispatch_counts[spec.tool_id] += 1
        remaining_s = max(0.0, invocation.deadline_mono - self._clock.monotonic())
        wait_s = min(self._config.admission_timeout_ms / 1000, remaining_s)
        try:
            response = await self._exchange(spec.endpoint_id, envelope, wait_s)
        except TimeoutError:
            self._finish_unknown(
                invocation,
                "FORGE_TOOL_DISPATCH_OUTCOME_UNKNOWN",
                "the provider did not answer the invoke; it may or may not be running",
            )
            return
        except InstanceLost:
            self._finish_unknown(
                invocation, "FORGE_TOOL_ENDPOINT_INSTANCE_LOST", "provider instance went away"
            )
            return
        except ConnectionError as exc:
            self._finish(invocation, failed_result("FORGE_TOOL_TRANSPORT_UNAVAILABLE", str(exc)))
            raise Unavailable("FORGE_TOOL_TRANSPORT_UNAVAILABLE", str(exc)) from exc
        self._on_invoke_response(spec, invocation, response)

    def _on_invoke_response(
        self, spec: ToolSpec, invocation: Invocation, response: ToolEnvelope
    ) -> None:
        error = wire.provider_error(response)
        if error is not None:
            if error["code"].startswith("FORGE_PROTOCOL_"):
                self._finish(invocation, {"status": "failed", "outputs": {}, "error": error})
                raise ProviderProtocolError(error["code"], error["message"], details=error)
            self._finish_unknown(invocation, error["code"], error["message"])
            return
        try:
            outcome, body = wire.read_invoke_response(response)
        except ToolProtocolError as exc:
            self._finish_unknown(invocation, "FORGE_TOOL_PROVIDER_PROTOCOL", exc.message)
            return
        if outcome == "rejected":
            self._finish(invocation, {"status": "failed", "outputs": {}, "error": body})
            raise self._rejection(body, invocation_id=invocation.invocation_id)
        if outcome == "completed":
            self._finish(invocation, self._checked_outputs(spec, body))
            return
        invocation.last_contact_mono = self._clock.monotonic()
        invocation.advance("accepted", self._clock.wall_ms())

    # ------------------------------------------------------------------ reads and control

    def get(self, invocation_id: str) -> Invocation:
        """Return a retained invocation; 404 when never seen, 410 when evicted."""
        invocation = self.store.get(invocation_id)
        if invocation is not None:
            return invocation
        if self.store.was_evicted(invocation_id):
            raise Gone("FORGE_TOOL_INVOCATION_EVICTED", "evicted from bounded retention")
        raise NotFound("FORGE_TOOL_INVOCATION_NOT_FOUND", f"no invocation {invocation_id!r}")

    def lookup_caller(self, caller_id: str) -> list[Invocation]:
        """Read-only recovery lookup by caller_id."""
        return self.store.all_for_caller(caller_id)

    async def control(self, invocation_id: str, command: str) -> tuple[Invocation, str]:
        """Forward ``cancel`` (Action) or ``stop`` (Session); acceptance is not a stop.

        Returns the invocation and the control status: ``accepted`` (admitted, not yet
        stopped), ``requested`` (sent, unanswered), ``terminal`` (already over),
        ``rejected`` or ``unsupported``.
        """
        invocation = self.get(invocation_id)
        if _CONTROL_FOR[invocation.semantics] != command:
            raise Conflict(
                "FORGE_TOOL_CONTROL_UNSUPPORTED",
                f"{invocation.semantics} invocations take {_CONTROL_FOR[invocation.semantics]!r}",
            )
        if invocation.terminal:
            return invocation, "terminal"
        spec = self._catalog.get(invocation.tool_id)
        assert spec is not None  # the catalog is immutable and admitted this tool
        invocation.cancel_status = "requested"
        envelope = wire.control_request(
            self._context(spec, invocation),
            command,
            request_id=self._exchanges.new_request_id(),
            instance_id=str(invocation.endpoint_instance_id),
        )
        try:
            response = await self._exchange(
                spec.endpoint_id, envelope, self._config.admission_timeout_ms / 1000
            )
            status = wire.read_control(response).status
        except (TimeoutError, InstanceLost, ToolProtocolError) as exc:
            log.warning("control %s of %s unanswered: %s", command, invocation_id, exc)
            return invocation, "requested"
        if not invocation.terminal or invocation.cancel_status == "requested":
            invocation.cancel_status = status
        if status == "accepted" and not invocation.terminal:
            invocation.append_event(
                "control", {"command": command, "status": status}, self._clock.wall_ms()
            )
            self._spawn(self._poll(invocation))
        return invocation, status

    # ------------------------------------------------------------------ provider messages

    def on_event(self, route: str, envelope: ToolEnvelope) -> None:
        """Apply a provider ``tool.event`` to its invocation."""
        invocation = self.store.get(str(envelope.invocation_id))
        if (
            invocation is None
            or invocation.endpoint_id != route
            or invocation.attempt_id != envelope.attempt_id
            or invocation.endpoint_instance_id != envelope.endpoint_instance_id
        ):
            return
        try:
            event = event_from_payload(envelope.payload)
        except ToolProtocolError:
            return
        invocation.last_contact_mono = self._clock.monotonic()
        if invocation.terminal:
            if event.type in _TERMINAL_EVENTS and invocation.slot_held:
                self._release_slot(invocation)  # a fenced attempt finally ended
            return
        now_ms = self._clock.wall_ms()
        data = dict(event.data)
        invocation.append_event(event.type, data, now_ms)
        if event.type == "progress":
            invocation.progress = data
        if event.type in ("progress", "heartbeat"):
            invocation.advance("running", now_ms)
        if event.type in _TERMINAL_EVENTS:
            self._spawn(self._fetch_result(invocation))

    def on_instance_gone(self, endpoint_id: str, instance_id: str, reason: str) -> None:
        """Every attempt on a vanished instance becomes ``unknown`` and frees its slot."""
        self._exchanges.fail_route(endpoint_id, InstanceLost(reason))
        for invocation in self.store.active():
            if (
                invocation.endpoint_id == endpoint_id
                and invocation.endpoint_instance_id == instance_id
            ):
                self._finish_unknown(
                    invocation,
                    "FORGE_TOOL_ENDPOINT_INSTANCE_LOST",
                    f"provider instance {reason} while the invocation was in flight",
                    reason=reason,
                )
                self._release_slot(invocation)

    # ------------------------------------------------------------------ time

    def tick(self) -> None:
        """Apply lease expiry and deadlines; poll silent attempts; evict old records."""
        now = self._clock.monotonic()
        self._registry.expire(now)
        poll_after = self._config.status_poll_interval_ms / 1000
        for invocation in self.store.active():
            if not invocation.terminal and now >= invocation.deadline_mono:
                self._deadline_exceeded(invocation)
            elif now - invocation.last_contact_mono >= poll_after:
                invocation.last_contact_mono = now
                self._spawn(self._poll(invocation))

    def evict(self) -> int:
        """Apply retention bounds and compact the journal when it has grown."""
        evicted = self.store.evict(self._clock.wall_ms())
        appended = getattr(self._journal, "appended", 0)
        if appended > 4 * self._config.retention.max_invocations:
            self._journal.compact(_snapshot(self.store))
        return evicted

    def _deadline_exceeded(self, invocation: Invocation) -> None:
        self._finish_unknown(
            invocation,
            "FORGE_TOOL_DEADLINE_EXCEEDED_OUTCOME_UNKNOWN",
            "the deadline passed before the provider reported a terminal result",
            deadline_ms=invocation.deadline_ms,
        )
        if self._config.cancel_on_deadline and invocation.semantics == "action":
            self._spawn(self._safety_cancel(invocation))

    async def _safety_cancel(self, invocation: Invocation) -> None:
        # Motion past its deadline, or orphaned by a Gateway restart, is asked to stop;
        # the outcome stays ``unknown`` whatever the provider answers.
        spec = self._catalog.get(invocation.tool_id)
        if spec is None or invocation.endpoint_instance_id is None:
            return
        envelope = wire.control_request(
            self._context(spec, invocation),
            _CONTROL_FOR[invocation.semantics],
            request_id=self._exchanges.new_request_id(),
            instance_id=invocation.endpoint_instance_id,
        )
        try:
            await self._exchange(
                spec.endpoint_id, envelope, self._config.admission_timeout_ms / 1000
            )
        except (TimeoutError, ConnectionError):
            return

    # ------------------------------------------------------------------ reconciliation

    async def _poll(self, invocation: Invocation) -> None:
        spec = self._catalog.get(invocation.tool_id)
        if spec is None or invocation.endpoint_instance_id is None:
            return
        envelope = wire.status_request(
            self._context(spec, invocation),
            request_id=self._exchanges.new_request_id(),
            instance_id=invocation.endpoint_instance_id,
        )
        try:
            response = await self._exchange(
                spec.endpoint_id, envelope, self._config.admission_timeout_ms / 1000
            )
            status = wire.read_status(response)
        except (TimeoutError, ConnectionError, ToolProtocolError):
            return
        invocation.last_contact_mono = self._clock.monotonic()
        if status.phase in TERMINAL_PHASES:
            await self._fetch_result(invocation)
        elif status.phase in ("running", "stopping"):
            invocation.advance(status.phase, self._clock.wall_ms())

    async def _fetch_result(self, invocation: Invocation) -> None:
        if invocation.result_fetch_pending:
            return
        spec = self._catalog.get(invocation.tool_id)
        if spec is None or invocation.endpoint_instance_id is None:
            return
        invocation.result_fetch_pending = True
        try:
            envelope = wire.result_request(
                self._context(spec, invocation),
                request_id=self._exchanges.new_request_id(),
                instance_id=invocation.endpoint_instance_id,
            )
            response = await self._exchange(
                spec.endpoint_id, envelope, self._config.admission_timeout_ms / 1000
            )
            result = wire.result_payload(wire.read_result(response))
        except (TimeoutError, ConnectionError, ToolProtocolError):
            return
        finally:
            invocation.result_fetch_pending = False
        if result is None:
            return
        if invocation.terminal:
            self._release_slot(invocation)  # the fenced attempt has ended at the provider
            return
        self._finish(invocation, self._checked_outputs(spec, result))

    # ------------------------------------------------------------------ helpers

    async def _exchange(
        self, endpoint_id: str, envelope: WireMessage, timeout_s: float
    ) -> ToolEnvelope:
        request_id = str(envelope.request_id)
        future = self._exchanges.open(request_id, endpoint_id)
        try:
            self._send(endpoint_id, envelope)
            return await asyncio.wait_for(future, timeout=timeout_s)
        finally:
            self._exchanges.close(request_id)

    def _finish(self, invocation: Invocation, result: dict[str, Any]) -> None:
        if not invocation.finish(result, self._clock.wall_ms()):
            return
        self._journal.append(
            {
                "k": "terminal",
                "id": invocation.invocation_id,
                "result": result,
                "at": invocation.terminal_at_ms,
            }
        )
        if result["status"] != "unknown":
            self._release_slot(invocation)

    def _finish_unknown(
        self, invocation: Invocation, code: str, message: str, **details: Any
    ) -> None:
        # ``unknown`` keeps the slot fenced: the attempt may still be moving the robot.
        invocation.fenced = True
        self._finish(invocation, unknown_result(code, message, **details))

    def _take_slot(self, invocation: Invocation) -> None:
        invocation.slot_held = True
        self._slots[(invocation.endpoint_id, invocation.operation)] += 1

    def _release_slot(self, invocation: Invocation) -> None:
        if invocation.slot_held:
            invocation.slot_held = False
            invocation.fenced = False
            self._slots[(invocation.endpoint_id, invocation.operation)] -= 1

    def active_count(self, spec: ToolSpec) -> int:
        """Slots held for ``spec`` by Actions/Sessions plus Queries in flight."""
        key = (spec.endpoint_id, spec.operation)
        return self._slots[key] + self._queries[key]

    def _context(self, spec: ToolSpec, invocation: Invocation):
        return wire.execution_context(
            spec,
            invocation.invocation_id,
            invocation.attempt_id,
            caller_id=invocation.caller_id,
            deadline_ms=invocation.deadline_ms,
        )

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _query_spec(self, endpoint_id: str, operation: str) -> ToolSpec:
        spec = self._catalog.by_route(endpoint_id, operation)
        if spec is not None:
            if spec.semantics != "query":
                raise Conflict(
                    "FORGE_TOOL_SEMANTICS_MISMATCH",
                    f"{endpoint_id}/{operation} is {spec.semantics}; "
                    f"POST /tools/{spec.tool_id}:invoke",
                )
            return spec
        if not any(s.endpoint_id == endpoint_id for s in self._catalog.all()):
            raise NotFound("FORGE_TOOL_ENDPOINT_UNKNOWN", f"no endpoint {endpoint_id!r}")
        raise NotFound("FORGE_TOOL_OPERATION_NOT_FOUND", f"no operation {endpoint_id}/{operation}")

    def _bound_record(self, spec: ToolSpec) -> EndpointRecord:
        record = self._registry.current(spec.endpoint_id)
        reason = spec.binding_error(record.descriptor if record else None)
        if record is None or reason is not None:
            raise Unavailable(
                "FORGE_TOOL_ENDPOINT_UNAVAILABLE",
                reason or "endpoint unavailable",
                details={"endpoint_id": spec.endpoint_id},
            )
        return record

    @staticmethod
    def _max_concurrency(spec: ToolSpec, record: EndpointRecord) -> int:
        operation = spec.descriptor_operation(record.descriptor)
        return operation.max_concurrency if operation is not None else 1

    @staticmethod
    def _validate_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> None:
        violation = spec.input_schema.first_violation(arguments)
        if violation is not None:
            raise InvalidRequest(
                "FORGE_TOOL_INVALID_ARGUMENTS",
                f"arguments {violation.path}: {violation.message}",
                details={"path": violation.path, "tool_id": spec.tool_id},
            )

    @staticmethod
    def _checked_outputs(spec: ToolSpec, result: dict[str, Any]) -> dict[str, Any]:
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

    def _effective_timeout(self, requested_ms: int | None) -> int:
        wanted = self._config.default_timeout_ms if requested_ms is None else requested_ms
        return min(wanted, self._config.invoke_timeout_cap_ms)

    @staticmethod
    def _rejection(error: dict[str, Any], **details: Any) -> Unavailable | Unprocessable:
        extra = {"provider_error": error, **details}
        if error["code"] == "FORGE_ENDPOINT_CAPACITY":
            return Unavailable(error["code"], error["message"], details=extra)
        return Unprocessable(
            error["code"], error["message"], retryable=error["retryable"], details=extra
        )

    # ------------------------------------------------------------------ restart

    def restore(self) -> int:
        """Rebuild retained invocations from the journal; in-flight ones become unknown."""
        admitted: dict[str, JournalRecord] = {}
        results: dict[str, JournalRecord] = {}
        for record in self._journal.replay():
            if record["k"] == "admit":
                admitted[record["id"]] = record
            elif record["k"] == "terminal":
                results[record["id"]] = record
        for invocation_id, record in admitted.items():
            invocation = self._restored(record, results.get(invocation_id))
            self.store.add(invocation)
            if invocation_id not in results and invocation.endpoint_instance_id:
                self._orphans.append(invocation)
        self.store.evict(self._clock.wall_ms())
        self._journal.compact(_snapshot(self.store))
        return len(self.store)

    def on_registered(self, endpoint_id: str, instance_id: str) -> None:
        """An instance (re)registered: stop work a previous Gateway process left running.

        Attempts that were in flight when the Gateway died read ``unknown`` and nobody
        can control them any more; if the same provider instance is back in touch, it is
        asked (once, best effort) to cancel the Action or stop the Session.
        """
        if not self._config.cancel_on_deadline:
            return
        keep: list[Invocation] = []
        for invocation in self._orphans:
            same = (invocation.endpoint_id, invocation.endpoint_instance_id)
            if same == (endpoint_id, instance_id):
                self._spawn(self._safety_cancel(invocation))
            elif invocation.endpoint_id != endpoint_id:
                keep.append(invocation)  # a different instance can never run it again
        self._orphans = keep

    def _restored(self, record: JournalRecord, terminal: JournalRecord | None) -> Invocation:
        invocation = Invocation(
            invocation_id=record["id"],
            attempt_id=record["attempt_id"],
            tool_id=record["tool_id"],
            endpoint_id=record["endpoint_id"],
            operation=record["operation"],
            semantics=record["semantics"],
            caller_id=record.get("caller_id"),
            fingerprint=record["fingerprint"],
            created_at_ms=record["created_at_ms"],
            updated_at_ms=record["created_at_ms"],
            deadline_ms=record["deadline_ms"],
            deadline_mono=self._clock.monotonic(),
            max_events=self._config.retention.max_events_per_invocation,
            endpoint_instance_id=record.get("instance_id"),
        )
        if terminal is not None:
            invocation.finish(terminal["result"], terminal["at"])
        else:
            invocation.finish(
                unknown_result(
                    "FORGE_TOOL_GATEWAY_RESTARTED_OUTCOME_UNKNOWN",
                    "the Gateway restarted while this invocation was in flight",
                ),
                self._clock.wall_ms(),
            )
        return invocation


def _admit_record(invocation: Invocation) -> JournalRecord:
    return {
        "k": "admit",
        "id": invocation.invocation_id,
        "attempt_id": invocation.attempt_id,
        "tool_id": invocation.tool_id,
        "endpoint_id": invocation.endpoint_id,
        "operation": invocation.operation,
        "semantics": invocation.semantics,
        "caller_id": invocation.caller_id,
        "fingerprint": invocation.fingerprint,
        "created_at_ms": invocation.created_at_ms,
        "deadline_ms": invocation.deadline_ms,
        "instance_id": invocation.endpoint_instance_id,
    }


def _snapshot(store: InvocationStore) -> list[JournalRecord]:
    records: list[JournalRecord] = []
    for invocation in store:
        records.append(_admit_record(invocation))
        if invocation.result is not None:
            records.append(
                {
                    "k": "terminal",
                    "id": invocation.invocation_id,
                    "result": invocation.result,
                    "at": invocation.terminal_at_ms,
                }
            )
    return records
