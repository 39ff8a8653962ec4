-- PROCESSING -> COMPLETED as one set-based statement, written once.
--
-- inboxd_complete_events holds the rule, one statement over arrays of
-- completions (instead of one plpgsql call per row). inboxd_complete_event,
-- which workers reach through inboxd_complete() inside their own
-- transactions, runs it over one. inboxd's Complete and CompleteBatch run the
-- very same statement over a whole group (store/queries/claims.sql,
-- complete_events, as a plain prepared statement); a test holds the two
-- texts equal, so the rule has one definition.
--
-- Rows are locked FOR NO KEY UPDATE, not FOR UPDATE: a completion changes no
-- key, and the weaker lock does not block the foreign-key checks (FOR KEY
-- SHARE) of rows inserted into inbox_claims, inbox_actions or inbox_conflicts
-- for the same event.
--
-- SKIP LOCKED: a row another transaction holds is answered 'locked', never
-- waited for. One row held for long (a worker's business transaction that
-- called inboxd_complete() and has not committed) must not stall the rest of
-- a group; the caller retries those few items on their own, under a lock
-- timeout. A row locked by the calling transaction itself is not skipped,
-- which is how inboxd_complete_event waits: it locks the row first.
--
-- One answer per request item, by its position (ord, from 1):
--   'completed'          this item completed the event
--   'already_completed'  the same claim token completed it (earlier, or an
--                        earlier item of this very call)
--   'superseded'         the token is not the event's current claim
--   'not_found'          no such event
--   'locked'             another transaction holds the row; nothing changed
CREATE FUNCTION inboxd_complete_events(
    p_namespaces text[], p_event_keys text[], p_claim_tokens text[],
    p_dispositions text[], p_reasons text[], p_now timestamptz DEFAULT NULL
) RETURNS TABLE (ord bigint, answer text)
-- plpgsql, with a generic plan, so the statement is planned once per
-- connection rather than on every call: a SQL function's body is planned
-- again each time, and so is a custom plan. The generic plan reaches every row
-- by primary key whatever the arrays hold.
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH request AS (
    SELECT r.namespace, r.event_key, r.claim_token, r.disposition, r.reason, r.ord
    FROM unnest(p_namespaces, p_event_keys, p_claim_tokens, p_dispositions, p_reasons)
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
    SET state = 'completed', completed_at = coalesce(p_now, now()),
        disposition = w.disposition, disposition_reason = w.reason, due_at = NULL, lease_expires_at = NULL,
        updated_at = coalesce(p_now, now())
    FROM winner AS w
    -- The fence: the claim token and the state, in the UPDATE's own WHERE.
    WHERE e.namespace = w.namespace AND e.event_key = w.event_key
      AND e.claim_token = w.claim_token AND e.state = 'processing'
    RETURNING e.namespace, e.event_key, e.claim_token, e.fencing_token, w.ord
), ended AS (
    UPDATE inbox_claims AS c
    SET ended_at = coalesce(p_now, now()), outcome = 'completed'
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
ORDER BY q.ord;
END $$;

-- The same signature and answers as before (0002, 0004), now through the
-- shared rule. It waits for the row like any statement of the caller's
-- transaction would, then applies the rule, which then skips nothing.
CREATE OR REPLACE FUNCTION inboxd_complete_event(
    p_namespace text, p_event_key text, p_claim_token text,
    p_disposition text DEFAULT 'applied', p_reason text DEFAULT NULL, p_now timestamptz DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_answer text;
BEGIN
    LOOP
        PERFORM 1 FROM inbox_events
        WHERE namespace = p_namespace AND event_key = p_event_key
        FOR NO KEY UPDATE;
        SELECT c.answer INTO v_answer
        FROM inboxd_complete_events(ARRAY[p_namespace], ARRAY[p_event_key], ARRAY[p_claim_token],
                                    ARRAY[p_disposition], ARRAY[p_reason], p_now) AS c;
        -- 'locked' only when the row appeared after the PERFORM looked; wait for it then.
        EXIT WHEN v_answer <> 'locked';
    END LOOP;
    RETURN v_answer;
END $$;
