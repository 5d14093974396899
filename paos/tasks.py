"""The task coordinator: governed AgentTasks over the Forge Tool API.

Every governed call follows the same order: recheck the frozen binding (nothing is sent
when it drifted), persist the intent and its ``caller_id``, POST, persist the Gateway's
ids. A timeout or transport error leaves the record ``indeterminate``: the remote state is
unknown and the same request is never sent again; :meth:`TaskService.reconcile` only reads.

A store failure before the intent commit is a plain retryable ``StoreUnavailable``: nothing
was sent. After it, the request may have reached the robot, so the caller gets
:class:`~paos.errors.RecordIndeterminate` (remote state unknown, not retryable) and the
record stays as last committed (``intent`` or ``indeterminate``) until reconcile finds the
invocation by ``caller_id``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from doraforge.paos import binding as bindings
from doraforge.paos.binding import BindingCandidate, BindingError, FrozenBinding
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.client_cache import GatewayClients
from doraforge.paos.errors import (
    ForgeHttpError,
    ForgeTimeout,
    ForgeTransportError,
    PaosError,
    RecordIndeterminate,
)
from doraforge.paos.evidence import Phase, capture
from doraforge.paos.spec_cache import VouchedSpecs
from doraforge.paos.store import (
    AgentTaskStore,
    NewRecord,
    RecordRow,
    StoreError,
    StoreUnavailable,
    TaskRow,
)
from doraforge.paos.store.models import RESULT_TO_STATE, TERMINAL_RECORD_STATES
from doraforge.wire.canonical import sha256_hex

ACTIVE_TASK_STATES = frozenset({"executing", "awaiting_replan", "cancelling"})
_LIVE = frozenset({"intent", "indeterminate", "accepted", "running", "stopping"})
_OWNERSHIPS = frozenset({"task", "shared", "runtime"})
#: Gateway answers to a diagnostic Query that say the vouched route is not what the cache
#: holds (or that the Gateway may be another one now): the URL's vouched specs are dropped.
_ROUTE_MOVED = frozenset(
    {
        "FORGE_TOOL_ENDPOINT_UNKNOWN",
        "FORGE_TOOL_OPERATION_NOT_FOUND",
        "FORGE_TOOL_SEMANTICS_MISMATCH",
        "FORGE_TOOL_NOT_FOUND",
    }
)

type ClientFactory = Callable[[str], ForgeToolClient]


class TaskError(PaosError):
    """A governed call was refused by PAOS before anything was sent."""


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class TaskService:
    """Creates, runs, reconciles and finalizes AgentTasks; the one place that writes them."""

    def __init__(
        self,
        store: AgentTaskStore,
        client_for: ClientFactory,
        *,
        workspace: Path,
        evidence_timeout_s: float = 5.0,
        activate_skill: Callable[[str], Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        # ``name -> SkillActivation`` (candidate + contract template) of a running skill.
        self.activate_skill = activate_skill
        self.workspace = workspace
        self._evidence_timeout_s = evidence_timeout_s
        self._clients = GatewayClients(client_for)
        self._specs = VouchedSpecs(clock=clock)

    def client(self, gateway_url: str) -> ForgeToolClient:
        """One shared client per Gateway URL, from a bounded set (see ``GatewayClients``)."""
        return self._clients.get(gateway_url)

    def vouch_gateway(
        self, gateway_url: str, listing: dict[str, Any], *, trusted_for_s: float
    ) -> None:
        """Diagnostic Queries on ``gateway_url`` may take their ToolSpecs from ``listing``
        (its ``GET /tools`` answer) for ``trusted_for_s`` seconds instead of fetching the
        spec before each Query. Only a caller that has just compared the listing's identity
        with the one recorded for that Gateway may vouch (the registry's health check does);
        without a vouched listing every diagnostic Query fetches its spec."""
        self._specs.vouch(gateway_url, listing, trusted_for_s=trusted_for_s)

    async def aclose(self) -> None:
        """Close every client."""
        await self._clients.aclose()

    # ------------------------------------------------------------------ binding and tasks

    async def activate(self, candidate: BindingCandidate) -> dict[str, Any]:
        """Preview the runtime a task would bind to (nothing is stored)."""
        live = await bindings.preview(self.client(candidate.gateway_url), candidate)
        return live.model_dump(mode="json")

    async def create_task(
        self, goal: str, contract: dict[str, Any], candidate: BindingCandidate
    ) -> dict[str, Any]:
        """Revalidate and freeze the binding, then create the one active task."""
        from doraforge.paos.verify.contract import parse_contract

        parsed = parse_contract(contract).model_dump(mode="json")
        binding_id, sha256, binding = await bindings.freeze(
            self.client(candidate.gateway_url), candidate
        )
        self.store.put_binding(binding_id, sha256, binding.document())
        task = self.store.create_task(
            task_id=_new_id("task"),
            revision_id=_new_id("rev"),
            binding_id=binding_id,
            goal=goal,
            contract=parsed,
        )
        return self.describe(task.task_id)

    def describe(self, task_id: str) -> dict[str, Any]:
        """Task, revisions, records, evidence and verification attempts."""
        task = self.store.task(task_id)
        return {
            "task": task.public(),
            "binding": self.store.binding(task.binding_id),
            "revisions": [r.public() for r in self.store.revisions(task_id)],
            "records": self._records_with_steps(task_id),
            "evidence": self.store.evidence(task_id),
            "verifications": self.store.verifications(task_id),
        }

    def _records_with_steps(self, task_id: str) -> list[dict[str, Any]]:
        """The task's records, each with the ``step`` its caller named (or ``None``)."""
        steps = self.store.steps(task_id)
        return [{**r.public(), "step": steps.get(r.record_id)} for r in self.store.records(task_id)]

    def _task(self, task_id: str, *, states: frozenset[str] = frozenset({"executing"})) -> TaskRow:
        task = self.store.task(task_id)
        if task.state not in states:
            raise TaskError(
                "PAOS_TASK_STATE",
                f"task is {task.state}; this call needs {sorted(states)}",
                details={"task_id": task_id, "state": task.state},
            )
        return task

    # ------------------------------------------------------------------ queries

    async def query(
        self,
        tool_id: str,
        arguments: dict[str, Any],
        *,
        task_id: str | None = None,
        gateway_url: str | None = None,
        timeout_ms: int | None = None,
    ) -> dict[str, Any]:
        """A Query: diagnostic without a task (no record), bound with one (terminal record)."""
        if task_id is None:
            if gateway_url is None:
                raise TaskError("PAOS_NO_GATEWAY", "a diagnostic Query needs a Gateway URL")
            return await self._diagnostic_query(gateway_url, tool_id, arguments, timeout_ms)
        task = self._task(task_id)
        binding, client = self._bound(task)
        await bindings.recheck(client, binding, tool_id, "query")
        record = self._intent(task, binding, tool_id, "query", arguments)
        bound = binding.tools[tool_id]
        with self._after_intent(record):
            try:
                data = await client.query(
                    bound.endpoint_id,
                    bound.operation,
                    arguments,
                    caller_id=record.caller_id,
                    timeout_ms=timeout_ms,
                )
            except ForgeHttpError as exc:
                self.store.record_terminal(record.record_id, "failed", error=exc.to_payload())
                raise
            except (ForgeTimeout, ForgeTransportError) as exc:
                # A Query has no side effect, but its answer is lost: the record says so.
                self.store.record_terminal(record.record_id, "unknown", error=exc.to_payload())
                raise
            result = data["response"]["result"]
            self.store.record_terminal(
                record.record_id, RESULT_TO_STATE[result["status"]], result=result
            )
        return data

    async def _diagnostic_query(
        self, gateway_url: str, tool_id: str, arguments: dict[str, Any], timeout_ms: int | None
    ) -> dict[str, Any]:
        """A Query with no record: the route from a vouched listing or ``GET /tools/{id}``."""
        client = self.client(gateway_url)
        spec = self._specs.get(gateway_url, tool_id)
        if spec is None:
            spec, _ = await client.tool_spec(tool_id)
        try:
            return await client.query(
                spec["endpoint_id"],
                spec["operation"],
                arguments,
                caller_id=f"paos:diag:{uuid.uuid4().hex}",
                timeout_ms=timeout_ms,
            )
        except (ForgeTimeout, ForgeTransportError):
            self._specs.drop(gateway_url)  # perhaps another Gateway answers there next
            raise
        except ForgeHttpError as exc:
            if exc.code in _ROUTE_MOVED:
                self._specs.drop(gateway_url)
            raise

    # ------------------------------------------------------------------ actions and sessions

    async def start_action(
        self,
        task_id: str,
        tool_id: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
        step: str | None = None,
    ) -> dict[str, Any]:
        """Admit a bound Action: before-evidence, intent, POST, ids kept. ``step`` names
        what it does ("descend"): the record and its evidence frames carry it."""
        return await self._start(task_id, tool_id, arguments, "action", None, timeout_ms, step)

    async def start_session(
        self,
        task_id: str,
        tool_id: str,
        arguments: dict[str, Any],
        *,
        ownership: str = "task",
        timeout_ms: int | None = None,
        step: str | None = None,
    ) -> dict[str, Any]:
        """Admit a bound Session owned by the ``task``, ``shared`` or the ``runtime``."""
        if ownership not in _OWNERSHIPS:
            raise TaskError("PAOS_INVALID_OWNERSHIP", f"ownership is one of {sorted(_OWNERSHIPS)}")
        return await self._start(
            task_id, tool_id, arguments, "session", ownership, timeout_ms, step
        )

    async def _start(
        self,
        task_id: str,
        tool_id: str,
        arguments: dict[str, Any],
        semantics: str,
        ownership: str | None,
        timeout_ms: int | None,
        step: str | None = None,
    ) -> dict[str, Any]:
        task = self._task(task_id)
        binding, client = self._bound(task)
        await bindings.recheck(client, binding, tool_id, semantics)
        if semantics == "action":
            await self._before_evidence(task, client, step)
        record = self._intent(task, binding, tool_id, semantics, arguments, ownership, step)
        answer: dict[str, Any] = {}
        with self._after_intent(record, answer):
            try:
                admitted = await client.invoke(
                    tool_id, arguments, caller_id=record.caller_id, timeout_ms=timeout_ms
                )
            except (ForgeTimeout, ForgeTransportError) as exc:
                self.store.record_indeterminate(record.record_id, exc.to_payload())
                raise
            except ForgeHttpError as exc:
                # The Gateway decided: not admitted, or rejected before any side effect.
                self.store.record_terminal(record.record_id, "failed", error=exc.to_payload())
                raise
            answer.update(admitted)
            record = self.store.record_admitted(
                record.record_id,
                admitted["invocation_id"],
                admitted["attempt_id"],
                admitted["phase"],
            )
            if admitted["phase"] in TERMINAL_RECORD_STATES:
                record = await self._settle(task, record, client)
        return {**record.public(), "step": step}

    @contextmanager
    def _after_intent(
        self, record: RecordRow, answer: dict[str, Any] | None = None
    ) -> Iterator[None]:
        """Store faults once ``record``'s intent is committed become indeterminate.

        The request may have been sent, so a retryable error here could make a caller
        move the robot twice. ``answer`` is the Gateway's admission once it arrived.
        """
        try:
            yield
        except StoreUnavailable as exc:
            # Nothing more is written: the store has just failed, and the last committed
            # state (intent or indeterminate) already tells reconcile to look by caller_id.
            invocation_id = (answer or {}).get("invocation_id")
            raise RecordIndeterminate(
                "PAOS_RECORD_INDETERMINATE",
                "the request was sent but its outcome could not be recorded "
                f"({exc.message}); the remote state is unknown: reconcile, do not retry",
                details={
                    "record_id": record.record_id,
                    "caller_id": record.caller_id,
                    "tool_id": record.tool_id,
                    "invocation_id": invocation_id,
                    "store_error": exc.to_payload(),
                },
            ) from exc

    async def status(self, task_id: str, record_id: str) -> dict[str, Any]:
        """Read the Gateway's status of a record's invocation and account for it.

        A record without an invocation id yet (``intent``, ``indeterminate``) is looked up
        by its ``caller_id``, read-only; finding nothing changes nothing here.
        """
        task, record, client = self._record(task_id, record_id)
        if record.terminal:
            return {"record": record.public(), "invocation": None}
        if record.invocation_id is None:
            record, invocation = await self._found_by_caller(record, client)
            if invocation is None:
                return {"record": record.public(), "invocation": None}
        else:
            invocation = await client.invocation(record.invocation_id)
        record = await self._observe(task, record, client, invocation)
        return {"record": record.public(), "invocation": invocation}

    async def result(self, task_id: str, record_id: str) -> dict[str, Any]:
        """``{"status": "pending"}`` or the terminal record (after-evidence captured)."""
        task, record, client = self._record(task_id, record_id)
        if not record.terminal and record.invocation_id is not None:
            available = await client.result(record.invocation_id)
            if available is not None:
                record = await self._terminal(task, record, client, available["result"])
        if not record.terminal:
            return {"status": "pending", "record": record.public()}
        return {"status": "available", "record": record.public()}

    async def cancel(self, task_id: str, record_id: str) -> dict[str, Any]:
        """Request cancellation (Action) — recorded as a request, never as a stop."""
        return await self._control(task_id, record_id, "action")

    async def stop(self, task_id: str, record_id: str) -> dict[str, Any]:
        """Stop a Session this task owns; shared and runtime ones are not the task's."""
        return await self._control(task_id, record_id, "session")

    async def _control(self, task_id: str, record_id: str, semantics: str) -> dict[str, Any]:
        _, record, client = self._record(
            task_id, record_id, states=frozenset({"executing", "cancelling"})
        )
        if record.semantics != semantics:
            raise TaskError("PAOS_TOOL_SEMANTICS", f"record {record_id} is a {record.semantics}")
        if semantics == "session" and record.ownership != "task":
            raise TaskError("PAOS_SESSION_NOT_OWNED", "a task stops only the Sessions it owns")
        if record.invocation_id is None or record.terminal:
            return {"record": record.public(), "control": {"status": "terminal"}}
        command = client.cancel if semantics == "action" else client.stop
        answer = await command(record.invocation_id)
        request = {
            "command": "cancel" if semantics == "action" else "stop",
            "status": answer.get("status", answer.get("cancel_status")),
            "at_ms": _now_ms(),
        }
        written = self._unless_ended(
            record.record_id, lambda: self.store.record_cancel_request(record.record_id, request)
        )
        if written is None:  # it ended while the request was on its way: the record says how
            ended = self.store.record(record.record_id)
            return {"record": ended.public(), "control": {**answer, "status": "terminal"}}
        return {"record": written.public(), "control": answer}

    def _unless_ended(self, record_id: str, write: Callable[[], RecordRow]) -> RecordRow | None:
        """``write()``'s row, or ``None`` when the record was already terminal: another
        process on the same home (the agent polling its result while an operator cancels
        the task) recorded the end first, and a terminal record never changes."""
        try:
            return write()
        except StoreError as exc:
            if exc.code != "PAOS_RECORD_TERMINAL":
                raise
            return None

    # ------------------------------------------------------------------ reconciliation

    async def reconcile(self, task_id: str) -> list[dict[str, Any]]:
        """Bring live records up to date by reading only (never re-POSTing)."""
        task = self.store.task(task_id)
        binding, client = self._bound(task)
        del binding
        updated = []
        for record in self.store.records(task_id):
            if record.state in _LIVE:
                record = await self._reconcile_one(task, record, client)
            updated.append(record.public())
        return updated

    async def _reconcile_one(
        self, task: TaskRow, record: RecordRow, client: ForgeToolClient
    ) -> RecordRow:
        if record.invocation_id is None:
            record, found = await self._found_by_caller(record, client)
            if found is None:
                # Nothing reached the Gateway under this caller_id: nothing ran.
                error = {
                    "code": "PAOS_NEVER_ADMITTED",
                    "message": "the Gateway has no invocation for this caller_id",
                }
                return self.store.record_terminal(record.record_id, "unknown", error=error)
            invocation = found
        else:
            invocation = await client.invocation(record.invocation_id)
        return await self._observe(task, record, client, invocation)

    async def _found_by_caller(
        self, record: RecordRow, client: ForgeToolClient
    ) -> tuple[RecordRow, dict[str, Any] | None]:
        """The invocation admitted under the record's ``caller_id``, its ids then kept."""
        found = await client.lookup_caller(record.caller_id)
        if not found:
            return record, None
        invocation = found[-1]
        record = self.store.record_admitted(
            record.record_id,
            invocation["invocation_id"],
            invocation["attempt_id"],
            invocation["phase"],
        )
        return record, invocation

    async def _observe(
        self, task: TaskRow, record: RecordRow, client: ForgeToolClient, invocation: dict[str, Any]
    ) -> RecordRow:
        phase = invocation["phase"]
        if invocation.get("terminal") and invocation.get("result") is not None:
            return await self._terminal(task, record, client, invocation["result"])
        if phase in ("running", "stopping") and record.state in ("accepted", "running"):
            moved = self._unless_ended(
                record.record_id, lambda: self.store.record_phase(record.record_id, phase)
            )
            return moved or self.store.record(record.record_id)
        return record

    async def _settle(self, task: TaskRow, record: RecordRow, client: ForgeToolClient) -> RecordRow:
        available = await client.result(str(record.invocation_id))
        if available is None:
            return record
        return await self._terminal(task, record, client, available["result"])

    async def _terminal(
        self, task: TaskRow, record: RecordRow, client: ForgeToolClient, result: dict[str, Any]
    ) -> RecordRow:
        state = RESULT_TO_STATE[result["status"]]
        ended = self._unless_ended(
            record.record_id,
            lambda: self.store.record_terminal(
                record.record_id, state, result=result, error=result.get("error")
            ),
        )
        if ended is None:  # recorded by another process, with its after-evidence
            return self.store.record(record.record_id)
        record = ended
        if record.semantics == "action":
            await self._after_evidence(task, record, client)
        return record

    # ------------------------------------------------------------------ evidence

    def _sources(self, task: TaskRow) -> list[str]:
        # The contract's required sources; without any, evidence is not part of the task.
        policy = task.contract.get("evidence_policy") or {}
        return list(policy.get("required_sources") or [])

    async def _before_evidence(
        self, task: TaskRow, client: ForgeToolClient, step: str | None = None
    ) -> None:
        revision = self.store.current_revision(task.task_id)
        taken = {
            (a["source"], a["phase"])
            for a in self.store.evidence(task.task_id)
            if a["revision_id"] == revision.revision_id and a.get("error") is None
        }
        for source in self._sources(task):
            if (source, "before") not in taken:
                await self._capture(
                    task, client, revision.revision_id, None, source, "before", None, step
                )

    async def _after_evidence(
        self, task: TaskRow, record: RecordRow, client: ForgeToolClient
    ) -> None:
        not_before_ns = (record.terminal_at_ms or _now_ms()) * 1_000_000
        step = self.store.step_of(record.record_id)
        for source in self._sources(task):
            await self._capture(
                task,
                client,
                record.revision_id,
                record.record_id,
                source,
                "after",
                not_before_ns,
                step,
            )

    async def _capture(
        self,
        task: TaskRow,
        client: ForgeToolClient,
        revision_id: str,
        record_id: str | None,
        source: str,
        phase: Phase,
        not_before_ns: int | None,
        step: str | None = None,
    ) -> None:
        artifact = await capture(
            client,
            workspace=self.workspace,
            task_id=task.task_id,
            revision_id=revision_id,
            record_id=record_id,
            source=source,
            phase=phase,
            not_before_ns=not_before_ns,
            timeout_s=self._evidence_timeout_s,
            step=step,
        )
        self.store.add_evidence(artifact.to_dict())

    # ------------------------------------------------------------------ helpers

    def binding(self, task: TaskRow) -> FrozenBinding:
        """The frozen binding of ``task``; :class:`BindingError` when the stored one is not."""
        return bindings.stored(self.store.binding(task.binding_id))

    def _bound(self, task: TaskRow) -> tuple[FrozenBinding, ForgeToolClient]:
        binding = self.binding(task)
        return binding, self.client(binding.gateway_url)

    def _record(
        self, task_id: str, record_id: str, *, states: frozenset[str] = ACTIVE_TASK_STATES
    ) -> tuple[TaskRow, RecordRow, ForgeToolClient]:
        task = self._task(task_id, states=states)
        record = self.store.record(record_id)
        if record.task_id != task_id:
            raise TaskError("PAOS_RECORD_FOREIGN", f"record {record_id} is not this task's")
        return task, record, self._bound(task)[1]

    def _intent(
        self,
        task: TaskRow,
        binding: FrozenBinding,
        tool_id: str,
        semantics: str,
        arguments: dict[str, Any],
        ownership: str | None = None,
        step: str | None = None,
    ) -> RecordRow:
        try:
            arguments_sha256 = sha256_hex(arguments)
        except (TypeError, ValueError) as exc:
            # NaN, Infinity or a lone surrogate: no Gateway accepts them, and an intent
            # must not be recorded for a call that cannot be sent.
            raise TaskError("PAOS_ARGUMENTS_INVALID", "arguments are not strict JSON data") from exc
        record_id = _new_id("rec")
        return self.store.record_intent(
            NewRecord(
                record_id=record_id,
                task_id=task.task_id,
                revision_id=self.store.current_revision(task.task_id).revision_id,
                tool_id=tool_id,
                semantics=semantics,
                caller_id=f"paos:{task.task_id}:{uuid.uuid4().hex}",
                arguments_sha256=arguments_sha256,
                spec_sha256=binding.tools[tool_id].spec_sha256,
                ownership=ownership,
                step=step,
            )
        )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


__all__ = ["BindingError", "TaskError", "TaskService"]
