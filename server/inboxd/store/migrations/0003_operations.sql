-- What operators need: paged listings that stay fast on a large inbox, and
-- payload retention that drops every copy of a payload, not just the event's.

-- ListEvents: newest first within a namespace and a state. Every transition
-- already rewrites the row's index entries (due_at changes, so no update is
-- HOT), so keeping state in this index costs no extra write per transition.
CREATE INDEX inbox_events_listing
    ON inbox_events (namespace, state, accepted_at DESC, event_key DESC);

-- Payload retention: only COMPLETED rows that still hold a payload, so a
-- pass never re-reads the rows it already emptied.
CREATE INDEX inbox_events_payload_held
    ON inbox_events (completed_at) WHERE state = 'completed' AND payload IS NOT NULL;

-- A conflicting copy's payload is dropped with its event's payload.
ALTER TABLE inbox_conflicts ALTER COLUMN payload DROP NOT NULL;
