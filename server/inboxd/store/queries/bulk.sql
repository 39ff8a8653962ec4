-- Bulk operations (issue 30): the operation's row, its numbered matches, and
-- its progress. The changes a chunk makes to events are transitions, so they
-- stand with the operators' others in operator_actions.sql
-- (event_bulk_replay, event_bulk_ignore); the store runs a chunk's statements
-- in one transaction under the operation's row lock (bulk_operation_lock),
-- so a cancel waits for the chunk in flight and its counts are exact.

-- name: bulk_operation_insert
-- A new operation as the operator asked for it. A dry run ends at once (DONE)
-- and changes nothing; its matches are counted and then dropped.
INSERT INTO inbox_bulk_operations (id, namespace_pattern, like_pattern, event_types, states, accepted_from,
                                   accepted_until, error_contains, ordering_key, action, reason, rate, dry_run,
                                   state, actor, started_at, finished_at, subscription)
VALUES (%(operation)s, %(namespace_pattern)s, %(like_pattern)s, %(event_types)s::text[], %(states)s::text[],
        %(accepted_from)s, %(accepted_until)s, %(error_contains)s, %(ordering_key)s, %(action)s, %(reason)s,
        %(rate)s, %(dry_run)s, CASE WHEN %(dry_run)s THEN 'done' ELSE 'running' END, %(actor)s,
        inboxd_now(%(now)s), CASE WHEN %(dry_run)s THEN inboxd_now(%(now)s) END, %(subscription)s)

-- name: bulk_matches_insert
-- Numbers the events the operation's filter matches now, oldest accepted
-- first, and answers how many. A plain namespace (`exact`) and the states are
-- named beside the filter so the planner can take inbox_events_listing's
-- ranges rather than scan the table.
WITH numbered AS (
    INSERT INTO inbox_bulk_matches (operation, position, namespace, event_key)
    SELECT o.id, row_number() OVER (ORDER BY e.accepted_at, e.namespace, e.event_key), e.namespace, e.event_key
    FROM inbox_bulk_operations AS o
    JOIN inbox_events AS e ON inboxd_bulk_filter_matches(e, o)
    WHERE o.id = %(operation)s
      AND e.state = ANY (%(states)s::text[])
      AND (%(exact)s::text IS NULL OR e.namespace = %(exact)s::text)
    RETURNING 1
)
SELECT count(*) FROM numbered

-- name: bulk_first_matches
-- The first matches, for the operator's preview: summaries as ListEvents
-- shows them (store/inspection.py reads the columns).
SELECT e.namespace, e.event_key, e.event_type, e.state, e.attempt, e.accepted_at, e.available_at,
       e.updated_at, coalesce(e.last_error, ''), coalesce(e.worker_id, ''), e.lease_expires_at
FROM inbox_bulk_matches AS m
JOIN inbox_events AS e ON e.namespace = m.namespace AND e.event_key = m.event_key
WHERE m.operation = %(operation)s
ORDER BY m.position
LIMIT %(limit)s

-- name: bulk_operation_matched
-- How many events the operation matched when it started.
UPDATE inbox_bulk_operations SET matched = %(matched)s WHERE id = %(operation)s

-- name: bulk_matches_drop
-- An ended operation's matches: nothing reads them any more.
DELETE FROM inbox_bulk_matches WHERE operation = %(operation)s

-- name: bulk_operation_read
-- One operation, and how long it has run (until it ended, or until now).
SELECT id, namespace_pattern, event_types, states, accepted_from, accepted_until, error_contains, ordering_key,
       action, reason, rate, dry_run, state, matched, done, skipped, actor, started_at, finished_at, cancelled_by,
       error, greatest(coalesce(finished_at, inboxd_now(%(now)s)) - started_at, interval '0'), cursor, subscription
FROM inbox_bulk_operations
WHERE id = %(operation)s

-- name: bulk_operation_lock
-- One operation, locked for a chunk or a cancel: the two wait for each other,
-- so a cancel lands between two chunks and the counts it answers are exact.
SELECT id, namespace_pattern, event_types, states, accepted_from, accepted_until, error_contains, ordering_key,
       action, reason, rate, dry_run, state, matched, done, skipped, actor, started_at, finished_at, cancelled_by,
       error, greatest(coalesce(finished_at, inboxd_now(%(now)s)) - started_at, interval '0'), cursor, subscription
FROM inbox_bulk_operations
WHERE id = %(operation)s
FOR UPDATE

-- name: bulk_operation_list
-- One page of operations, newest first, after a keyset position.
SELECT id, namespace_pattern, event_types, states, accepted_from, accepted_until, error_contains, ordering_key,
       action, reason, rate, dry_run, state, matched, done, skipped, actor, started_at, finished_at, cancelled_by,
       error, greatest(coalesce(finished_at, inboxd_now(%(now)s)) - started_at, interval '0'), cursor, subscription
FROM inbox_bulk_operations
WHERE (started_at, id) < (coalesce(%(after_at)s::timestamptz, 'infinity'), %(after_id)s::uuid)
ORDER BY started_at DESC, id DESC
LIMIT %(limit)s

-- name: bulk_operations_running
-- The operations a runner has to carry on, oldest first.
SELECT id FROM inbox_bulk_operations WHERE state = 'running' ORDER BY started_at, id

-- name: bulk_operation_advance
-- A chunk's progress, committed with its changes: the last position it dealt
-- with, the events it changed and the matches it skipped.
UPDATE inbox_bulk_operations
SET cursor = %(cursor)s, done = done + %(changed)s, skipped = skipped + %(skipped)s
WHERE id = %(operation)s AND state = 'running'

-- name: bulk_operation_end
-- RUNNING -> DONE, CANCELLED (by whom, why) or FAILED (with the error).
UPDATE inbox_bulk_operations
SET state = %(state)s, finished_at = inboxd_now(%(now)s), cancelled_by = %(cancelled_by)s,
    cancel_reason = %(cancel_reason)s, error = %(error)s
WHERE id = %(operation)s AND state = 'running'

-- name: bulk_start_lock
-- Starts one at a time across replicas, for the time of the start's
-- transaction: the count of RUNNING operations a start checks against the
-- caps then stays true until its own row is committed.
SELECT pg_advisory_xact_lock(7311020, 0)

-- name: bulk_running_counts
-- The RUNNING operations the actor (a token's name) started, and all of them.
SELECT count(*) FILTER (WHERE actor = %(actor)s), count(*) FROM inbox_bulk_operations WHERE state = 'running'

-- name: bulk_operations_ended
-- Which of the operations asleep on a replica (between two chunks) have
-- ended, cancelled on another replica, say: one look for all of them
-- (background/bulk_pacing.py), so each wakes within a look of its cancel.
SELECT id FROM inbox_bulk_operations WHERE id = ANY (%(operations)s::uuid[]) AND state <> 'running'

-- name: bulk_chunk_lock_timeout
-- How long a chunk waits for an event another transaction holds (a Claim
-- taking it, say), for its own transaction only. Such a transaction lasts
-- milliseconds; one held longer rolls the chunk back whole, to be tried again.
SELECT set_config('lock_timeout', %(timeout)s, true)
