-- ToolExecutionRecords: one row per bound Query, Action or Session. Every bound Action
-- writes this table three times, so its constraints are written in the forms SQLite
-- evaluates cheaply, with the same meaning as the first schema's:
--   * each CHECK is a chain of equalities, not `x IN (...)`: a constant IN list of more
--     than two values is built into a temporary b-tree each time a statement runs;
--   * the identity trigger fires only on an UPDATE that sets one of the columns it
--     guards (a column an UPDATE does not set keeps its value, so nothing is lost).
-- paos/store/records.py upgrades a table of the first schema to this one.
CREATE TABLE IF NOT EXISTS records (
    record_id        TEXT PRIMARY KEY,
    task_id          TEXT NOT NULL REFERENCES tasks(task_id),
    revision_id      TEXT NOT NULL REFERENCES revisions(revision_id),
    tool_id          TEXT NOT NULL,
    semantics        TEXT NOT NULL CHECK (
                     semantics = 'query' OR semantics = 'action' OR semantics = 'session'),
    ownership        TEXT CHECK (
                     ownership = 'task' OR ownership = 'shared' OR ownership = 'runtime'),
    caller_id        TEXT NOT NULL UNIQUE,
    arguments_sha256 TEXT NOT NULL,
    spec_sha256      TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (
                     state = 'intent' OR state = 'indeterminate' OR state = 'accepted'
                     OR state = 'running' OR state = 'stopping' OR state = 'completed'
                     OR state = 'failed' OR state = 'cancelled' OR state = 'stopped'
                     OR state = 'unknown'),
    invocation_id    TEXT,
    attempt_id       TEXT,
    result_json      TEXT,
    error_json       TEXT,
    cancel_json      TEXT,
    created_at_ms    INTEGER NOT NULL,
    updated_at_ms    INTEGER NOT NULL,
    terminal_at_ms   INTEGER
);
CREATE INDEX IF NOT EXISTS records_by_task ON records (task_id, created_at_ms);
CREATE TRIGGER IF NOT EXISTS terminal_record_frozen BEFORE UPDATE ON records
    WHEN OLD.state = 'completed' OR OLD.state = 'failed' OR OLD.state = 'cancelled'
      OR OLD.state = 'stopped' OR OLD.state = 'unknown'
BEGIN SELECT RAISE(ABORT, 'PAOS_RECORD_TERMINAL'); END;
CREATE TRIGGER IF NOT EXISTS record_identity_frozen
    BEFORE UPDATE OF caller_id, task_id, revision_id, tool_id, invocation_id ON records
    WHEN NEW.caller_id IS NOT OLD.caller_id OR NEW.task_id IS NOT OLD.task_id
      OR NEW.revision_id IS NOT OLD.revision_id OR NEW.tool_id IS NOT OLD.tool_id
      OR (OLD.invocation_id IS NOT NULL AND NEW.invocation_id IS NOT OLD.invocation_id)
BEGIN SELECT RAISE(ABORT, 'PAOS_RECORD_IDENTITY'); END;
CREATE TRIGGER IF NOT EXISTS records_kept BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'PAOS_RECORD_TERMINAL'); END;
