-- PAOS AgentTask store. Invariants live here, not only in Python:
--   * at most one non-terminal task per slot (a unique partial index on tasks.slot,
--     created by paos/store/slots.py, which also upgrades older stores): the slot is
--     'global' or the task's runtime, as the home's task_slots setting says;
--   * bindings, revisions' identity, evidence, verification attempts and episodes are
--     append-only; a terminal ToolExecutionRecord never changes again.
CREATE TABLE IF NOT EXISTS bindings (
    binding_id     TEXT PRIMARY KEY,
    sha256         TEXT NOT NULL,
    document_json  TEXT NOT NULL,
    created_at_ms  INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS bindings_frozen BEFORE UPDATE ON bindings
BEGIN SELECT RAISE(ABORT, 'PAOS_BINDING_IMMUTABLE'); END;
CREATE TRIGGER IF NOT EXISTS bindings_kept BEFORE DELETE ON bindings
BEGIN SELECT RAISE(ABORT, 'PAOS_BINDING_IMMUTABLE'); END;

CREATE TABLE IF NOT EXISTS tasks (
    task_id        TEXT PRIMARY KEY,
    binding_id     TEXT NOT NULL REFERENCES bindings(binding_id),
    goal           TEXT NOT NULL,
    contract_json  TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN
                   ('executing', 'awaiting_replan', 'cancelling', 'succeeded', 'failed', 'cancelled')),
    replans_used   INTEGER NOT NULL DEFAULT 0,
    outcome_json   TEXT,
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    terminal_at_ms INTEGER,
    -- The runtime the binding occupies (paos.binding.runtime_key) and the slot the task
    -- holds; NULL only in terminal rows written before slots existed.
    runtime_key    TEXT,
    slot           TEXT
);
-- Home-level settings every process on this store obeys (task_slots: global | per_runtime).
CREATE TABLE IF NOT EXISTS store_settings (
    key            TEXT PRIMARY KEY,
    value          TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS terminal_task_frozen BEFORE UPDATE ON tasks
    WHEN OLD.state IN ('succeeded', 'failed', 'cancelled')
BEGIN SELECT RAISE(ABORT, 'PAOS_TASK_TERMINAL'); END;

CREATE TABLE IF NOT EXISTS revisions (
    revision_id    TEXT PRIMARY KEY,
    task_id        TEXT NOT NULL REFERENCES tasks(task_id),
    ordinal        INTEGER NOT NULL,
    reason         TEXT NOT NULL,
    verdict_json   TEXT,
    created_at_ms  INTEGER NOT NULL,
    UNIQUE (task_id, ordinal)
);
CREATE TRIGGER IF NOT EXISTS revision_identity_frozen BEFORE UPDATE ON revisions
    WHEN NEW.task_id IS NOT OLD.task_id OR NEW.ordinal IS NOT OLD.ordinal
      OR NEW.reason IS NOT OLD.reason OR OLD.verdict_json IS NOT NULL
BEGIN SELECT RAISE(ABORT, 'PAOS_REVISION_IMMUTABLE'); END;
CREATE TRIGGER IF NOT EXISTS revisions_kept BEFORE DELETE ON revisions
BEGIN SELECT RAISE(ABORT, 'PAOS_REVISION_IMMUTABLE'); END;

-- The records table, its index and triggers: records.sql (versioned, paos/store/records.py).

CREATE TABLE IF NOT EXISTS evidence (
    artifact_id    TEXT PRIMARY KEY,
    task_id        TEXT NOT NULL REFERENCES tasks(task_id),
    revision_id    TEXT NOT NULL,
    record_id      TEXT,
    document_json  TEXT NOT NULL,
    created_at_ms  INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS evidence_frozen BEFORE UPDATE ON evidence
BEGIN SELECT RAISE(ABORT, 'PAOS_EVIDENCE_IMMUTABLE'); END;

CREATE TABLE IF NOT EXISTS verifications (
    attempt_id     TEXT PRIMARY KEY,
    task_id        TEXT NOT NULL REFERENCES tasks(task_id),
    revision_id    TEXT NOT NULL REFERENCES revisions(revision_id),
    document_json  TEXT NOT NULL,
    created_at_ms  INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS verifications_frozen BEFORE UPDATE ON verifications
BEGIN SELECT RAISE(ABORT, 'PAOS_VERIFICATION_IMMUTABLE'); END;

CREATE TABLE IF NOT EXISTS episodes (
    task_id        TEXT PRIMARY KEY REFERENCES tasks(task_id),
    skill          TEXT NOT NULL,
    version        TEXT NOT NULL,
    document_json  TEXT NOT NULL,
    created_at_ms  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS episodes_by_skill ON episodes (skill, version);

-- Who opened a task on an agent's behalf (a registry instance, see paos.owners) and when
-- that owner last acted on it: a task whose owner stopped or went idle is ended at the
-- next start instead of holding its slot.
CREATE TABLE IF NOT EXISTS task_owners (
    task_id          TEXT PRIMARY KEY REFERENCES tasks(task_id),
    owner_id         TEXT NOT NULL,
    last_activity_ms INTEGER NOT NULL
);
