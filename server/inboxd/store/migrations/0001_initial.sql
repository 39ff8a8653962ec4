-- The inbox: one row per (namespace, event_key), plus the ledgers around it.
-- States and their columns are tied together by CHECK constraints, so a bug
-- in a transition fails loudly instead of leaving a row no claim can read.

CREATE TABLE inbox_events (
    namespace          text        NOT NULL,
    event_key          text        NOT NULL,
    event_type         text        NOT NULL,
    -- NULL only after payload retention dropped it from a COMPLETED row.
    payload            jsonb,
    metadata           jsonb       NOT NULL DEFAULT '{}',
    message_id         text        NOT NULL DEFAULT '',
    ordering_key       text        NOT NULL DEFAULT '',
    revision           bigint      NOT NULL DEFAULT 0,
    state              text        NOT NULL DEFAULT 'pending',
    accepted_at        timestamptz NOT NULL,
    -- When the event may first be claimed, or may be claimed again after a Fail.
    available_at       timestamptz NOT NULL,
    -- When a claimer should look at the row next: available_at while PENDING,
    -- the lease's expiry while PROCESSING, NULL once final. One column, so one
    -- partial index serves every Claim.
    due_at             timestamptz,
    updated_at         timestamptz NOT NULL,
    -- Claims counted so far; Release gives one back, Replay resets.
    attempt            integer     NOT NULL DEFAULT 0,
    -- The current claim while PROCESSING; the completing claim once COMPLETED,
    -- so a repeated Complete with it answers OK.
    claim_token        text,
    fencing_token      bigint,
    worker_id          text,
    lease_expires_at   timestamptz,
    completed_at       timestamptz,
    disposition        text,
    disposition_reason text,
    last_error         text,
    PRIMARY KEY (namespace, event_key),
    CONSTRAINT inbox_events_state_known
        CHECK (state IN ('pending', 'processing', 'completed', 'dead_lettered')),
    CONSTRAINT inbox_events_due_while_open
        CHECK ((state IN ('pending', 'processing')) = (due_at IS NOT NULL)),
    CONSTRAINT inbox_events_processing_has_claim
        CHECK (state <> 'processing' OR (claim_token IS NOT NULL AND fencing_token IS NOT NULL
                                         AND lease_expires_at IS NOT NULL AND due_at = lease_expires_at)),
    CONSTRAINT inbox_events_pending_has_no_claim
        CHECK (state <> 'pending' OR (claim_token IS NULL AND lease_expires_at IS NULL)),
    CONSTRAINT inbox_events_completed_has_disposition
        CHECK ((state = 'completed') = (completed_at IS NOT NULL AND disposition IS NOT NULL)),
    CONSTRAINT inbox_events_disposition_known
        CHECK (disposition IS NULL OR disposition IN ('applied', 'ignored')),
    CONSTRAINT inbox_events_ignored_has_reason
        CHECK (disposition IS DISTINCT FROM 'ignored' OR coalesce(disposition_reason, '') <> ''),
    CONSTRAINT inbox_events_payload_kept_until_completed
        CHECK (payload IS NOT NULL OR state = 'completed'),
    CONSTRAINT inbox_events_attempt_not_negative CHECK (attempt >= 0)
);

-- Claim: the oldest due open rows. Partial, so completed history costs nothing.
CREATE INDEX inbox_events_due ON inbox_events (due_at) WHERE due_at IS NOT NULL;
-- Retention and ListEvents by state.
CREATE INDEX inbox_events_completed_at ON inbox_events (completed_at) WHERE state = 'completed';
CREATE INDEX inbox_events_dead_lettered ON inbox_events (namespace, updated_at) WHERE state = 'dead_lettered';

-- Strictly increasing across all claims, on every replica.
CREATE SEQUENCE inbox_fencing_tokens AS bigint;

-- Every claim ever issued, and how it ended: the fence for action outcomes
-- from superseded claims, and the history operators read.
CREATE TABLE inbox_claims (
    fencing_token bigint      PRIMARY KEY,
    namespace     text        NOT NULL,
    event_key     text        NOT NULL,
    claim_token   text        NOT NULL UNIQUE,
    worker_id     text        NOT NULL DEFAULT '',
    attempt       integer     NOT NULL,
    claimed_at    timestamptz NOT NULL,
    ended_at      timestamptz,
    outcome       text,
    CONSTRAINT inbox_claims_outcome_known CHECK (outcome IS NULL OR outcome IN
        ('completed', 'failed', 'released', 'expired', 'dead_lettered', 'replayed')),
    CONSTRAINT inbox_claims_ended_with_outcome CHECK ((ended_at IS NULL) = (outcome IS NULL)),
    FOREIGN KEY (namespace, event_key) REFERENCES inbox_events ON DELETE CASCADE
);
CREATE INDEX inbox_claims_event ON inbox_claims (namespace, event_key);

-- The ledger of external actions taken for an event.
CREATE TABLE inbox_actions (
    namespace       text        NOT NULL,
    event_key       text        NOT NULL,
    action          text        NOT NULL,
    state           text        NOT NULL,
    idempotency_key text        NOT NULL UNIQUE,
    external_ref    text        NOT NULL DEFAULT '',
    detail          text        NOT NULL DEFAULT '',
    fencing_token   bigint      NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (namespace, event_key, action),
    CONSTRAINT inbox_actions_state_known
        CHECK (state IN ('intended', 'succeeded', 'failed', 'unknown')),
    FOREIGN KEY (namespace, event_key) REFERENCES inbox_events ON DELETE CASCADE
);
CREATE INDEX inbox_actions_unresolved ON inbox_actions (namespace, state, updated_at)
    WHERE state IN ('intended', 'unknown');

-- Copies that arrived under an existing key with another type or payload.
CREATE TABLE inbox_conflicts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace   text        NOT NULL,
    event_key   text        NOT NULL,
    event_type  text        NOT NULL,
    payload     jsonb       NOT NULL,
    metadata    jsonb       NOT NULL DEFAULT '{}',
    received_at timestamptz NOT NULL,
    FOREIGN KEY (namespace, event_key) REFERENCES inbox_events ON DELETE CASCADE
);
CREATE INDEX inbox_conflicts_event ON inbox_conflicts (namespace, event_key);

-- The audit trail of operator replays. No foreign key: the audit outlives the row.
CREATE TABLE inbox_replays (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace    text        NOT NULL,
    event_key    text        NOT NULL,
    actor        text        NOT NULL,
    reason       text        NOT NULL,
    state_before text        NOT NULL,
    replayed_at  timestamptz NOT NULL
);
CREATE INDEX inbox_replays_event ON inbox_replays (namespace, event_key);
