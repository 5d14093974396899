"""The AgentTask store: SQLite in WAL mode, every write in ``BEGIN IMMEDIATE``.

One store file is shared by every PAOS process on the machine. Invariants that must hold
across processes (one non-terminal task per slot, :mod:`paos.store.slots`; immutable
terminal records and bindings) are
enforced by the schema itself; this module turns their violations into typed errors.
A database that cannot be read or written (disk full, locked past the busy timeout, I/O
error) is :class:`StoreUnavailable`: no ``sqlite3`` exception leaves this module.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from doraforge.paos.binding import runtime_key
from doraforge.paos.errors import PaosError
from doraforge.paos.store import records as records_schema
from doraforge.paos.store import slots
from doraforge.paos.store.models import (
    TERMINAL_RECORD_STATES,
    TERMINAL_TASK_STATES,
    NewRecord,
    RecordRow,
    RevisionRow,
    TaskOwner,
    TaskRow,
)
from doraforge.paos.store.written import WrittenRows
from doraforge.wire.files import private_file

log = logging.getLogger(__name__)

_SCHEMA = files(__package__) / "schema.sql"
_BUSY_TIMEOUT_MS = 10_000


class StoreError(PaosError):
    """A store invariant refused the change; nothing was written."""


class TaskSlotTaken(StoreError):
    """Another non-terminal AgentTask holds the slot (the home's, or this runtime's)."""


class NotFound(StoreError, LookupError):
    """No row with that identity (``details``: ``kind`` and ``id``)."""


# Where a caller who named an unknown row finds the ids that exist.
_WHERE_IDS = {
    "task": "`doraforge task list` shows the tasks",
    "record": "`doraforge task get TASK_ID` shows a task's records",
    "binding": "a binding exists only with its task: `doraforge task list` shows the tasks",
}


class StoreUnavailable(StoreError):
    """The database could not be read or written; the failed call changed nothing.

    Retryable as far as the store is concerned. A caller that already sent something on
    the strength of an earlier write must not retry that (see ``paos.tasks``).
    """


def _sidecars(database: Path) -> tuple[Path, Path]:
    """The ``-wal`` and ``-shm`` files SQLite keeps beside ``database`` in WAL mode."""
    return database.with_name(database.name + "-wal"), database.with_name(database.name + "-shm")


def _unavailable(exc: sqlite3.Error) -> bool:
    # Constraint violations and misuse stay exceptions of their own; only faults of the
    # database file and its locks mean "not now".
    return isinstance(exc, sqlite3.OperationalError | sqlite3.InternalError) or (
        type(exc) is sqlite3.DatabaseError  # e.g. a malformed database image
    )


def _store_unavailable(what: str, exc: sqlite3.Error) -> StoreUnavailable:
    name = getattr(exc, "sqlite_errorname", None)
    return StoreUnavailable(
        "PAOS_STORE_UNAVAILABLE",
        f"the task store cannot {what}: {exc}",
        retryable=True,
        details={"sqlite_error": name} if name else None,
    )


@contextmanager
def _translated(what: str) -> Iterator[None]:
    """Turn a database fault inside the block into :class:`StoreUnavailable`."""
    try:
        yield
    except sqlite3.Error as exc:
        if not _unavailable(exc):
            raise
        raise _store_unavailable(what, exc) from exc


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` on one connection; ``ROLLBACK`` when the block or
    the commit fails, and a database fault raised as :class:`StoreUnavailable` (any other
    error goes on unchanged). A plain class, not a generator context manager inside
    :func:`_translated`: a bound Action passes here three times, and those two generators
    cost a third as much as the transaction's own ``BEGIN`` and ``COMMIT``.

    ``BEGIN`` and ``COMMIT`` go through one cursor kept for them (``Connection.execute``
    makes a new cursor per statement): the instance holds no transaction state, so one
    serves every transaction of its connection."""

    __slots__ = ("_cursor", "_db")

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._cursor = db.cursor()

    def __enter__(self) -> sqlite3.Connection:
        # BEGIN IMMEDIATE takes the write lock up front, so two writers never both read a
        # state and then both act on it.
        try:
            self._cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if not _unavailable(exc):
                raise
            raise _store_unavailable("write", exc) from exc
        return self._db

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> None:
        if kind is None:
            try:
                self._cursor.execute("COMMIT")
            except sqlite3.Error as failed:
                self._rollback()
                if not _unavailable(failed):
                    raise
                raise _store_unavailable("write", failed) from failed
            except BaseException:
                self._rollback()
                raise
            return
        self._rollback()
        if isinstance(exc, sqlite3.Error) and _unavailable(exc):
            raise _store_unavailable("write", exc) from exc

    def _rollback(self) -> None:
        # A failed COMMIT may leave the transaction open (SQLITE_BUSY) or SQLite may have
        # rolled it back already (SQLITE_FULL, SQLITE_IOERR). Either way the connection must
        # be usable again, and a failing ROLLBACK must not hide the error that caused it.
        if self._db.in_transaction:
            with suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")


