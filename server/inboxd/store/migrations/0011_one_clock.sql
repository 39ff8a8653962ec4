-- What "now" is, written once for every statement: the caller's clock when
-- one is given (tests pass it: time is a parameter), else the database's.
-- Statements read `inboxd_now(%(now)s)`; before this, each wrote
-- `coalesce(%(now)s::timestamptz, now())` itself, or once in a `clock` CTE.
--
-- The planner inlines it, so a statement is planned as if it still said
-- coalesce($1, now()), and a cut-off such as `due_at <= inboxd_now(...)` stays
-- an index condition under a custom and a generic plan alike: a Claim over
-- many delayed events reads none of them. Inlining asks for all of this, and
-- tests/integration/test_clock_plans.py fails when it stops: LANGUAGE sql, a
-- single SELECT of one expression, not STRICT (coalesce is not strict), not
-- IMMUTABLE (now() is not), no SET clause, not SECURITY DEFINER.
CREATE FUNCTION inboxd_now(p_now timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT coalesce(p_now, now()) $$;

-- The completion rule of 0010 with its clock read through inboxd_now: the
-- statement stays word for word the one inboxd runs
-- (store/queries/events.sql, event_complete_many).
CREATE OR REPLACE FUNCTION inboxd_complete_events(
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
    SET state = 'completed', completed_at = inboxd_now(p_now),
        disposition = w.disposition, disposition_reason = w.reason, due_at = NULL, lease_expires_at = NULL,
        updated_at = inboxd_now(p_now)
    FROM winner AS w
    -- The fence: the claim token and the state, in the UPDATE's own WHERE.
    WHERE e.namespace = w.namespace AND e.event_key = w.event_key
      AND e.claim_token = w.claim_token AND e.state IS NOT DISTINCT FROM 'processing'
    RETURNING e.namespace, e.event_key, e.claim_token, e.fencing_token, w.ord
), ended AS (
    UPDATE inbox_claims AS c
    SET ended_at = inboxd_now(p_now), outcome = 'completed'
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
