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
