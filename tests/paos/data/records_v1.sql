-- The records table of the first store schema (before paos/store/records.sql), kept to test
-- the upgrade and that older code opening an upgraded store changes nothing.
CREATE TABLE IF NOT EXISTS records (
    record_id        TEXT PRIMARY KEY,
    task_id          TEXT NOT NULL REFERENCES tasks(task_id),
    revision_id      TEXT NOT NULL REFERENCES revisions(revision_id),
    tool_id          TEXT NOT NULL,
    semantics        TEXT NOT NULL CHECK (semantics IN ('query', 'action', 'session')),
    ownership        TEXT CHECK (ownership IN ('task', 'shared', 'runtime')),
    caller_id        TEXT NOT NULL UNIQUE,
    arguments_sha256 TEXT NOT NULL,
    spec_sha256      TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN
                     ('intent', 'indeterminate', 'accepted', 'running', 'stopping',
                      'completed', 'failed', 'cancelled', 'stopped', 'unknown')),
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
    WHEN OLD.state IN ('completed', 'failed', 'cancelled', 'stopped', 'unknown')
BEGIN SELECT RAISE(ABORT, 'PAOS_RECORD_TERMINAL'); END;
CREATE TRIGGER IF NOT EXISTS record_identity_frozen BEFORE UPDATE ON records
    WHEN NEW.caller_id IS NOT OLD.caller_id OR NEW.task_id IS NOT OLD.task_id
      OR NEW.revision_id IS NOT OLD.revision_id OR NEW.tool_id IS NOT OLD.tool_id
      OR (OLD.invocation_id IS NOT NULL AND NEW.invocation_id IS NOT OLD.invocation_id)
BEGIN SELECT RAISE(ABORT, 'PAOS_RECORD_IDENTITY'); END;
CREATE TRIGGER IF NOT EXISTS records_kept BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'PAOS_RECORD_TERMINAL'); END;
