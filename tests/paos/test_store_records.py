"""The records table refuses bad rows in the database, stores of the first schema are
upgraded on open, and the rows the store returns without reading them back are the rows
in the database."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Iterator
from importlib.resources import files
from pathlib import Path

import pytest

from doraforge.paos.store import AgentTaskStore, NewRecord, RecordRow, StoreError
from doraforge.paos.store import records as records_schema

RECORDS_V1 = (Path(__file__).parent / "data" / "records_v1.sql").read_text(encoding="utf-8")
SCHEMA = (files("doraforge.paos.store") / "schema.sql").read_text(encoding="utf-8")
COLUMNS = (
    "record_id, task_id, revision_id, tool_id, semantics, ownership, caller_id,"
    " arguments_sha256, spec_sha256, state, created_at_ms, updated_at_ms"
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AgentTaskStore]:
    store = AgentTaskStore(tmp_path / "paos.db")
    store.put_binding("bind-1", "sha", {"skill": "pick", "version": "1.0.0"})
    store.create_task(
        task_id="task-1", revision_id="rev-1", binding_id="bind-1", goal="g", contract={}
    )
    yield store
    store.close()


def intent(store: AgentTaskStore, record_id: str = "rec-1", **extra: str) -> RecordRow:
    fields = {
        "record_id": record_id,
        "task_id": "task-1",
        "revision_id": "rev-1",
        "tool_id": "arm.home",
        "semantics": "action",
        "caller_id": f"paos:task-1:{record_id}",
        "arguments_sha256": "a",
        "spec_sha256": "s",
        **extra,
    }
    return store.record_intent(NewRecord(**fields))


def raw_insert(
    db: sqlite3.Connection, record_id: str, semantics: str, ownership: str | None, state: str
) -> None:
    db.execute(
        f"INSERT INTO records ({COLUMNS})"
        " VALUES (?, 'task-1', 'rev-1', 't', ?, ?, ?, 'a', 's', ?, 1, 1)",
        (record_id, semantics, ownership, f"caller-{record_id}", state),
    )


def assert_refuses_bad_rows(path: Path) -> None:
    """What every records schema must refuse, written by a raw connection (another
    process, or code that does not go through the store)."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for semantics, ownership, state in [
            ("acton", None, "intent"),
            ("action", "someone", "intent"),
            ("action", None, "finished"),
        ]:
            with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
                raw_insert(db, "bad", semantics, ownership, state)
        raw_insert(db, "raw-1", "session", "shared", "running")
        with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
            db.execute("UPDATE records SET state = 'done' WHERE record_id = 'raw-1'")
        with pytest.raises(sqlite3.IntegrityError, match="PAOS_RECORD_IDENTITY"):
            db.execute("UPDATE records SET caller_id = 'other' WHERE record_id = 'raw-1'")
        db.execute("UPDATE records SET state = 'stopped' WHERE record_id = 'raw-1'")
        with pytest.raises(sqlite3.IntegrityError, match="PAOS_RECORD_TERMINAL"):
            db.execute("UPDATE records SET cancel_json = '{}' WHERE record_id = 'raw-1'")
        with pytest.raises(sqlite3.IntegrityError, match="PAOS_RECORD_TERMINAL"):
            db.execute("DELETE FROM records WHERE record_id = 'raw-1'")
        assert db.execute("SELECT state FROM records WHERE record_id = 'raw-1'").fetchone() == (
            "stopped",
        )
    finally:
        db.close()


def test_the_records_table_refuses_bad_rows_from_any_connection(store: AgentTaskStore) -> None:
    assert_refuses_bad_rows(store.path)


def test_the_store_refuses_a_record_of_unknown_semantics_or_ownership(
    store: AgentTaskStore,
) -> None:
    # Refused by the table's CHECKs, whichever error the store raises for it.
    with pytest.raises((sqlite3.IntegrityError, StoreError)):
        intent(store, "rec-x", semantics="acton")
    with pytest.raises((sqlite3.IntegrityError, StoreError)):
        intent(store, "rec-y", ownership="nobody")
    assert store.records("task-1") == []


def old_store(path: Path) -> None:
    """A store as the first schema wrote it, with a live and a terminal record."""
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(SCHEMA + RECORDS_V1)
    db.execute("INSERT INTO bindings VALUES ('bind-1', 'sha', '{\"skill\": \"pick\"}', 1)")
    db.execute(
        "INSERT INTO tasks (task_id, binding_id, goal, contract_json, state, created_at_ms,"
        " updated_at_ms) VALUES ('task-1', 'bind-1', 'g', '{}', 'executing', 1, 1)"
    )
    db.execute("INSERT INTO revisions VALUES ('rev-1', 'task-1', 1, 'initial', NULL, 1)")
    # Same created_at_ms: only the rowid orders them, and the upgrade must keep it.
    raw_insert(db, "old-b", "action", None, "intent")
    raw_insert(db, "old-a", "query", None, "intent")
    db.execute(
        "UPDATE records SET state = 'completed', result_json = '{\"status\":\"succeeded\"}',"
        " terminal_at_ms = 2 WHERE record_id = 'old-a'"
    )
    db.close()


