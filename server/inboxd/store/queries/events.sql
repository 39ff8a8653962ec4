-- The rules every transition of an event keeps, and the transitions that end
-- a claim other than by Complete (Fail, Release), Replay's, the rescuer's and
-- retention's, one statement each. Accept's stand in accepts.sql, Claim's and
-- RenewLease's in claims.sql, Complete's in completions.sql: the state diagram
-- that names them all is the docstring of inboxd/store/events.py, and
-- tests/unit/test_state_diagrams.py holds it to these four files. What
-- operators read, and the maintenance around the rescuer and retention
-- (their locks, the payload drops), stand in their own files.
--
-- Every write after a claim names the claim token in its WHERE clause: zero
-- rows means the claim is not current, and nothing changed.
--
-- The clock: a statement says `inboxd_now(%(now)s)` wherever it means now,
-- the caller's clock when given, else the database's (migration 0011). The
-- planner inlines the function, so a cut-off stays an index condition.
--
-- A fence reads `state IS NOT DISTINCT FROM 'processing'`, not `state =
-- 'processing'`: the same test on a NOT NULL column, but not one an index can
-- take as a bound, so the row is reached by its primary key. Given `=`, the
-- planner may take inbox_events_listing (namespace, state, accepted_at,
-- event_key), whose statistics show few PROCESSING rows, and walk every
-- PROCESSING entry of the namespace, the dead ones of every earlier claim
-- included: under a steady claim-complete load a completion then cost
-- PostgreSQL about 650 µs per event instead of 280
-- (tests/integration/test_fence_plans.py).

-- name: event_fail_lock
-- Locks the current claim's row to decide what its failure leads to.
SELECT attempt FROM inbox_events
WHERE namespace = %(namespace)s AND event_key = %(event_key)s
  AND claim_token = %(claim_token)s AND state IS NOT DISTINCT FROM 'processing'
FOR UPDATE

-- name: event_fail
-- PROCESSING -> PENDING after a retryable failure, claimable again after the
-- delay; with no delay (a permanent failure, or the last attempt: the caller
-- decided: domain.backoff.decide_failure), PROCESSING -> DEAD_LETTERED.
WITH failed AS (
    UPDATE inbox_events AS e
    SET state = CASE WHEN %(delay)s::interval IS NULL THEN 'dead_lettered' ELSE 'pending' END,
        claim_token = NULL, lease_expires_at = NULL, worker_id = NULL,
        available_at = coalesce(inboxd_now(%(now)s) + %(delay)s::interval, e.available_at),
        due_at = inboxd_now(%(now)s) + %(delay)s::interval,
        last_error = %(error)s, updated_at = inboxd_now(%(now)s)
    WHERE e.namespace = %(namespace)s AND e.event_key = %(event_key)s
      AND e.claim_token = %(claim_token)s AND e.state IS NOT DISTINCT FROM 'processing'
    RETURNING e.fencing_token, e.state, e.due_at, e.event_type, e.ordering_key
), ended AS (
    UPDATE inbox_claims AS c
    SET ended_at = inboxd_now(%(now)s),
        outcome = CASE WHEN failed.state = 'pending' THEN 'failed' ELSE 'dead_lettered' END
    FROM failed WHERE c.fencing_token = failed.fencing_token
)
-- Whom to wake: the retry's kind, or, a keyed event dead-lettered, its key's next event.
SELECT due_at, event_type, ordering_key FROM failed

-- name: event_release_many
-- PROCESSING -> PENDING, claimable at once, the attempt given back. Takes
-- parallel arrays so a cancelled Claim can hand back everything it took.
WITH released AS (
    UPDATE inbox_events AS e
    SET state = 'pending', attempt = greatest(e.attempt - 1, 0), claim_token = NULL,
        lease_expires_at = NULL, worker_id = NULL,
        available_at = inboxd_now(%(now)s), due_at = inboxd_now(%(now)s), updated_at = inboxd_now(%(now)s)
    FROM unnest(%(namespaces)s::text[], %(event_keys)s::text[], %(claim_tokens)s::text[])
         AS r(namespace, event_key, claim_token)
    WHERE e.namespace = r.namespace AND e.event_key = r.event_key
      AND e.claim_token = r.claim_token AND e.state IS NOT DISTINCT FROM 'processing'
    RETURNING e.fencing_token, e.namespace, e.event_key, e.event_type
), ended AS (
    UPDATE inbox_claims AS c SET ended_at = inboxd_now(%(now)s), outcome = 'released'
    FROM released WHERE c.fencing_token = released.fencing_token
)
SELECT namespace, event_key, event_type FROM released

-- name: event_fence_diagnose
-- Why a fenced write matched no row: which event, in which state, under which claim.
SELECT state, claim_token FROM inbox_events WHERE namespace = %(namespace)s AND event_key = %(event_key)s

