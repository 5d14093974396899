"""The Tool Runtime: caller-visible invocations over provider attempts.

The Runtime owns ``invocation_id``/``attempt_id``, phases that never regress, deadlines,
concurrency slots, caller_id dedupe and the journal. It never retries and never
re-dispatches: when it cannot know what happened physically it says ``unknown``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections import Counter
from typing import Any

from forge_tool import ToolContext, ToolEnvelope, ToolProtocolError, event_from_payload

from doraforge.gateway import admission, recovery, wire
from doraforge.gateway.admission import InvokeBody, failed_result, unknown_result
from doraforge.gateway.catalog import Catalog, ToolSpec
from doraforge.gateway.clock import Clock
from doraforge.gateway.config import GatewayConfig
from doraforge.gateway.errors import (
    Conflict,
    Gone,
    JournalUnavailable,
    NotFound,
    ProviderProtocolError,
    Unavailable,
)
from doraforge.gateway.exchange import Exchanges, InstanceLost
from doraforge.gateway.invocation import TERMINAL_PHASES, Invocation
from doraforge.gateway.journal import Journal, JournalHealth
from doraforge.gateway.registry import EndpointRecord, EndpointRegistry
from doraforge.gateway.store import InvocationStore
from doraforge.wire.canonical import sha256_hex

log = logging.getLogger(__name__)

_TERMINAL_EVENTS = frozenset({"executor_completed", "executor_failed", "cancelled", "stopped"})
_CONTROL_FOR = {"action": "cancel", "session": "stop"}
_SKIPS_LOGGED = 20  # one line each; a wholly garbled journal must not flood the log
# A record that cannot be encoded is a bug, but after dispatch it must cost the caller
# nothing but durability, exactly like a full disk.
_WRITE_FAULTS = (OSError, ValueError, TypeError)


class ToolRuntime:
    """Admission, reconciliation and control of Action and Session invocations.

    ``queries_in_flight`` is the Query invoker's live count, so that one operation's
    concurrency is reported as one number whatever its semantics. ``journal_health``
    counts skipped journal records and failed writes.
    """

    def __init__(
        self,
        *,
        config: GatewayConfig,
        catalog: Catalog,
        registry: EndpointRegistry,
        exchanges: Exchanges,
        journal: Journal,
        clock: Clock,
        queries_in_flight: Counter[tuple[str, str]] | None = None,
    ) -> None:
        self._config = config
        self._catalog = catalog
        self._registry = registry
        self._exchanges = exchanges
        self._journal = journal
        self._clock = clock
        self.store = InvocationStore(config.retention)
        self._slots: Counter[tuple[str, str]] = Counter()
        self._queries = queries_in_flight if queries_in_flight is not None else Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._orphans: list[Invocation] = []
        self.dispatch_counts: Counter[str] = Counter()  # invokes sent per tool, ever
        self.journal_health = JournalHealth()

    # ------------------------------------------------------------------ actions, sessions

    async def start(self, tool_id: str, body: InvokeBody) -> tuple[Invocation, bool]:
        """Admit an Action or Session; returns the invocation and whether it is a replay."""
        spec = self._catalog.get(tool_id)
        if spec is None:
            raise self._catalog.not_found(tool_id)
        if spec.semantics == "query":
            raise Conflict(
                "FORGE_TOOL_SEMANTICS_MISMATCH",
                f"{tool_id!r} is a Query; POST /tools/{spec.endpoint_id}/{spec.operation}:invoke",
            )
        admission.validate_arguments(spec, body.arguments)
        fingerprint = sha256_hex({"tool_id": tool_id, "arguments": body.arguments})
        replay = self._replay(body.caller_id, fingerprint)
        if replay is not None:
            return replay, True
        record = admission.bound_record(self._registry, spec)
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
        limit = admission.max_concurrency(spec, record)
        if self._slots[(spec.endpoint_id, spec.operation)] >= limit:
            raise admission.busy(spec, limit)

    def _admit(
        self, spec: ToolSpec, record: EndpointRecord, body: InvokeBody, fingerprint: str
    ) -> Invocation:
        timeout_ms = admission.effective_timeout(self._config, body.timeout_ms)
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
        self._journal_admission(invocation)
        self.store.add(invocation)
        self._take_slot(invocation)
        if len(self.store) > self._config.retention.max_invocations:
            self.store.evict(now_ms)
        return invocation

    async def _dispatch(
        self, spec: ToolSpec, invocation: Invocation, arguments: dict[str, Any]
    ) -> None:
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
            response = await self._exchanges.request(spec.endpoint_id, envelope, wait_s)
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
            raise admission.rejection(body, spec.semantics, invocation_id=invocation.invocation_id)
        if outcome == "completed":
            self._finish(invocation, admission.checked_outputs(spec, body))
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
        previous, invocation.cancel_status = invocation.cancel_status, "requested"
        envelope = wire.control_request(
            self._context(spec, invocation),
            command,
            request_id=self._exchanges.new_request_id(),
            instance_id=str(invocation.endpoint_instance_id),
        )
        try:
            response = await self._exchanges.request(
                spec.endpoint_id, envelope, self._config.admission_timeout_ms / 1000
            )
            status = wire.read_control(response).status
        except (TimeoutError, InstanceLost, ToolProtocolError) as exc:
            log.warning("control %s of %s unanswered: %s", command, invocation_id, exc)
            return invocation, "requested"
        except ConnectionError as exc:  # never sent: no route, or Dora refused the output
            invocation.cancel_status = previous
            raise Unavailable(
                "FORGE_TOOL_CONTROL_UNDELIVERED",
                f"the {command} request could not be sent to the provider; retry",
                details={"invocation_id": invocation_id},
            ) from exc
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
        if self.journal_health.degraded or appended > 4 * self._config.retention.max_invocations:
            self._compact()
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
            await self._exchanges.request(
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
            response = await self._exchanges.request(
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
            response = await self._exchanges.request(
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
        self._finish(invocation, admission.checked_outputs(spec, result))
        # A result the provider holds means its attempt has ended, even when all it can say
        # of the physical outcome is ``unknown``: nothing is moving the robot for it now.
        self._release_slot(invocation)

    # ------------------------------------------------------------------ helpers

    def _finish(self, invocation: Invocation, result: dict[str, Any]) -> None:
        if not invocation.finish(result, self._clock.wall_ms()):
            return
        self._journal_terminal(invocation)
        if result["status"] != "unknown":
            self._release_slot(invocation)

    # ------------------------------------------------------------------ journal faults

    def _journal_admission(self, invocation: Invocation) -> None:
        """Write the admit line or refuse the admission (503) before anything is sent."""
        try:
            self._journal.append(recovery.admit_record(invocation))
        except OSError as exc:
            reason = _reason(exc)
            self._journal_fault(f"admit of {invocation.invocation_id}", reason)
            raise JournalUnavailable(
                "FORGE_TOOL_JOURNAL_UNAVAILABLE",
                f"the invocation journal cannot be written ({reason}); nothing was dispatched",
                details={"reason": reason, "tool_id": invocation.tool_id},
            ) from exc

    def _journal_terminal(self, invocation: Invocation) -> None:
        # After dispatch the caller is told the outcome from memory whatever the disk
        # does. Without this line a restarted Gateway reads the invocation as ``unknown``
        # (its admit line has no outcome), never as another outcome; the next
        # compaction rewrites the file from memory and heals it.
        try:
            self._journal.append(recovery.terminal_record(invocation))
        except _WRITE_FAULTS as exc:
            self._journal_fault(f"outcome of {invocation.invocation_id}", _reason(exc))
            self._degrade()

    def _journal_fault(self, what: str, reason: str, *, loud: bool = True) -> None:
        self.journal_health.write_failures += 1
        self.journal_health.last_error = reason
        if loud:
            log.error("journal write failed (%s): %s", what, reason)

    def _degrade(self) -> None:
        if not self.journal_health.degraded:
            log.error("journal degraded: a restart would read affected invocations as unknown")
        self.journal_health.degraded = True

    def _compact(self) -> None:
        """Rewrite the journal from memory; on failure the old file stays and is degraded."""
        try:
            self._journal.compact(recovery.snapshot(self.store))
        except _WRITE_FAULTS as exc:
            # Retried on every eviction tick while degraded: said once, counted always.
            self._journal_fault("compaction", _reason(exc), loud=not self.journal_health.degraded)
            self._degrade()
            return
        if self.journal_health.degraded:
            log.warning("journal healed: rewritten from the invocations in memory")
        self.journal_health.degraded = False

    def _report_skipped(self, skipped: list[recovery.SkippedRecord]) -> None:
        self.journal_health.skipped_records += len(skipped)
        for skip in skipped[:_SKIPS_LOGGED]:
            named = skip.invocation_id and f"invocation {skip.invocation_id} reads unknown"
            log.warning(
                "journal line %d skipped: %s; %s", skip.line, skip.problem, named or "no id legible"
            )
        if len(skipped) > _SKIPS_LOGGED:
            log.warning("journal: %d more lines skipped", len(skipped) - _SKIPS_LOGGED)

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

    def _context(self, spec: ToolSpec, invocation: Invocation) -> ToolContext:
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

    # ------------------------------------------------------------------ restart

    def restore(self) -> int:
        """Rebuild retained invocations from the journal; in-flight ones become unknown.

        Unreadable lines are skipped, logged and counted, and the invocations they name
        read ``unknown``. A journal that cannot be rewritten (full disk) leaves the
        runtime serving with a degraded journal rather than not starting.
        """
        restored = recovery.replay(
            self._journal,
            now_ms=self._clock.wall_ms(),
            now_mono=self._clock.monotonic(),
            max_events=self._config.retention.max_events_per_invocation,
        )
        self._report_skipped(restored.skipped)
        for invocation, in_flight in restored.invocations:
            self.store.add(invocation)
            if in_flight and invocation.endpoint_instance_id:
                self._orphans.append(invocation)
        self.store.evict(self._clock.wall_ms())
        self._compact()
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


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"{os.strerror(exc.errno)} [errno {exc.errno}]"
    return f"{type(exc).__name__}: {exc}"
