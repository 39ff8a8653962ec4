-- Destinations (docs/operations.md, "Destinations (push to HTTP)"): inboxd
-- POSTs the events of the namespaces a destination serves to its URL, signed
-- as Standard Webhooks, through the ordinary claim path. Additive: new tables;
-- an older server neither reads nor delivers them.

-- One HTTP endpoint and its circuit breaker. `status` (named apart from the
-- events' `state`) is 'active' (its events are claimed) or 'paused' (the
-- breaker is open: its events wait, and one is tried at next_try_at). `breaker_opens` counts the opening and each try
-- since, so the interval between tries grows; an answer resets it.
CREATE TABLE inbox_destinations (
    name                       text        PRIMARY KEY,
    url                        text        NOT NULL,
    namespace_pattern          text        NOT NULL,
    like_pattern               text        NOT NULL,
    secret                     text        NOT NULL,
    timeout_ms                 integer     NOT NULL,
    max_attempts               integer     NOT NULL DEFAULT 0,
    backoff_base_ms            bigint      NOT NULL DEFAULT 0,
    backoff_cap_ms             bigint      NOT NULL DEFAULT 0,
    forward_signature_metadata boolean     NOT NULL DEFAULT false,
    concurrency                integer     NOT NULL DEFAULT 8,
    status                     text        NOT NULL DEFAULT 'active',
    paused_reason              text        NOT NULL DEFAULT '',
    next_try_at                timestamptz,
    consecutive_failures       integer     NOT NULL DEFAULT 0,
    breaker_opens              integer     NOT NULL DEFAULT 0,
    created_at                 timestamptz NOT NULL,
    created_by                 text        NOT NULL,
    CONSTRAINT inbox_destinations_status_known CHECK (status IN ('active', 'paused')),
    CONSTRAINT inbox_destinations_paused_has_next_try CHECK ((status = 'paused') = (next_try_at IS NOT NULL)),
    CONSTRAINT inbox_destinations_timeout_bounded CHECK (timeout_ms BETWEEN 1000 AND 300000),
    CONSTRAINT inbox_destinations_concurrency_bounded CHECK (concurrency BETWEEN 1 AND 100)
);

-- Every POST, as its answer came (or did not): a fact about the outside
-- world, so no foreign key to the event (it outlives a destination's
-- removal); retention deletes the attempts of events gone once they are
-- older than INBOXD_RETENTION.
CREATE TABLE inbox_delivery_attempts (
    id               bigserial   PRIMARY KEY,
    destination      text        NOT NULL,
    namespace        text        NOT NULL,
    event_key        text        NOT NULL,
    webhook_id       text        NOT NULL,
    attempt          integer     NOT NULL,
    fencing_token    bigint      NOT NULL,
    attempted_at     timestamptz NOT NULL,
    status_code      integer     NOT NULL DEFAULT 0,
    latency_ms       double precision NOT NULL,
    error            text        NOT NULL DEFAULT '',
    response_excerpt bytea       NOT NULL DEFAULT ''::bytea,
    outcome          text        NOT NULL,
    CONSTRAINT inbox_delivery_attempts_outcome_known
        CHECK (outcome IN ('completed', 'retry', 'dead-lettered', 'fenced'))
);
CREATE INDEX inbox_delivery_attempts_event ON inbox_delivery_attempts (namespace, event_key, id);
CREATE INDEX inbox_delivery_attempts_destination ON inbox_delivery_attempts (destination, id DESC);
-- Retention deletes the attempts of events gone, oldest first (store/queries/destinations.sql).
CREATE INDEX inbox_delivery_attempts_attempted_at ON inbox_delivery_attempts (attempted_at);

-- Who created, resumed or deleted a destination, when and why.
CREATE TABLE inbox_destination_changes (
    id         bigserial   PRIMARY KEY,
    name       text        NOT NULL,
    actor      text        NOT NULL,
    reason     text        NOT NULL,
    change     text        NOT NULL,
    changed_at timestamptz NOT NULL
);
