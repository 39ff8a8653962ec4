-- The lease rescuer: PROCESSING events whose lease expired more than a grace
-- ago go back to PENDING (or to dead letters when their attempts are spent),
-- so Stats and the CLI tell the truth for a namespace nobody is claiming.
-- The old claim ends as a reclaim would end it: outcome 'expired', its token
-- dead. One bounded batch per statement, so no pass holds locks for long.

-- name: rescue_try_lock
-- One replica at a time: the others find the lock taken and skip their pass.
SELECT pg_try_advisory_lock(%(lock)s)

-- name: rescue_unlock
SELECT pg_advisory_unlock(%(lock)s)

-- name: rescue_expired_leases
-- One batch, oldest expiry first, through inbox_events_leases. A rescued
-- event is due again from its lease's expiry, so it keeps its place in line.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
), expired AS (
    SELECT e.namespace, e.event_key, e.fencing_token, e.attempt >= %(max_attempts)s AS exhausted
    FROM inbox_events AS e
    WHERE e.state = 'processing'
      AND e.lease_expires_at <= coalesce(%(now)s::timestamptz, now()) - %(grace)s::interval
      AND (%(namespace)s::text IS NULL OR e.namespace = %(namespace)s::text)
    ORDER BY e.lease_expires_at
    LIMIT %(batch_size)s
    FOR UPDATE OF e SKIP LOCKED
), ended AS (
    UPDATE inbox_claims AS c
    SET ended_at = clock.now, outcome = 'expired'
    FROM expired, clock
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
        updated_at = clock.now
    FROM expired, clock
    WHERE e.namespace = expired.namespace AND e.event_key = expired.event_key
    RETURNING e.namespace, e.event_type, e.state
)
SELECT namespace, event_type, state FROM rescued