-- name: event_replay_lock
-- Locks the event for Replay: its state decides whether Replay may proceed.
SELECT state, event_type, payload IS NOT NULL OR raw_payload IS NOT NULL
FROM inbox_events
WHERE namespace = %(namespace)s AND event_key = %(event_key)s
FOR UPDATE

-- name: event_replay
-- COMPLETED or DEAD_LETTERED -> PENDING, claimable now, attempts reset, and
-- the audit row written in the same statement. The action ledger stays, so
-- a worker finds its SUCCEEDED actions and their idempotency keys again.
-- last_error stays too: the next worker may want to know what went wrong.
-- The event is marked replayed: it is delivered even when stale (migration
-- 0012), and the disposition it had moves to its audit row (`before` reads
-- the row as the statement's snapshot saw it, before the UPDATE).
WITH before AS (
    SELECT b.disposition, b.disposition_reason
    FROM inbox_events AS b
    WHERE b.namespace = %(namespace)s AND b.event_key = %(event_key)s
), replayed AS (
    UPDATE inbox_events AS e
    SET state = 'pending', attempt = 0, claim_token = NULL, lease_expires_at = NULL, worker_id = NULL,
        completed_at = NULL, disposition = NULL, disposition_reason = NULL, replayed = true,
        available_at = inboxd_now(%(now)s), due_at = inboxd_now(%(now)s), updated_at = inboxd_now(%(now)s)
    WHERE e.namespace = %(namespace)s AND e.event_key = %(event_key)s
      AND e.state IN ('completed', 'dead_lettered')
    RETURNING e.namespace, e.event_key
)
INSERT INTO inbox_replays (namespace, event_key, actor, reason, state_before, disposition_before,
                           disposition_reason_before, replayed_at)
SELECT replayed.namespace, replayed.event_key, %(actor)s, %(reason)s, %(state_before)s, before.disposition,
       before.disposition_reason, inboxd_now(%(now)s)
FROM replayed, before
RETURNING id

-- name: event_rescue_expired
-- The lease rescuer: PROCESSING events whose lease expired more than a grace
-- ago go back to PENDING (or to dead letters when their attempts are spent),
-- so Stats and the CLI tell the truth for a namespace nobody is claiming.
-- The old claim ends as a reclaim would end it: outcome 'expired', its token
-- dead. One bounded batch per statement, so no pass holds locks for long:
-- oldest expiry first, through inbox_events_leases. A rescued
-- event is due again from its lease's expiry, so it keeps its place in line.
WITH expired AS (
    SELECT e.namespace, e.event_key, e.fencing_token, e.attempt >= %(max_attempts)s AS exhausted
    FROM inbox_events AS e
    WHERE e.state = 'processing'
      AND e.lease_expires_at <= inboxd_now(%(now)s) - %(grace)s::interval
      AND (%(namespace)s::text IS NULL OR e.namespace = %(namespace)s::text)
    ORDER BY e.lease_expires_at
    LIMIT %(batch_size)s
    FOR UPDATE OF e SKIP LOCKED
), ended AS (
    UPDATE inbox_claims AS c
    SET ended_at = inboxd_now(%(now)s), outcome = 'expired'
    FROM expired
    WHERE c.fencing_token = expired.fencing_token AND c.ended_at IS NULL
), rescued AS (
    UPDATE inbox_events AS e
    SET state = CASE WHEN expired.exhausted THEN 'dead_lettered' ELSE 'pending' END,
        claim_token = NULL, lease_expires_at = NULL, worker_id = NULL,
        due_at = CASE WHEN expired.exhausted THEN NULL ELSE e.lease_expires_at END,
        available_at = CASE WHEN expired.exhausted THEN e.available_at ELSE e.lease_expires_at END,
        last_error = CASE WHEN expired.exhausted
                          THEN format('lease expired on attempt %%s of %%s; attempts exhausted',
                                      e.attempt, %(max_attempts)s::int)
                          ELSE e.last_error END,
        updated_at = inboxd_now(%(now)s)
    FROM expired
    WHERE e.namespace = expired.namespace AND e.event_key = expired.event_key
    RETURNING e.namespace, e.event_type, e.state, e.event_key, e.ordering_key
)
SELECT namespace, event_type, state, event_key, ordering_key FROM rescued

-- name: event_delete_completed
-- Deletes one batch of COMPLETED rows older than the retention. Claims,
-- actions and conflicts go with them (ON DELETE CASCADE); the replay audit
-- stays. After this, the key is unknown: a new Accept of it is a new event.
WITH doomed AS (
    SELECT namespace, event_key
    FROM inbox_events
    WHERE state = 'completed'
      AND completed_at < inboxd_now(%(now)s) - %(retention)s::interval
      AND (%(namespace)s::text IS NULL OR namespace = %(namespace)s::text)
    ORDER BY completed_at
    LIMIT %(batch_size)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM inbox_events AS e
USING doomed
WHERE e.namespace = doomed.namespace AND e.event_key = doomed.event_key
