-- What operators do to an event beyond Replay (issue 32): end a claim now,
-- discard an event, and the reads, locks and audit rows around settling an
-- action (the settlement itself is action_update, actions.sql). One of the
-- event's transition files: the state diagram that names its statements is
-- the docstring of inboxd/store/events.py. Each transition is fenced in its
-- own WHERE clause by what the operator saw (the claim's fencing token, the
-- event's state), and writes its audit row in the same statement, as
-- event_replay does.

-- name: event_operator_lock
-- Locks the event for an operator's act: the state, claim and attempt the act
-- is judged against (domain.operator_actions).
SELECT state, fencing_token, attempt, coalesce(worker_id, ''), event_type, ordering_key
FROM inbox_events
WHERE namespace = %(namespace)s AND event_key = %(event_key)s
FOR UPDATE

-- name: event_operator_settle_lookup
-- The event for a settlement: its state and current claim (an INTENDED by the
-- claim still holding the event is not the operator's to settle). Key-share
-- locked first, as every ledger write locks the event before the action row
-- (action_claim_lookup says why).
SELECT state, fencing_token, attempt, coalesce(worker_id, ''), event_type, ordering_key
FROM inbox_events
WHERE namespace = %(namespace)s AND event_key = %(event_key)s
FOR KEY SHARE

-- name: fencing_token_mint
-- A fencing token for an operator's settlement, newer than every claim issued
-- before it: a late outcome of any of those claims is then an older claim's,
-- kept in the history without moving the state (SUCCEEDED still stands).
SELECT nextval('inbox_fencing_tokens')

-- name: event_end_claim
-- PROCESSING -> PENDING now, under the claim the operator saw (its fencing
-- token in the WHERE clause): claimable at once, the attempt counted or given
-- back as the operator chose (the caller decided: attempt_after), last_error
-- saying who ended it and why. The claim ends with outcome 'ended', its token
-- dead: a later write with it is ABORTED. A keyed event keeps its key, as a
-- released one does, and is its key's next: it comes back first.
WITH ended AS (
    UPDATE inbox_events AS e
    SET state = 'pending', attempt = %(attempt_after)s, claim_token = NULL, lease_expires_at = NULL,
        worker_id = NULL, last_error = %(last_error)s,
        available_at = inboxd_now(%(now)s), due_at = inboxd_now(%(now)s), updated_at = inboxd_now(%(now)s)
    WHERE e.namespace = %(namespace)s AND e.event_key = %(event_key)s
      AND e.fencing_token = %(fencing_token)s AND e.state IS NOT DISTINCT FROM 'processing'
    RETURNING e.namespace, e.event_key, e.fencing_token, e.event_type
), claim AS (
    UPDATE inbox_claims AS c SET ended_at = inboxd_now(%(now)s), outcome = 'ended'
    FROM ended WHERE c.fencing_token = ended.fencing_token AND c.ended_at IS NULL
), audit AS (
    INSERT INTO inbox_operator_actions (namespace, event_key, kind, actor, reason, before, after, acted_at)
    SELECT ended.namespace, ended.event_key, 'end_claim', %(actor)s, %(reason)s, %(before)s, %(after)s,
           inboxd_now(%(now)s)
    FROM ended
)
SELECT event_type FROM ended

-- name: event_discard
-- PENDING or DEAD_LETTERED -> COMPLETED as IGNORED, the operator's reason its
-- disposition's, in the state the operator saw (in the WHERE clause). The
-- event stays, with its claims, actions and last_error, until retention; a
-- keyed event that held its key frees it (the trigger
-- inboxd_ordering_key_finished), and its IGNORED moves no applied revision.
WITH discarded AS (
    UPDATE inbox_events AS e
    SET state = 'completed', completed_at = inboxd_now(%(now)s), disposition = 'ignored',
        disposition_reason = %(reason)s, due_at = NULL, claim_token = NULL, lease_expires_at = NULL,
        worker_id = NULL, updated_at = inboxd_now(%(now)s)
    WHERE e.namespace = %(namespace)s AND e.event_key = %(event_key)s
      AND e.state = %(expected_state)s AND e.state IN ('pending', 'dead_lettered')
    RETURNING e.namespace, e.event_key, e.event_type, e.ordering_key
), audit AS (
    INSERT INTO inbox_operator_actions (namespace, event_key, kind, actor, reason, before, after, acted_at)
    SELECT discarded.namespace, discarded.event_key, 'discard', %(actor)s, %(reason)s, %(before)s, %(after)s,
           inboxd_now(%(now)s)
    FROM discarded
)
SELECT ordering_key FROM discarded

-- name: operator_action_audit
-- The audit row of a settlement, written in the transaction that settled it.
INSERT INTO inbox_operator_actions (namespace, event_key, kind, subject, actor, reason, before, after, acted_at)
VALUES (%(namespace)s, %(event_key)s, 'settle_action', %(action)s, %(actor)s, %(reason)s, %(before)s, %(after)s,
        inboxd_now(%(now)s))

-- name: operator_actions_for_event
-- The operators' audited acts on one key, oldest first (GetEvent). Like the
-- replay audit, it outlives deleted rows.
SELECT kind, actor, reason, acted_at, subject, before, after
FROM inbox_operator_actions
WHERE namespace = %(namespace)s AND event_key = %(event_key)s
ORDER BY id

-- name: event_bulk_lock
-- The first statement of a bulk chunk: locks the next matches after the
-- cursor that are in a state the action acts on, waiting for any that
-- another transaction holds (a Claim taking a PENDING event, a Complete, a
-- Discard: milliseconds; bulk_chunk_lock_timeout bounds the wait), and
-- judging each as it stands once let go. Skipping held rows (SKIP LOCKED)
-- passed for good an event that a Claim then let go still PENDING, counted
-- as moved on. The chunk's own statement (event_bulk_replay,
-- event_bulk_ignore) comes next, with a snapshot of its own: a row rewritten
-- while this one waited is seen as it now is (found by its tuple id, the
-- version an older snapshot knew would be missed). Answers how many it locked.
SELECT count(*)
FROM (
    SELECT m.namespace, m.event_key
    FROM inbox_bulk_matches AS m
    WHERE m.operation = %(operation)s AND m.position > %(after)s
    ORDER BY m.position
    LIMIT %(limit)s
) AS b
CROSS JOIN LATERAL (
    SELECT 1
    FROM inbox_events AS e
    WHERE e.namespace = b.namespace AND e.event_key = b.event_key AND e.state = ANY (%(states)s::text[])
    FOR NO KEY UPDATE OF e
) AS l

-- name: event_bulk_replay
-- A bulk operation's REPLAY chunk: the next matches after the cursor whose
-- event still matches the filter and is COMPLETED or DEAD_LETTERED go to
-- PENDING exactly as event_replay takes one (attempts reset, ledger kept,
-- marked replayed, the disposition moved to the audit row, which names the
-- operation). Its matches were locked by event_bulk_lock just before, in
-- the same transaction, so they stand still, and this statement's snapshot
-- sees them as they are. The lock is the one the UPDATE takes anyway (no key
-- changes): a ledger write holding the event's key share
-- (action_claim_lookup) does not make it wait. With a rate,
-- the chunk's events come due `spacing` apart, so they become claimable at the
-- operation's pace. Each match is locked by its key in a subquery of its
-- own (a locking subquery is never flattened into a join, so the planner
-- cannot trade the chunk's key probes for a scan of the table), and written
-- by its tuple id: the lock keeps it where it is until the commit. Answers the chunk's size and
-- last position, and one row per replayed event (a single row of NULLs when
-- none was).
WITH batch AS (
    SELECT m.position, m.namespace, m.event_key
    FROM inbox_bulk_matches AS m
    WHERE m.operation = %(operation)s AND m.position > %(after)s
    ORDER BY m.position
    LIMIT %(limit)s
), locked AS (
    SELECT b.position, l.*
    FROM batch AS b
    CROSS JOIN LATERAL (
        SELECT e.ctid AS tid, e.namespace, e.event_key, e.state, e.disposition, e.disposition_reason
        FROM inbox_events AS e, inbox_bulk_operations AS o
        WHERE e.namespace = b.namespace AND e.event_key = b.event_key AND o.id = %(operation)s
          AND e.state IN ('completed', 'dead_lettered')
          AND inboxd_bulk_filter_matches(e, o)
        FOR NO KEY UPDATE OF e
    ) AS l
), numbered AS (
    SELECT l.*, row_number() OVER (ORDER BY l.position) - 1 AS turn FROM locked AS l
), replayed AS (
    UPDATE inbox_events AS e
    SET state = 'pending', attempt = 0, claim_token = NULL, lease_expires_at = NULL, worker_id = NULL,
        completed_at = NULL, disposition = NULL, disposition_reason = NULL, replayed = true,
        available_at = inboxd_now(%(now)s) + n.turn * %(spacing)s::interval,
        due_at = inboxd_now(%(now)s) + n.turn * %(spacing)s::interval, updated_at = inboxd_now(%(now)s)
    FROM numbered AS n
    WHERE e.ctid = ANY (ARRAY(SELECT l.tid FROM locked AS l)) AND e.ctid = n.tid
      AND e.state IN ('completed', 'dead_lettered')
    RETURNING e.namespace, e.event_key, e.event_type, e.ordering_key, n.turn, n.state AS state_before,
              n.disposition, n.disposition_reason
), audit AS (
    INSERT INTO inbox_replays (namespace, event_key, actor, reason, state_before, disposition_before,
                               disposition_reason_before, replayed_at, bulk_operation)
    SELECT r.namespace, r.event_key, %(actor)s, %(reason)s, r.state_before, r.disposition, r.disposition_reason,
           inboxd_now(%(now)s), %(operation)s
    FROM replayed AS r
)
SELECT (SELECT count(*) FROM batch), (SELECT coalesce(max(b.position), %(after)s) FROM batch AS b),
       r.namespace, r.event_key, r.event_type, r.turn * %(spacing)s::interval, r.ordering_key
FROM (SELECT) AS one
LEFT JOIN replayed AS r ON true

-- name: event_bulk_ignore
-- A bulk operation's IGNORE chunk: the next matches after the cursor whose
-- event still matches the filter and is PENDING or DEAD_LETTERED are
-- completed as IGNORED with the operation's reason, exactly as event_discard
-- completes one, each with its audit row naming the operation (its `before`
-- worded as domain.operator_actions.word_event words a PENDING or
-- DEAD_LETTERED event). Its matches were locked by event_bulk_lock just
-- before, as event_bulk_replay's. Answers as event_bulk_replay.
WITH batch AS (
    SELECT m.position, m.namespace, m.event_key
    FROM inbox_bulk_matches AS m
    WHERE m.operation = %(operation)s AND m.position > %(after)s
    ORDER BY m.position
    LIMIT %(limit)s
), locked AS (
    SELECT b.position, l.*
    FROM batch AS b
    CROSS JOIN LATERAL (
        SELECT e.ctid AS tid, e.namespace, e.event_key, e.state, e.attempt
        FROM inbox_events AS e, inbox_bulk_operations AS o
        WHERE e.namespace = b.namespace AND e.event_key = b.event_key AND o.id = %(operation)s
          AND e.state IN ('pending', 'dead_lettered')
          AND inboxd_bulk_filter_matches(e, o)
        FOR NO KEY UPDATE OF e
    ) AS l
), ignored AS (
    UPDATE inbox_events AS e
    SET state = 'completed', completed_at = inboxd_now(%(now)s), disposition = 'ignored',
        disposition_reason = %(reason)s, due_at = NULL, claim_token = NULL, lease_expires_at = NULL,
        worker_id = NULL, updated_at = inboxd_now(%(now)s)
    FROM locked AS l
    WHERE e.ctid = ANY (ARRAY(SELECT l2.tid FROM locked AS l2)) AND e.ctid = l.tid
      AND e.state IN ('pending', 'dead_lettered')
    RETURNING e.namespace, e.event_key, e.event_type, e.ordering_key, l.state AS state_before, l.attempt
), audit AS (
    INSERT INTO inbox_operator_actions (namespace, event_key, kind, actor, reason, before, after, acted_at,
                                        bulk_operation)
    SELECT i.namespace, i.event_key, 'discard', %(actor)s, %(reason)s,
           upper(i.state_before) || ', attempt ' || i.attempt, 'COMPLETED, IGNORED', inboxd_now(%(now)s),
           %(operation)s
    FROM ignored AS i
)
SELECT (SELECT count(*) FROM batch), (SELECT coalesce(max(b.position), %(after)s) FROM batch AS b),
       i.namespace, i.event_key, i.event_type, interval '0', i.ordering_key
FROM (SELECT) AS one
LEFT JOIN ignored AS i ON true

-- name: event_bulk_copy
-- A bulk operation's COPY chunk (subscriptions, migration 0028): the next
-- matches after the cursor whose event still matches the filter, and the
-- operation's subscription (its pattern and types, and not under its own
-- `<name>/`; a subscription deleted since copies nothing), and still has its
-- payload, are inserted again as
-- the subscription's copies, exactly as the Accept's fan-out inserts them
-- (namespace `<subscription>/<origin namespace>`, the original's key, type,
-- payload, metadata, content type, ordering key, revision, acceptance time
-- and trace context), PENDING. Insert-if-absent: a copy that stands already
-- (made by the Accept, or by an earlier COPY) is left as it is and the match
-- counted as skipped, so a COPY run twice makes each copy once. With a rate,
-- the chunk's copies come due `spacing` apart. Nothing of the original is
-- locked or changed. Answers as event_bulk_replay, each row the copy's.
WITH batch AS (
    SELECT m.position, m.namespace, m.event_key
    FROM inbox_bulk_matches AS m
    WHERE m.operation = %(operation)s AND m.position > %(after)s
    ORDER BY m.position
    LIMIT %(limit)s
), source AS (
    SELECT b.position, s.name || '/' || e.namespace AS namespace, e.event_key, e.event_type, e.payload,
           e.raw_payload, e.content_type, e.metadata, e.message_id, e.ordering_key, e.revision, e.accepted_at,
           e.traceparent, e.tracestate
    FROM batch AS b
    JOIN inbox_events AS e ON e.namespace = b.namespace AND e.event_key = b.event_key
    JOIN inbox_bulk_operations AS o ON o.id = %(operation)s
    JOIN inbox_subscriptions AS s ON s.name = o.subscription
    WHERE inboxd_bulk_filter_matches(e, o)
      AND e.namespace LIKE s.like_pattern AND (s.event_types = '{}' OR e.event_type = ANY (s.event_types))
      AND NOT starts_with(e.namespace, s.name || '/')
      AND (e.payload IS NOT NULL OR e.raw_payload IS NOT NULL)
), numbered AS (
    SELECT c.*, row_number() OVER (ORDER BY c.position) - 1 AS turn FROM source AS c
), copied AS (
    INSERT INTO inbox_events AS e
        (namespace, event_key, event_type, payload, raw_payload, content_type, metadata, message_id, ordering_key,
         revision, state, accepted_at, available_at, due_at, updated_at, traceparent, tracestate)
    SELECT n.namespace, n.event_key, n.event_type, n.payload, n.raw_payload, n.content_type, n.metadata,
           n.message_id, n.ordering_key, n.revision, 'pending', n.accepted_at,
           inboxd_now(%(now)s) + n.turn * %(spacing)s::interval, inboxd_now(%(now)s) + n.turn * %(spacing)s::interval,
           inboxd_now(%(now)s), n.traceparent, n.tracestate
    FROM numbered AS n
    ORDER BY n.namespace, n.event_key
    ON CONFLICT (namespace, event_key) DO NOTHING
    RETURNING e.namespace, e.event_key, e.event_type, e.ordering_key, e.available_at
)
SELECT (SELECT count(*) FROM batch), (SELECT coalesce(max(b.position), %(after)s) FROM batch AS b),
       c.namespace, c.event_key, c.event_type, c.available_at - inboxd_now(%(now)s), c.ordering_key
FROM (SELECT) AS one
LEFT JOIN copied AS c ON true
