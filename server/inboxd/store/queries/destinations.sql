-- Destinations (push to HTTP): the operators' destinations with their audit,
-- each destination's circuit breaker, and every POST's attempt. Every change
-- an operator makes writes its row and its audit row in one statement.

-- name: destination_insert
-- (none) -> an active destination, audited; nothing when the name is taken.
WITH created AS (
    INSERT INTO inbox_destinations (name, url, namespace_pattern, like_pattern, secret, timeout_ms, max_attempts,
                                    backoff_base_ms, backoff_cap_ms, forward_signature_metadata, concurrency,
                                    created_at, created_by)
    VALUES (%(name)s, %(url)s, %(namespace_pattern)s, %(like_pattern)s, %(secret)s, %(timeout_ms)s,
            %(max_attempts)s, %(backoff_base_ms)s, %(backoff_cap_ms)s, %(forward_signature_metadata)s,
            %(concurrency)s, inboxd_now(%(now)s), %(actor)s)
    ON CONFLICT (name) DO NOTHING
    RETURNING name, created_at
)
INSERT INTO inbox_destination_changes (name, actor, reason, change, changed_at)
SELECT name, %(actor)s, %(reason)s, 'created', created_at FROM created
RETURNING id

-- name: destination_get
-- One destination by name.
SELECT name, url, namespace_pattern, secret, timeout_ms, max_attempts, backoff_base_ms, backoff_cap_ms,
       forward_signature_metadata, concurrency, status, paused_reason, next_try_at, consecutive_failures,
       created_at, created_by
FROM inbox_destinations
WHERE name = %(name)s

-- name: destination_list
-- Every destination, by name.
SELECT name, url, namespace_pattern, secret, timeout_ms, max_attempts, backoff_base_ms, backoff_cap_ms,
       forward_signature_metadata, concurrency, status, paused_reason, next_try_at, consecutive_failures,
       created_at, created_by
FROM inbox_destinations
ORDER BY name COLLATE "C"

-- name: destination_delete
-- A destination -> (none), audited.
WITH gone AS (
    DELETE FROM inbox_destinations WHERE name = %(name)s RETURNING name
)
INSERT INTO inbox_destination_changes (name, actor, reason, change, changed_at)
SELECT name, %(actor)s, %(reason)s, 'deleted', inboxd_now(%(now)s) FROM gone
RETURNING id

-- name: destination_resume
-- A paused destination -> active (an operator closes its breaker), audited.
WITH resumed AS (
    UPDATE inbox_destinations
    SET status = 'active', paused_reason = '', next_try_at = NULL, consecutive_failures = 0, breaker_opens = 0
    WHERE name = %(name)s
    RETURNING name
)
INSERT INTO inbox_destination_changes (name, actor, reason, change, changed_at)
SELECT name, %(actor)s, %(reason)s, 'resumed', inboxd_now(%(now)s) FROM resumed
RETURNING id

-- name: destination_answered
-- The endpoint answered: its breaker closes (a paused destination resumes),
-- failures in a row back to 0. Writes only when there is something to reset,
-- so a healthy destination's deliveries write nothing here. Answers whether
-- it was paused.
UPDATE inbox_destinations AS d
SET status = 'active', paused_reason = '', next_try_at = NULL, consecutive_failures = 0, breaker_opens = 0
FROM (SELECT name, status AS was FROM inbox_destinations WHERE name = %(name)s FOR UPDATE) AS before
WHERE d.name = before.name AND (d.consecutive_failures > 0 OR d.status = 'paused')
RETURNING before.was = 'paused'

