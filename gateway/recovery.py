"""Journal records of invocations, and rebuilding invocations from them after a restart."""

from __future__ import annotations

from collections.abc import Iterable

from gateway.admission import unknown_result
from gateway.invocation import Invocation
from gateway.journal import Journal, JournalRecord


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


def replay(
    journal: Journal, *, now_ms: int, now_mono: float, max_events: int
) -> list[tuple[Invocation, bool]]:
    """Invocations from ``journal`` with whether each was in flight when it stopped.

    An in-flight invocation is terminal ``unknown`` here
    (``FORGE_TOOL_GATEWAY_RESTARTED_OUTCOME_UNKNOWN``): nobody can know what it did.
    """
    admitted: dict[str, JournalRecord] = {}
    results: dict[str, JournalRecord] = {}
    for record in journal.replay():
        if record["k"] == "admit":
            admitted[record["id"]] = record
        elif record["k"] == "terminal":
            results[record["id"]] = record
    restored = []
    for invocation_id, record in admitted.items():
        invocation = _rebuilt(record, now_mono=now_mono, max_events=max_events)
        terminal = results.get(invocation_id)
        if terminal is not None:
            invocation.finish(terminal["result"], terminal["at"])
        else:
            invocation.finish(
                unknown_result(
                    "FORGE_TOOL_GATEWAY_RESTARTED_OUTCOME_UNKNOWN",
                    "the Gateway restarted while this invocation was in flight",
                ),
                now_ms,
            )
        restored.append((invocation, terminal is None))
    return restored


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