# One encoder for every stored document: ``json.dumps`` with options builds a new encoder
# on each call, which cost as much as encoding a small result.
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False).encode


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return _ENCODE(value)


# The columns record_admitted and record_terminal set, in their statements' order.
_ADMITTED = ("state", "invocation_id", "attempt_id", "updated_at_ms")
_TERMINAL = ("state", "result_json", "error_json", "terminal_at_ms", "updated_at_ms")


@lru_cache(maxsize=32)
def _update_sql(names: tuple[str, ...], returning: bool) -> str:
    """The ``UPDATE`` of a record setting ``names`` (the last one ``updated_at_ms``), with
    the row returned when ``returning``."""
    assignments = ", ".join(f"{name} = ?" for name in names)
    tail = " RETURNING *" if returning else ""
    return f"UPDATE records SET {assignments} WHERE record_id = ?{tail}"


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _episode(task_id: str, text: Any) -> dict[str, Any] | None:
    # Experience is advisory: one unreadable episode must not cost the lessons of the rest.
    try:
        document = json.loads(text)
    except (TypeError, ValueError):
        document = None
    if not isinstance(document, dict):
        log.warning("episode of task %s is not a JSON object; passed over", task_id)
        return None
    return document


def _intent_row(record: NewRecord, now: int) -> RecordRow:
    """The record exactly as :meth:`AgentTaskStore.record_intent` inserted it (every
    column it does not set is NULL), built here: reading it back with ``RETURNING *``
    cost as much as the INSERT."""
    return RecordRow.filled(
        {
            "record_id": record.record_id,
            "task_id": record.task_id,
            "revision_id": record.revision_id,
            "tool_id": record.tool_id,
            "semantics": record.semantics,
            "ownership": record.ownership,
            "caller_id": record.caller_id,
            "arguments_sha256": record.arguments_sha256,
            "spec_sha256": record.spec_sha256,
            "state": "intent",
            "invocation_id": None,
            "attempt_id": None,
            "result": None,
            "error": None,
            "cancel": None,
            "created_at_ms": now,
            "updated_at_ms": now,
            "terminal_at_ms": None,
        }
    )


