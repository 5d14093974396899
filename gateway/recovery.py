"""Journal records of invocations, and rebuilding invocations from them after a restart.

Replay trusts nothing it reads. A line that is not JSON, a record of an unknown kind, a
missing field or a field of the wrong type is skipped and reported; the invocation such a
line names (when its id is legible) reads terminal ``unknown``
(``FORGE_TOOL_JOURNAL_RECORD_UNREADABLE``), never 404 and never a guessed outcome.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from doraforge.gateway.admission import unknown_result
from doraforge.gateway.invocation import PHASE_FOR_RESULT, Invocation
from doraforge.gateway.journal import (
    MAX_ID_CHARS,
    Journal,
    JournalLine,
    JournalRecord,
    legible_fields,
)

_SEMANTICS = frozenset({"action", "session"})
# name -> (accepted types, required); ``bool`` is never accepted where an int is meant.
_SHAPES: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "admit": {
        "id": ((str,), True),
        "attempt_id": ((str,), True),
        "tool_id": ((str,), True),
        "endpoint_id": ((str,), True),
        "operation": ((str,), True),
        "semantics": ((str,), True),
        "caller_id": ((str, type(None)), False),
        "fingerprint": ((str,), True),
        "created_at_ms": ((int,), True),
        "deadline_ms": ((int,), True),
        "instance_id": ((str, type(None)), False),
    },
    "terminal": {
        "id": ((str,), True),
        "result": ((dict,), True),
        "at": ((int,), True),
    },
}


def admit_record(invocation: Invocation) -> JournalRecord:
    """The ``admit`` line written before an invocation is dispatched."""
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


def terminal_record(invocation: Invocation) -> JournalRecord:
    """The ``terminal`` line written once an outcome is retained."""
    return {
        "k": "terminal",
        "id": invocation.invocation_id,
        "result": invocation.result,
        "at": invocation.terminal_at_ms,
    }


def snapshot(invocations: Iterable[Invocation]) -> list[JournalRecord]:
    """The records that reproduce ``invocations`` (for journal compaction)."""
    records: list[JournalRecord] = []
    for invocation in invocations:
        records.append(admit_record(invocation))
        if invocation.result is not None:
            records.append(terminal_record(invocation))
    return records


def record_problem(record: JournalRecord) -> str | None:
    """Why ``record`` is not a well-formed journal record, or ``None`` when it is."""
    kind = record.get("k")
    if not isinstance(kind, str) or kind not in _SHAPES:
        return f"unknown record kind {kind!r}"
    for name, (types, required) in _SHAPES[kind].items():
        if name not in record:
            if required:
                return f"{kind} record without {name!r}"
            continue
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, types):
            return f"{kind} record with {name!r} of type {type(value).__name__}"
    return _value_problem(kind, record)


def _value_problem(kind: str, record: JournalRecord) -> str | None:
    if not 0 < len(record["id"]) <= MAX_ID_CHARS:
        return f"{kind} record with an id of {len(record['id'])} characters"
    if kind == "admit" and record["semantics"] not in _SEMANTICS:
        return f"admit record with semantics {record['semantics']!r}"
    if kind == "terminal":
        result = record["result"]
        if result.get("status") not in PHASE_FOR_RESULT:
            return f"terminal record with result status {result.get('status')!r}"
        if not isinstance(result.get("outputs", {}), dict):
            return "terminal record whose outputs are not an object"
    return None


@dataclass(frozen=True)
class SkippedRecord:
    """A journal line that was not replayed, and the invocation it names if legible."""

    line: int
    problem: str
    invocation_id: str | None


@dataclass
class Replayed:
    """What a replay rebuilt: invocations (with whether each was in flight) and the skips."""

    invocations: list[tuple[Invocation, bool]] = field(default_factory=list)
    skipped: list[SkippedRecord] = field(default_factory=list)


@dataclass
class _Ledger:
    """Records sorted by invocation id, in order of first appearance."""

    order: dict[str, None] = field(default_factory=dict)
    admitted: dict[str, JournalRecord] = field(default_factory=dict)
    results: dict[str, tuple[JournalRecord, int]] = field(default_factory=dict)
    # id -> the legible fields of its first damaged line and the skip that names it
    damaged: dict[str, tuple[dict[str, str], SkippedRecord]] = field(default_factory=dict)
    skipped: list[SkippedRecord] = field(default_factory=list)

    def take(self, line: JournalLine) -> None:
        problem = line.problem
        if line.record is not None:
            problem = record_problem(line.record)
            if problem is None:
                self._keep(line.number, line.record)
                return
        if problem is not None:
            fields = line.salvaged if line.record is None else legible_fields(line.record.items())
            self.skip(line.number, problem, fields)

    def _keep(self, number: int, record: JournalRecord) -> None:
        self._see(record["id"])
        if record["k"] == "admit":
            self.admitted[record["id"]] = record
        else:
            self.results[record["id"]] = (record, number)

    def skip(self, number: int, problem: str, fields: dict[str, str]) -> None:
        """Report line ``number``; the invocation it names, if any, is damaged."""
        invocation_id = fields.get("id")
        skip = SkippedRecord(number, problem, invocation_id)
        self.skipped.append(skip)
        if invocation_id is not None:
            self._see(invocation_id)
            self.damaged.setdefault(invocation_id, (fields, skip))

    def orphan_results(self) -> None:
        """A terminal line whose admit line is gone is damage too: its tool is unknown."""
        for invocation_id, (record, number) in self.results.items():
            if invocation_id not in self.admitted and invocation_id not in self.damaged:
                self.skip(number, "terminal record without an admit record", {"id": record["id"]})

    def _see(self, invocation_id: str) -> None:
        self.order.setdefault(invocation_id, None)


def replay(journal: Journal, *, now_ms: int, now_mono: float, max_events: int) -> Replayed:
    """Invocations from ``journal`` with whether each was in flight when it stopped.

    An in-flight invocation is terminal ``unknown`` here
    (``FORGE_TOOL_GATEWAY_RESTARTED_OUTCOME_UNKNOWN``): nobody can know what it did. One
    that a skipped line names is ``unknown`` too (``FORGE_TOOL_JOURNAL_RECORD_UNREADABLE``)
    whatever its other lines say, since the damaged line may have been its outcome.
    """
    ledger = _Ledger()
    for line in journal.replay():
        ledger.take(line)
    ledger.orphan_results()
    replayed = Replayed(skipped=ledger.skipped)
    for invocation_id in ledger.order:
        admit = ledger.admitted.get(invocation_id)
        damage = ledger.damaged.get(invocation_id)
        if admit is not None:
            invocation = _rebuilt(admit, now_mono=now_mono, max_events=max_events)
        else:
            assert damage is not None  # every other id seen is admitted or damaged
            invocation = _placeholder(invocation_id, damage[0], now_ms, now_mono, max_events)
        kept = ledger.results.get(invocation_id)
        terminal = kept[0] if kept is not None else None
        in_flight = terminal is None and admit is not None
        invocation.finish(_outcome(terminal, damage, admit is None), _at(terminal, now_ms))
        replayed.invocations.append((invocation, in_flight))
    return replayed


def _outcome(
    terminal: JournalRecord | None,
    damage: tuple[dict[str, str], SkippedRecord] | None,
    placeholder: bool,
) -> dict[str, Any]:
    if damage is not None:
        skip = damage[1]
        return unknown_result(
            "FORGE_TOOL_JOURNAL_RECORD_UNREADABLE",
            "a journal record of this invocation was unreadable after a Gateway restart",
            journal_line=skip.line,
            problem=skip.problem,
            partial=placeholder,
        )
    if terminal is not None:
        result: dict[str, Any] = terminal["result"]  # record_problem checked it is an object
        return result
    return unknown_result(
        "FORGE_TOOL_GATEWAY_RESTARTED_OUTCOME_UNKNOWN",
        "the Gateway restarted while this invocation was in flight",
    )


def _at(terminal: JournalRecord | None, now_ms: int) -> int:
    return terminal["at"] if terminal is not None else now_ms


def _rebuilt(record: JournalRecord, *, now_mono: float, max_events: int) -> Invocation:
    return Invocation(
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
        deadline_mono=now_mono,
        max_events=max_events,
        endpoint_instance_id=record.get("instance_id"),
    )


def _placeholder(
    invocation_id: str, fields: dict[str, str], now_ms: int, now_mono: float, max_events: int
) -> Invocation:
    """An invocation known only by what a damaged line still shows.

    Its fingerprint is empty, so a retry under the same ``caller_id`` is refused as a
    conflict rather than dispatched again: the first attempt may have moved the robot.
    """
    semantics = fields.get("semantics", "action")
    return Invocation(
        invocation_id=invocation_id,
        attempt_id=fields.get("attempt_id", ""),
        tool_id=fields.get("tool_id", ""),
        endpoint_id=fields.get("endpoint_id", ""),
        operation=fields.get("operation", ""),
        semantics=semantics if semantics in _SEMANTICS else "action",
        caller_id=fields.get("caller_id"),
        fingerprint="",
        created_at_ms=now_ms,
        updated_at_ms=now_ms,
        deadline_ms=now_ms,
        deadline_mono=now_mono,
        max_events=max_events,
        endpoint_instance_id=fields.get("instance_id"),
    )
