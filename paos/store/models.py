"""Rows of the AgentTask store as frozen values."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

TERMINAL_TASK_STATES = frozenset({"succeeded", "failed", "cancelled"})
TERMINAL_RECORD_STATES = frozenset({"completed", "failed", "cancelled", "stopped", "unknown"})
LIVE_RECORD_STATES = frozenset({"intent", "indeterminate", "accepted", "running", "stopping"})
RESULT_TO_STATE = {
    "succeeded": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "stopped": "stopped",
    "unknown": "unknown",
}


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


# Decodes text this store wrote (no surrounding whitespace): ``json.loads`` also runs two
# whitespace regexes per call, a fifth of decoding a small result.
_DECODE = json.JSONDecoder().raw_decode


# The record columns stored as JSON text, and the RecordRow field holding their value.
_JSON_FIELDS = {"result_json": "result", "error_json": "error", "cancel_json": "cancel"}


@dataclass(frozen=True)
class TaskRow:
    """One AgentTask."""

    task_id: str
    binding_id: str
    goal: str
    contract: dict[str, Any]
    state: str
    replans_used: int
    outcome: dict[str, Any] | None
    created_at_ms: int
    updated_at_ms: int
    terminal_at_ms: int | None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_TASK_STATES

    @classmethod
    def of(cls, row: sqlite3.Row) -> TaskRow:
        return cls(
            task_id=row["task_id"],
            binding_id=row["binding_id"],
            goal=row["goal"],
            contract=_load(row["contract_json"]),
            state=row["state"],
            replans_used=row["replans_used"],
            outcome=_load(row["outcome_json"]),
            created_at_ms=row["created_at_ms"],
            updated_at_ms=row["updated_at_ms"],
            terminal_at_ms=row["terminal_at_ms"],
        )

    def public(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "binding_id": self.binding_id,
            "goal": self.goal,
            "contract": self.contract,
            "state": self.state,
            "replans_used": self.replans_used,
            "outcome": self.outcome,
            "created_at_ms": self.created_at_ms,
            "updated_at_ms": self.updated_at_ms,
            "terminal_at_ms": self.terminal_at_ms,
        }


@dataclass(frozen=True)
class TaskOwner:
    """Who holds an active task on an agent's behalf, and when it last acted on it."""

    task_id: str
    owner_id: str
    last_activity_ms: int


@dataclass(frozen=True)
class RevisionRow:
    """One immutable planning generation."""

    revision_id: str
    task_id: str
    ordinal: int
    reason: str
    verdict: dict[str, Any] | None
    created_at_ms: int

    @classmethod
    def of(cls, row: sqlite3.Row) -> RevisionRow:
        return cls(
            revision_id=row["revision_id"],
            task_id=row["task_id"],
            ordinal=row["ordinal"],
            reason=row["reason"],
            verdict=_load(row["verdict_json"]),
            created_at_ms=row["created_at_ms"],
        )

    def public(self) -> dict[str, Any]:
        return {
            "revision_id": self.revision_id,
            "ordinal": self.ordinal,
            "reason": self.reason,
            "verdict": self.verdict,
            "created_at_ms": self.created_at_ms,
        }


@dataclass(frozen=True)
class NewRecord:
    """An intent about to be persisted (before any POST)."""

    record_id: str
    task_id: str
    revision_id: str
    tool_id: str
    semantics: str
    caller_id: str
    arguments_sha256: str
    spec_sha256: str
    ownership: str | None = None


@dataclass(frozen=True)
class RecordRow:
    """One ToolExecutionRecord: a bound Query, Action or Session."""

    record_id: str
    task_id: str
    revision_id: str
    tool_id: str
    semantics: str
    ownership: str | None
    caller_id: str
    arguments_sha256: str
    spec_sha256: str
    state: str
    invocation_id: str | None
    attempt_id: str | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    cancel: dict[str, Any] | None
    created_at_ms: int
    updated_at_ms: int
    terminal_at_ms: int | None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_RECORD_STATES

    @classmethod
    def of(cls, row: sqlite3.Row) -> RecordRow:
        return cls(
            record_id=row["record_id"],
            task_id=row["task_id"],
            revision_id=row["revision_id"],
            tool_id=row["tool_id"],
            semantics=row["semantics"],
            ownership=row["ownership"],
            caller_id=row["caller_id"],
            arguments_sha256=row["arguments_sha256"],
            spec_sha256=row["spec_sha256"],
            state=row["state"],
            invocation_id=row["invocation_id"],
            attempt_id=row["attempt_id"],
            result=_load(row["result_json"]),
            error=_load(row["error_json"]),
            cancel=_load(row["cancel_json"]),
            created_at_ms=row["created_at_ms"],
            updated_at_ms=row["updated_at_ms"],
            terminal_at_ms=row["terminal_at_ms"],
        )

    def updated(self, columns: tuple[str, ...], values: tuple[Any, ...]) -> RecordRow:
        """This row after an UPDATE that set ``columns`` to ``values`` (as stored: a JSON
        column as its text) and nothing else: exactly what reading the row back gives,
        a JSON column decoded from the text that was stored."""
        fields = self.__dict__.copy()
        fields.update(zip(columns, values, strict=True))
        for column, field in _JSON_FIELDS.items():
            if column in fields:
                text = fields.pop(column)
                fields[field] = None if text is None else _DECODE(text)[0]
        return RecordRow.filled(fields)

    @classmethod
    def filled(cls, fields: dict[str, Any]) -> RecordRow:
        """The row whose fields are ``fields`` (every field by name, nothing else; the
        caller hands the dict over and keeps no reference to it).

        The generated ``__init__`` of a frozen dataclass sets each of the 18 fields
        through ``object.__setattr__``, which cost a bound Action as much as one of its
        UPDATE statements (it builds three rows). That ``__init__`` does nothing else (no
        ``__post_init__``), so filling the instance dict gives the same frozen value;
        ``tests/paos/test_store.py`` checks every row the store builds this way against
        the row read back.
        """
        row = object.__new__(cls)
        row.__dict__.update(fields)
        return row

    def public(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