-- name: destination_failed
-- The endpoint failed (no answer, 5xx, 408, 409, 429, a redirect): one more
-- failure in a row. An active destination at the threshold opens its breaker
-- (paused, breaker_opens 1, first try after first_try_ms). A paused one's
-- try failed (or a POST still in flight when it opened): its next try comes
-- first_try_ms x 2^(breaker_opens - 1) from now, up to longest_try_ms, so
-- each try taken (destination_take_try counts it) doubles the wait.
-- Answers the state after and the next try.
UPDATE inbox_destinations
SET consecutive_failures = consecutive_failures + 1,
    breaker_opens = CASE WHEN status = 'active' AND consecutive_failures + 1 >= %(threshold)s THEN 1
                         ELSE breaker_opens END,
    status = CASE WHEN status = 'paused' OR consecutive_failures + 1 >= %(threshold)s THEN 'paused' ELSE 'active' END,
    paused_reason = CASE WHEN status = 'paused' OR consecutive_failures + 1 >= %(threshold)s
                         THEN %(reason)s ELSE '' END,
    next_try_at = CASE
        WHEN status = 'paused'
        THEN inboxd_now(%(now)s) + least(%(longest_try_ms)s::float8,
                                         %(first_try_ms)s::float8 * 2 ^ least(greatest(breaker_opens - 1, 0), 30))
                                   * interval '1 millisecond'
        WHEN consecutive_failures + 1 >= %(threshold)s
        THEN inboxd_now(%(now)s) + %(first_try_ms)s * interval '1 millisecond'
    END
WHERE name = %(name)s
RETURNING status, next_try_at

-- name: destination_take_try
-- A paused destination whose next try is due: this replica takes the try,
-- counts it (breaker_opens + 1: a failed try then waits twice as long as the
-- last) and pushes next_try_at past the try's window, so no other replica
-- tries at once. Nothing when it is not due, or another replica took it first.
UPDATE inbox_destinations
SET next_try_at = inboxd_now(%(now)s) + %(window_ms)s * interval '1 millisecond',
    breaker_opens = breaker_opens + 1
WHERE name = %(name)s AND status = 'paused' AND next_try_at <= inboxd_now(%(now)s)
RETURNING name

-- name: delivery_attempt_insert
-- One POST and what it did to the event.
INSERT INTO inbox_delivery_attempts (destination, namespace, event_key, webhook_id, attempt, fencing_token,
                                     attempted_at, status_code, latency_ms, error, response_excerpt, outcome)
VALUES (%(destination)s, %(namespace)s, %(event_key)s, %(webhook_id)s, %(attempt)s, %(fencing_token)s,
        %(attempted_at)s, %(status_code)s, %(latency_ms)s, %(error)s, %(response_excerpt)s, %(outcome)s)

-- name: delivery_attempts_of_event
-- Every POST of one event, oldest first (its page in the console, GetEvent, `inboxd show`).
SELECT destination, namespace, event_key, webhook_id, attempt, fencing_token, attempted_at, status_code,
       latency_ms, error, response_excerpt, outcome
FROM inbox_delivery_attempts
WHERE namespace = %(namespace)s AND event_key = %(event_key)s
ORDER BY id
LIMIT 200

-- name: delivery_attempts_recent
-- A destination's latest POSTs, newest first.
SELECT destination, namespace, event_key, webhook_id, attempt, fencing_token, attempted_at, status_code,
       latency_ms, error, response_excerpt, outcome
FROM inbox_delivery_attempts
WHERE destination = %(name)s
ORDER BY id DESC
LIMIT %(limit)s

-- name: retention_delete_delivery_attempts
-- Deletes one batch of attempts older than the retention whose event is gone
-- (deleted by retention, or never kept): an event's page keeps its attempts
-- as long as the event stands, a dead letter's too.
WITH doomed AS (
    SELECT a.id
    FROM inbox_delivery_attempts AS a
    WHERE a.attempted_at < inboxd_now(%(now)s) - %(retention)s::interval
      AND (%(namespace)s::text IS NULL OR a.namespace = %(namespace)s::text)
      AND NOT EXISTS (SELECT 1 FROM inbox_events AS e WHERE e.namespace = a.namespace AND e.event_key = a.event_key)
    ORDER BY a.attempted_at
    LIMIT %(batch_size)s
)
DELETE FROM inbox_delivery_attempts AS a
USING doomed
WHERE a.id = doomed.id
