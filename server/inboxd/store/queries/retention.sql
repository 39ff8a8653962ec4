-- Retention: COMPLETED rows are deleted after INBOXD_RETENTION, their
-- payloads dropped earlier after INBOXD_PAYLOAD_RETENTION. PENDING,
-- PROCESSING and DEAD_LETTERED rows are never touched. Each statement handles
-- one bounded batch and commits, so no pass holds locks for long. The
-- deletion of COMPLETED rows is a transition: event_delete_completed in
-- events.sql.

-- name: retention_drop_payloads
-- Drops the payloads of one batch of COMPLETED rows older than the payload
-- retention, and of their conflicting copies, in both columns (the jsonb of
-- rows from before migration 0019, the bytes of later ones). The key, state,
-- metadata and action ledger stay: a late duplicate is still recognised as one.
WITH emptied AS (
    SELECT namespace, event_key
    FROM inbox_events
    WHERE state = 'completed' AND (payload IS NOT NULL OR raw_payload IS NOT NULL)
      AND completed_at < inboxd_now(%(now)s) - %(payload_retention)s::interval
      AND (%(namespace)s::text IS NULL OR namespace = %(namespace)s::text)
    ORDER BY completed_at
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
), dropped AS (
    UPDATE inbox_events AS e
    SET payload = NULL, raw_payload = NULL
    FROM emptied
    WHERE e.namespace = emptied.namespace AND e.event_key = emptied.event_key
    RETURNING e.namespace, e.event_key
), copies AS (
    UPDATE inbox_conflicts AS c
    SET payload = NULL, raw_payload = NULL
    FROM dropped
    WHERE c.namespace = dropped.namespace AND c.event_key = dropped.event_key
      AND (c.payload IS NOT NULL OR c.raw_payload IS NOT NULL)
)
SELECT count(*) FROM dropped

-- name: retention_drop_late_copies
-- Drops the payloads of one batch of conflicting copies that arrived after
-- their event's payload was dropped: the pass above only empties copies that
-- exist when it empties their event. Conflicts are rare, so the scan of the
-- copies still holding a payload stays short.
WITH late AS (
    SELECT c.id
    FROM inbox_conflicts AS c
    JOIN inbox_events AS e ON e.namespace = c.namespace AND e.event_key = c.event_key
    WHERE (c.payload IS NOT NULL OR c.raw_payload IS NOT NULL)
      AND e.state = 'completed' AND e.payload IS NULL AND e.raw_payload IS NULL
      AND (%(namespace)s::text IS NULL OR c.namespace = %(namespace)s::text)
    LIMIT %(batch_size)s
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE inbox_conflicts AS c
SET payload = NULL, raw_payload = NULL
FROM late
WHERE c.id = late.id
