-- Conflicting copies of a key are bounded: the first 20 are kept whole (as
-- before, in inbox_conflicts), the rest only counted here, with the digest of
-- the last one. A sender who repeats one key with ever new payloads could
-- otherwise grow the table, and every read of the event, without bound (200
-- copies of 100 KB made a 20 MB GetEvent answer).
CREATE TABLE inbox_conflict_overflow (
    namespace           text        NOT NULL,
    event_key           text        NOT NULL,
    copies              bigint      NOT NULL CHECK (copies > 0),
    first_received_at   timestamptz NOT NULL,
    last_received_at    timestamptz NOT NULL,
    -- SHA-256 of the last counted copy's payload as stored (jsonb's text).
    last_payload_sha256 bytea       NOT NULL,
    PRIMARY KEY (namespace, event_key),
    FOREIGN KEY (namespace, event_key) REFERENCES inbox_events ON DELETE CASCADE
);

-- Each kept copy's digest and size, written with it, so that a read can tell
-- copies apart without loading their payloads (NULL for copies kept before).
ALTER TABLE inbox_conflicts ADD COLUMN payload_sha256 bytea, ADD COLUMN payload_bytes integer;