class AgentTaskStore:
    """Tasks, revisions, tool records, evidence index, verdicts and episodes."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock_ms: Callable[[], int] | None = None,
        busy_timeout_ms: int = _BUSY_TIMEOUT_MS,
    ) -> None:
        """Open (creating if needed) the store; :class:`StoreUnavailable` if it cannot."""
        self.path = Path(path)
        self._now = clock_ms or (lambda: time.time_ns() // 1_000_000)
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # SQLite gives the -wal and -shm it creates the database file's mode.
            private_file(self.path)
            for sidecar in _sidecars(self.path):
                if sidecar.exists():  # left by an earlier version, perhaps wider
                    private_file(sidecar)
        except OSError as exc:
            raise StoreUnavailable(
                "PAOS_STORE_UNAVAILABLE", f"the task store cannot open: {exc}", retryable=True
            ) from exc
        with _translated("open"):
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            # Idempotent DDL; executescript manages its own transaction.
            self._db.executescript(_SCHEMA.read_text(encoding="utf-8"))
            self._db.executescript(records_schema.SQL)
            records_schema.migrate(self._db)
            slots.migrate(self._db)
        self._written = WrittenRows(self._db)
        self._transaction = _Transaction(self._db)
        # The Action path's INSERT and UPDATEs return no rows: one cursor serves them all.
        self._statement = self._db.cursor()

    def close(self) -> None:
        """Close this process's connection."""
        self._db.close()

    def _write(self) -> _Transaction:
        """One write transaction (:class:`_Transaction`, which holds no state of its own:
        one instance serves every transaction of this connection)."""
        return self._transaction

    def _rows(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        with _translated("read"):
            return self._db.execute(sql, args).fetchall()

    def _first(self, sql: str, *args: Any) -> sqlite3.Row | None:
        with _translated("read"):
            row: sqlite3.Row | None = self._db.execute(sql, args).fetchone()
            return row

    def _one(self, kind: str, sql: str, identity: str) -> sqlite3.Row:
        # The message names what was looked up and where to find the valid ids: it reaches
        # an operator's terminal and an agent's tool result as it is.
        row = self._first(sql, identity)
        if row is None:
            raise NotFound(
                "PAOS_NOT_FOUND",
                f"no {kind} {identity!r} in this home; {_WHERE_IDS[kind]}",
                details={"kind": kind, "id": identity},
            )
        return row

    # ------------------------------------------------------------------ bindings

    def put_binding(self, binding_id: str, sha256: str, document: dict[str, Any]) -> None:
        """Store a frozen binding (insert-only)."""
        with self._write() as db:
            db.execute(
                "INSERT INTO bindings VALUES (?, ?, ?, ?)",
                (binding_id, sha256, _json(document), self._now()),
            )

    def binding(self, binding_id: str) -> dict[str, Any]:
        """The frozen binding document (as it was stored: always a JSON object)."""
        row = self._one("binding", "SELECT * FROM bindings WHERE binding_id = ?", binding_id)
        document: dict[str, Any] = _load(row[2])
        return document

    # ------------------------------------------------------------------ tasks

    def create_task(
        self,
        *,
        task_id: str,
        revision_id: str,
        binding_id: str,
        goal: str,
        contract: dict[str, Any],
    ) -> TaskRow:
        """Create a task and its revision 1 in the slot its binding's runtime takes under
        the home's task slots (:mod:`paos.store.slots`); :class:`TaskSlotTaken`
        ``PAOS_TASK_ACTIVE`` naming the task and runtime that hold the slot, if taken."""
        now = self._now()
        slot = slots.GLOBAL_SLOT
        try:
            with self._write() as db:
                # Mode and runtime are read under the write lock: no other process can
                # switch the mode or take the slot between this read and the insert.
                key = runtime_key(self.binding(binding_id))
                slot = slots.slot_for(slots.mode(db), key)
                db.execute(
                    "INSERT INTO tasks (task_id, binding_id, goal, contract_json, state,"
                    " created_at_ms, updated_at_ms, runtime_key, slot)"
                    " VALUES (?, ?, ?, ?, 'executing', ?, ?, ?, ?)",
                    (task_id, binding_id, goal, _json(contract), now, now, key, slot),
                )
                db.execute(
                    "INSERT INTO revisions VALUES (?, ?, 1, 'initial plan', NULL, ?)",
                    (revision_id, task_id, now),
                )
        except sqlite3.IntegrityError as exc:
            if slots.SLOT_VIOLATION in str(exc):
                raise self._slot_taken(slot) from exc
            raise StoreError("PAOS_STORE_CONFLICT", str(exc)) from exc
        return self.task(task_id)

    def _slot_taken(self, slot: str) -> TaskSlotTaken:
        """``PAOS_TASK_ACTIVE`` naming the task holding ``slot`` and the runtime it is on."""
        with _translated("read"):
            row = slots.holder(self._db, slot)
        held = row["task_id"] if row is not None else None
        document = self.binding(row["binding_id"]) if row is not None else {}
        mode = "per_runtime" if slot != slots.GLOBAL_SLOT else "global"
        which = f"AgentTask {held}" if held else "another AgentTask"
        # Under global slots any cell's task holds the slot: the details name its cell.
        cell = f" on skill {document.get('skill')}" if mode == "per_runtime" else ""
        return TaskSlotTaken(
            "PAOS_TASK_ACTIVE",
            f"{which} is still active{cell}; finalize it or cancel it first "
            f"(`doraforge task cancel {held or 'TASK_ID'}`)",
            details={
                "active_task_id": held,
                "task_slots": mode,
                "runtime_key": row["runtime_key"] if row is not None else None,
                "skill": document.get("skill"),
                "runtime_instance_id": document.get("runtime_instance"),
                "gateway_identity": (document.get("gateway_identity") or {}).get("instance_id"),
            },
        )

    def task_slots(self) -> slots.TaskSlots:
        """The home's task-slot mode: ``global`` (the default) or ``per_runtime``."""
        with _translated("read"):
            return slots.mode(self._db)

    def set_task_slots(self, mode: slots.TaskSlots) -> None:
        """Set the home's task-slot mode for every process on this store.

        Raises :class:`TaskSlotTaken` ``PAOS_TASK_SLOTS_BUSY`` (nothing changed) when
        ``global`` is asked while several tasks are non-terminal.
        """
        if mode not in slots.TASK_SLOTS:
            raise StoreError(
                "PAOS_TASK_SLOTS_INVALID", f"task slots are one of {list(slots.TASK_SLOTS)}"
            )
        try:
            with self._write() as db:
                slots.set_mode(db, mode)
        except sqlite3.IntegrityError as exc:
            active = [task.task_id for task in self.active_tasks()]
            raise TaskSlotTaken(
                "PAOS_TASK_SLOTS_BUSY",
                f"{len(active)} tasks are active, and global task slots allow one; "
                "finalize or cancel all but one first (`doraforge task list`)",
                details={"active_task_ids": active},
            ) from exc

    def task(self, task_id: str) -> TaskRow:
        """The task with ``task_id``."""
        return TaskRow.of(self._one("task", "SELECT * FROM tasks WHERE task_id = ?", task_id))

    def tasks(self, limit: int = 50) -> list[TaskRow]:
        """The most recent tasks, newest first."""
        rows = self._rows(
            "SELECT * FROM tasks ORDER BY created_at_ms DESC, rowid DESC LIMIT ?", limit
        )
        return [TaskRow.of(row) for row in rows]

    def active_task(self) -> TaskRow | None:
        """The oldest non-terminal task, if any (the only one under ``global`` task slots;
        with ``per_runtime`` ones use :meth:`active_tasks`)."""
        active = self.active_tasks()
        return active[0] if active else None

    def active_tasks(self) -> list[TaskRow]:
        """Every non-terminal task, oldest first (at most one per slot)."""
        rows = self._rows(
            "SELECT * FROM tasks WHERE state NOT IN ('succeeded', 'failed', 'cancelled')"
            " ORDER BY created_at_ms, rowid"
        )
        return [TaskRow.of(row) for row in rows]

    def active_task_of(self, skill: str) -> TaskRow | None:
        """The non-terminal task bound to ``skill``, or ``None``.

        Every active task is looked at, not only the oldest: with per-runtime task slots
        each cell holds one, and another cell's older task must not hide this one's.
        """
        for task in self.active_tasks():
            if self.binding(task.binding_id).get("skill") == skill:
                return task
        return None

    def transition(
        self,
        task_id: str,
        to: str,
        *,
        allowed_from: frozenset[str] | set[str],
        outcome: dict[str, Any] | None = None,
    ) -> TaskRow:
        """Move a task to ``to`` when its state is in ``allowed_from`` (checked atomically)."""
        now = self._now()
        terminal_at = now if to in TERMINAL_TASK_STATES else None
        try:
            with self._write() as db:
                state = self._one("task", "SELECT state FROM tasks WHERE task_id = ?", task_id)[0]
                if state not in allowed_from:
                    raise StoreError(
                        "PAOS_TASK_STATE",
                        f"task is {state}; {to} needs one of {sorted(allowed_from)}",
                        details={"state": state},
                    )
                db.execute(
                    "UPDATE tasks SET state = ?, outcome_json = COALESCE(?, outcome_json),"
                    " updated_at_ms = ?, terminal_at_ms = ? WHERE task_id = ?",
                    (to, _json(outcome), now, terminal_at, task_id),
                )
        except sqlite3.IntegrityError as exc:
            raise StoreError("PAOS_TASK_TERMINAL", f"task {task_id} is terminal") from exc
        return self.task(task_id)

    # ------------------------------------------------------------------ owners

    def now_ms(self) -> int:
        """This store's clock (milliseconds since the epoch; a test's fake one)."""
        return self._now()

    def own_task(self, task_id: str, owner_id: str) -> None:
        """Record ``owner_id`` as the holder of ``task_id``, active as of now."""
        with self._write() as db:
            db.execute(
                "INSERT OR REPLACE INTO task_owners VALUES (?, ?, ?)",
                (task_id, owner_id, self._now()),
            )

    def touch_task(self, task_id: str) -> None:
        """Its owner acted on ``task_id`` now (a task nobody owns is left alone)."""
        with self._write() as db:
            db.execute(
                "UPDATE task_owners SET last_activity_ms = ? WHERE task_id = ?",
                (self._now(), task_id),
            )

    def owned_active_tasks(self) -> list[TaskOwner]:
        """The owners of every non-terminal task that has one, oldest task first."""
        rows = self._rows(
            "SELECT o.* FROM task_owners o JOIN tasks t ON t.task_id = o.task_id"
            " WHERE t.state NOT IN ('succeeded', 'failed', 'cancelled')"
            " ORDER BY t.created_at_ms, t.rowid"
        )
        return [TaskOwner(row[0], row[1], row[2]) for row in rows]

    def task_owner(self, task_id: str) -> TaskOwner | None:
        """Who holds ``task_id``, if anyone recorded it."""
        row = self._first("SELECT * FROM task_owners WHERE task_id = ?", task_id)
        return None if row is None else TaskOwner(row[0], row[1], row[2])

    # ------------------------------------------------------------------ revisions

    def revisions(self, task_id: str) -> list[RevisionRow]:
        """The task's revisions, oldest first."""
        rows = self._rows("SELECT * FROM revisions WHERE task_id = ? ORDER BY ordinal", task_id)
        return [RevisionRow.of(row) for row in rows]

    def current_revision(self, task_id: str) -> RevisionRow:
        """The latest revision of the task."""
        return self.revisions(task_id)[-1]

    def begin_revision(self, task_id: str, revision_id: str, reason: str) -> RevisionRow:
        """Append a revision after a recovery verdict (``awaiting_replan`` → ``executing``)."""
        now = self._now()
        with self._write() as db:
            row = self._one(
                "task", "SELECT state, replans_used FROM tasks WHERE task_id = ?", task_id
            )
            if row[0] != "awaiting_replan":
                raise StoreError("PAOS_TASK_STATE", f"task is {row[0]}, not awaiting_replan")
            ordinal = db.execute(
                "SELECT MAX(ordinal) FROM revisions WHERE task_id = ?", (task_id,)
            ).fetchone()[0]
            db.execute(
                "INSERT INTO revisions VALUES (?, ?, ?, ?, NULL, ?)",
                (revision_id, task_id, ordinal + 1, reason, now),
            )
            db.execute(
                "UPDATE tasks SET state = 'executing', replans_used = replans_used + 1,"
                " updated_at_ms = ? WHERE task_id = ?",
                (now, task_id),
            )
        return self.current_revision(task_id)

    def set_verdict(self, revision_id: str, verdict: dict[str, Any]) -> None:
        """Record a revision's semantic verdict (once)."""
        try:
            with self._write() as db:
                db.execute(
                    "UPDATE revisions SET verdict_json = ? WHERE revision_id = ?",
                    (_json(verdict), revision_id),
                )
        except sqlite3.IntegrityError as exc:
            raise StoreError("PAOS_REVISION_IMMUTABLE", "the verdict is already set") from exc

    # ------------------------------------------------------------------ records

    def record_intent(self, record: NewRecord) -> RecordRow:
        """Persist an intent (and its caller_id) before anything is sent to the Gateway."""
        now = self._now()
        try:
            self._insert_intent(record, now)
        except sqlite3.IntegrityError as exc:  # a key taken, an unknown task, a bad value
            raise StoreError(
                "PAOS_RECORD_REFUSED",
                f"record {record.record_id} was not written: {exc}",
                details={"record_id": record.record_id, "task_id": record.task_id},
            ) from exc
        row = _intent_row(record, now)
        self._written.keep(row)
        return row

    def _insert_intent(self, record: NewRecord, now: int) -> None:
        with self._write():
            self._statement.execute(
                "INSERT INTO records (record_id, task_id, revision_id, tool_id, semantics,"
                " ownership, caller_id, arguments_sha256, spec_sha256, state,"
                " created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'intent', ?, ?)",
                (
                    record.record_id,
                    record.task_id,
                    record.revision_id,
                    record.tool_id,
                    record.semantics,
                    record.ownership,
                    record.caller_id,
                    record.arguments_sha256,
                    record.spec_sha256,
                    now,
                    now,
                ),
            )

    def record_admitted(
        self, record_id: str, invocation_id: str, attempt_id: str, phase: str
    ) -> RecordRow:
        """Keep the Gateway's invocation and attempt ids the moment they are known."""
        state = phase if phase in ("accepted", "running", "stopping") else "accepted"
        return self._update(record_id, _ADMITTED, (state, invocation_id, attempt_id, self._now()))

    def record_phase(self, record_id: str, phase: str) -> RecordRow:
        """Move a live record to a later non-terminal phase."""
        return self._update(record_id, ("state", "updated_at_ms"), (phase, self._now()))

    def record_indeterminate(self, record_id: str, error: dict[str, Any]) -> RecordRow:
        """A timeout or transport error: the remote state is unknown, never re-sent."""
        return self._update(
            record_id,
            ("state", "error_json", "updated_at_ms"),
            ("indeterminate", _json(error), self._now()),
        )

    def record_cancel_request(self, record_id: str, request: dict[str, Any]) -> RecordRow:
        """A cancel/stop *request* and how the Gateway answered it; never a stop."""
        return self._update(
            record_id, ("cancel_json", "updated_at_ms"), (_json(request), self._now())
        )

    def record_terminal(
        self,
        record_id: str,
        state: str,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> RecordRow:
        """Close a record with its terminal fact; the schema refuses any later change."""
        if state not in TERMINAL_RECORD_STATES:
            raise StoreError("PAOS_RECORD_STATE", f"{state} is not a terminal record state")
        now = self._now()
        values = (state, _json(result), _json(error), now, now)
        return self._update(record_id, _TERMINAL, values)

    def _update(
        self, record_id: str, columns: tuple[str, ...], values: tuple[Any, ...]
    ) -> RecordRow:
        """Set one record's ``columns`` (``updated_at_ms`` last) to ``values``; the row as
        written.

        The row is this connection's last one of the record (:class:`WrittenRows`) with
        ``values`` over it when nobody else has committed since; otherwise it is read back
        in the same statement (``RETURNING *``).
        """
        args = (*values, record_id)
        try:
            with self._write() as db:
                known = self._written.exact(record_id)
                if (
                    known is not None
                    and self._statement.execute(_update_sql(columns, False), args).rowcount
                ):
                    written = known.updated(columns, values)
                else:
                    row = db.execute(_update_sql(columns, True), args).fetchone()
                    if row is None:
                        raise NotFound(
                            "PAOS_NOT_FOUND",
                            f"no record {record_id!r} in this home; {_WHERE_IDS['record']}",
                            details={"kind": "record", "id": record_id},
                        )
                    written = RecordRow.of(row)
        except sqlite3.IntegrityError as exc:
            code = "PAOS_RECORD_TERMINAL" if "TERMINAL" in str(exc) else "PAOS_RECORD_IDENTITY"
            raise StoreError(code, f"record {record_id} cannot change: {exc}") from exc
        self._written.keep(written)
        return written

    def record(self, record_id: str) -> RecordRow:
        """The record with ``record_id``."""
        return RecordRow.of(
            self._one("record", "SELECT * FROM records WHERE record_id = ?", record_id)
        )

    def record_by_caller(self, caller_id: str) -> RecordRow | None:
        """The record admitted under ``caller_id``, if any."""
        row = self._first("SELECT * FROM records WHERE caller_id = ?", caller_id)
        return None if row is None else RecordRow.of(row)

    def records(self, task_id: str, revision_id: str | None = None) -> list[RecordRow]:
        """A task's records (optionally of one revision) in creation order."""
        sql = "SELECT * FROM records WHERE task_id = ?"
        args: tuple[Any, ...] = (task_id,)
        if revision_id is not None:
            sql += " AND revision_id = ?"
            args = (task_id, revision_id)
        rows = self._rows(sql + " ORDER BY created_at_ms, rowid", *args)
        return [RecordRow.of(row) for row in rows]

    # ------------------------------------------------------------------ evidence, verdicts

    def add_evidence(self, artifact: dict[str, Any]) -> None:
        """Index one evidence artifact (insert-only; the bytes live on disk)."""
        with self._write() as db:
            db.execute(
                "INSERT INTO evidence VALUES (?, ?, ?, ?, ?, ?)",
                (
                    artifact["artifact_id"],
                    artifact["task_id"],
                    artifact["revision_id"],
                    artifact.get("record_id"),
                    _json(artifact),
                    self._now(),
                ),
            )

    def evidence(self, task_id: str) -> list[dict[str, Any]]:
        """Every artifact of the task, in capture order."""
        rows = self._rows(
            "SELECT document_json FROM evidence WHERE task_id = ? ORDER BY created_at_ms, rowid",
            task_id,
        )
        return [_load(row[0]) for row in rows]

    def add_verification(
        self, attempt_id: str, task_id: str, revision_id: str, document: dict[str, Any]
    ) -> None:
        """Append one verification attempt (insert-only)."""
        with self._write() as db:
            db.execute(
                "INSERT INTO verifications VALUES (?, ?, ?, ?, ?)",
                (attempt_id, task_id, revision_id, _json(document), self._now()),
            )

    def verifications(self, task_id: str) -> list[dict[str, Any]]:
        """Every verification attempt of the task."""
        rows = self._rows(
            "SELECT document_json FROM verifications WHERE task_id = ? ORDER BY rowid", task_id
        )
        return [_load(row[0]) for row in rows]

    def add_episode(
        self, task_id: str, skill: str, version: str, episode: Mapping[str, Any]
    ) -> None:
        """Keep one redacted episode per terminal task; :class:`NotFound` for a task this
        store does not hold (a second episode of a task is ignored)."""
        try:
            with self._write() as db:
                db.execute(
                    "INSERT OR IGNORE INTO episodes VALUES (?, ?, ?, ?, ?)",
                    (task_id, skill, version, _json(episode), self._now()),
                )
        except sqlite3.IntegrityError as exc:  # the only constraint left: the task's key
            raise NotFound(
                "PAOS_NOT_FOUND",
                f"no task {task_id!r} in this home; {_WHERE_IDS['task']}",
                details={"kind": "task", "id": task_id},
            ) from exc

    def episodes(self, skill: str, version: str) -> list[dict[str, Any]]:
        """Episodes of one skill version, oldest first; a row that is not a JSON object
        (damaged outside this store) is passed over with a warning, never raised on."""
        rows = self._rows(
            "SELECT task_id, document_json FROM episodes WHERE skill = ? AND version = ?"
            " ORDER BY rowid",
            skill,
            version,
        )
        return [episode for row in rows if (episode := _episode(row[0], row[1])) is not None]
