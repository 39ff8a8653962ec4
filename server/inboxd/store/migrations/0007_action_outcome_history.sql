-- Every record an action received, in order, including those that changed
-- nothing: an outcome from a claim older than the one that last wrote the
-- action is kept here and never moves the action's state (DESIGN, Fine print,
-- Actions). `applied` says whether the record moved the ledger row.
CREATE TABLE inbox_action_history (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace     text        NOT NULL,
    event_key     text        NOT NULL,
    action        text        NOT NULL,
    state         text        NOT NULL,
    external_ref  text        NOT NULL DEFAULT '',
    detail        text        NOT NULL DEFAULT '',
    fencing_token bigint      NOT NULL,
    applied       boolean     NOT NULL,
    recorded_at   timestamptz NOT NULL,
    CONSTRAINT inbox_action_history_state_known
        CHECK (state IN ('intended', 'succeeded', 'failed', 'unknown')),
    FOREIGN KEY (namespace, event_key) REFERENCES inbox_events ON DELETE CASCADE
);
CREATE INDEX inbox_action_history_event ON inbox_action_history (namespace, event_key, action);
