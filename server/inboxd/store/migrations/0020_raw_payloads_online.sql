-- inboxd: no transaction
-- The part of the raw payloads upgrade (0019) that reads the whole of
-- inbox_events, done without blocking Accept, Claim or Complete: each
-- statement runs alone, outside a transaction (see store/migrate.py), so
-- CREATE INDEX CONCURRENTLY can run, and VALIDATE CONSTRAINT takes only a
-- SHARE UPDATE EXCLUSIVE lock, which writes do not wait for. Every statement
-- may run again: a run cut short is begun again from the top, and its
-- version is recorded only once all have run.

-- Retention's index of the COMPLETED rows that still hold a payload, now in
-- either column. An index left invalid by an interrupted build is dropped first.
DROP INDEX CONCURRENTLY IF EXISTS inbox_events_payload_kept;
CREATE INDEX CONCURRENTLY inbox_events_payload_kept ON inbox_events (completed_at)
    WHERE state = 'completed' AND (payload IS NOT NULL OR raw_payload IS NOT NULL);
DROP INDEX CONCURRENTLY IF EXISTS inbox_events_payload_held;

-- One scan, while writes go on: every old row holds (0019 says why it must).
ALTER TABLE inbox_events VALIDATE CONSTRAINT inbox_events_payload_kept_until_completed;