def schema_sql(path: Path) -> dict[str, str]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT name, sql FROM sqlite_master WHERE tbl_name = 'records' AND sql IS NOT NULL"
        ).fetchall()
    finally:
        db.close()
    return dict(rows)


def test_a_store_of_the_first_schema_is_upgraded_and_keeps_its_records(tmp_path: Path) -> None:
    path = tmp_path / "paos.db"
    old_store(path)
    assert "state IN" in schema_sql(path)["records"]
    store = AgentTaskStore(path)
    try:
        assert [r.record_id for r in store.records("task-1")] == ["old-b", "old-a"]
        assert store.record("old-a").result == {"status": "succeeded"}
        with pytest.raises(StoreError) as caught:
            store.record_terminal("old-a", "failed")
        assert caught.value.code == "PAOS_RECORD_TERMINAL"
        store.record_admitted("old-b", "inv-1", "att-1", "running")
    finally:
        store.close()
    upgraded = schema_sql(path)
    assert set(upgraded) == {
        "records",
        "records_by_task",
        "terminal_record_frozen",
        "record_identity_frozen",
        "records_kept",
    }
    assert "state IN" not in upgraded["records"]
    assert "semantics IN" not in upgraded["records"]
    assert_refuses_bad_rows(path)


def test_older_code_opening_an_upgraded_store_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "paos.db"
    AgentTaskStore(path).close()
    before = schema_sql(path)
    older = sqlite3.connect(path, isolation_level=None)
    older.executescript(SCHEMA + RECORDS_V1)  # what the first schema's code runs on open
    older.close()
    assert schema_sql(path) == before
    db = sqlite3.connect(path)
    try:
        assert records_schema.current(db)
    finally:
        db.close()


def test_two_stores_opening_an_old_store_upgrade_it_once(tmp_path: Path) -> None:
    path = tmp_path / "paos.db"
    old_store(path)
    first, second = AgentTaskStore(path), AgentTaskStore(path)
    try:
        assert [r.record_id for r in second.records("task-1")] == ["old-b", "old-a"]
    finally:
        first.close()
        second.close()


def test_every_row_a_write_returns_is_the_row_in_the_database(store: AgentTaskStore) -> None:
    steps: list[Callable[[], RecordRow]] = [
        lambda: intent(store),
        lambda: store.record_indeterminate("rec-1", {"code": "PAOS_FORGE_TIMEOUT"}),
        lambda: store.record_admitted("rec-1", "inv-1", "att-1", "accepted"),
        lambda: store.record_phase("rec-1", "running"),
        lambda: store.record_cancel_request("rec-1", {"command": "cancel", "at_ms": 3}),
        lambda: store.record_terminal(
            "rec-1", "cancelled", result={"status": "cancelled", "outputs": {"n": (1, 2)}}
        ),
    ]
    for step in steps:
        returned = step()
        assert returned == store.record("rec-1")
    assert returned.result == {"status": "cancelled", "outputs": {"n": [1, 2]}}
    with pytest.raises(dataclasses.FrozenInstanceError):
        returned.state = "failed"  # type: ignore[misc]


def test_a_write_after_another_process_wrote_the_record_returns_both_writes(
    store: AgentTaskStore,
) -> None:
    intent(store)
    store.record_admitted("rec-1", "inv-1", "att-1", "running")
    other = AgentTaskStore(store.path)
    try:
        other.record_cancel_request("rec-1", {"command": "cancel", "at_ms": 7})
    finally:
        other.close()
    ended = store.record_terminal("rec-1", "cancelled", result={"status": "cancelled"})
    assert ended.cancel == {"command": "cancel", "at_ms": 7}
    assert ended == store.record("rec-1")


def test_a_raw_write_by_another_connection_is_never_hidden(store: AgentTaskStore) -> None:
    intent(store)
    store.record_admitted("rec-1", "inv-1", "att-1", "accepted")
    raw = sqlite3.connect(store.path, isolation_level=None)
    try:
        raw.execute("UPDATE records SET cancel_json = '{\"by\":\"raw\"}' WHERE record_id = 'rec-1'")
    finally:
        raw.close()
    written = store.record_phase("rec-1", "running")
    assert written.cancel == {"by": "raw"}
    assert written == store.record("rec-1")
