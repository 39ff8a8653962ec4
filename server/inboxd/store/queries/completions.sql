-- Complete's transition, PROCESSING -> COMPLETED: a whole group at once, and
-- the one row another transaction held, waited for (store/claims.py). One of
-- the event's transition files: the state diagram is the docstring of
-- inboxd/store/events.py.
-- The rules every transition statement keeps (the claim token in the WHERE
-- clause, inboxd_now(%(now)s) for now, the fence written `state IS NOT
-- DISTINCT FROM 'processing'`) stand once, at the head of events.sql.

-- name: event_complete_many
-- PROCESSING -> COMPLETED for a whole group in one statement: the rule of
-- inboxd_complete_events (migration 0005, last replaced by 0011), which
-- workers' inboxd_complete() runs, word for word: a change here is a new
-- migration replacing the function (tests/integration/test_complete_batch.py
-- compares the two). Run here as a plain statement, it keeps psycopg's
-- prepared plan and skips a function call. The arrays travel in binary
-- (%(...)b): psycopg's text format escapes each element by regex (87 µs
-- against 32 µs for five arrays of ten). Rows another transaction holds are
-- skipped and answered 'locked', never waited for; one answer per request, by
-- position.
WITH request AS (
    SELECT r.namespace, r.event_key, r.claim_token, r.disposition, r.reason, r.ord
    FROM unnest(%(namespaces)b::text[], %(event_keys)b::text[], %(claim_tokens)b::text[],
                %(dispositions)b::text[], %(reasons)b::text[])
         WITH ORDINALITY AS r(namespace, event_key, claim_token, disposition, reason, ord)
), locked AS (
    -- Key order, so two groups never lock the same rows in opposite orders.
    SELECT e.namespace, e.event_key, e.state, e.claim_token
    FROM inbox_events AS e
    WHERE (e.namespace, e.event_key) IN (SELECT k.namespace, k.event_key FROM request AS k)
    ORDER BY e.namespace, e.event_key
    FOR NO KEY UPDATE OF e SKIP LOCKED
), winner AS (
    -- Per event, the first item that holds its current claim: it decides the
    -- disposition; a later item with the same token is a repeat.
    SELECT DISTINCT ON (q.namespace, q.event_key) q.namespace, q.event_key, q.claim_token,
           q.disposition, q.reason, q.ord
    FROM request AS q
    JOIN locked AS l ON l.namespace = q.namespace AND l.event_key = q.event_key
    WHERE l.state = 'processing' AND l.claim_token = q.claim_token
    ORDER BY q.namespace, q.event_key, q.ord
), completed AS (
    UPDATE inbox_events AS e
    SET state = 'completed', completed_at = inboxd_now(%(now)s),
        disposition = w.disposition, disposition_reason = w.reason, due_at = NULL, lease_expires_at = NULL,
        updated_at = inboxd_now(%(now)s)
    FROM winner AS w
    -- The fence: the claim token and the state, in the UPDATE's own WHERE.
    WHERE e.namespace = w.namespace AND e.event_key = w.event_key
      AND e.claim_token = w.claim_token AND e.state IS NOT DISTINCT FROM 'processing'
    RETURNING e.namespace, e.event_key, e.claim_token, e.fencing_token, w.ord
), ended AS (
    UPDATE inbox_claims AS c
    SET ended_at = inboxd_now(%(now)s), outcome = 'completed'
    FROM completed AS d
    WHERE c.fencing_token = d.fencing_token
)
SELECT q.ord,
       CASE
           WHEN d.ord = q.ord THEN 'completed'
           WHEN d.claim_token = q.claim_token THEN 'already_completed'
           WHEN l.namespace IS NULL THEN
               CASE WHEN EXISTS (SELECT 1 FROM inbox_events AS x
                                 WHERE x.namespace = q.namespace AND x.event_key = q.event_key)
                    THEN 'locked' ELSE 'not_found' END
           WHEN l.state = 'completed' AND l.claim_token = q.claim_token THEN 'already_completed'
           ELSE 'superseded'
       END
FROM request AS q
LEFT JOIN locked AS l ON l.namespace = q.namespace AND l.event_key = q.event_key
LEFT JOIN completed AS d ON d.namespace = q.namespace AND d.event_key = q.event_key
ORDER BY q.ord

-- name: event_complete_lock_timeout
-- For this transaction only: how long a completion may wait for a row lock.
SELECT set_config('lock_timeout', %(lock_timeout)s, true)

-- name: event_complete_waiting
-- One completion whose row another transaction held: waits for the row (up
-- to the lock timeout), then applies the same rule.
SELECT inboxd_complete_event(%(namespace)s, %(event_key)s, %(claim_token)s, %(disposition)s, %(reason)s,
                             %(now)s::timestamptz)
