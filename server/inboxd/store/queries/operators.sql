-- What operators read: one event's whole record and counts. The listings of
-- summaries stand in listing.sql; only the whole record of one event carries
-- its payload. The one transition operators make (Replay) stands with the
-- others in events.sql.

-- name: event_read
-- One event's row, payload included as accepted (an event from before
-- migration 0019: jsonb's rendering; NULL once payload retention dropped it).
SELECT namespace, event_key, event_type, state, attempt, accepted_at, available_at, updated_at,
       coalesce(last_error, ''), coalesce(raw_payload, convert_to(payload::text, 'UTF8')), metadata,
       message_id, ordering_key, revision, disposition, coalesce(disposition_reason, ''), lease_expires_at,
       completed_at, content_type
FROM inbox_events
WHERE namespace = %(namespace)s AND event_key = %(event_key)s

-- name: event_claims
-- Every claim ever issued for the event, oldest first.
SELECT fencing_token, worker_id, attempt, claimed_at, ended_at, coalesce(outcome, '')
FROM inbox_claims
WHERE namespace = %(namespace)s AND event_key = %(event_key)s
ORDER BY fencing_token

-- name: event_conflicts
-- One page of the conflicting copies kept for investigation, in arrival order,
-- after the copy `after_id` (0: from the first); one row more than the page
-- says whether another follows. Their payloads only when asked: a page of 20
-- copies of 1 MiB each is 20 MiB nobody wanted to read.
SELECT id, event_type, CASE WHEN %(with_payloads)s THEN coalesce(raw_payload, convert_to(payload::text, 'UTF8')) END,
       metadata, received_at, payload_sha256, payload_bytes, content_type
FROM inbox_conflicts
WHERE namespace = %(namespace)s AND event_key = %(event_key)s AND id > %(after_id)s
ORDER BY id
LIMIT %(page_size)s + 1

-- name: event_conflict_totals
-- How many conflicting copies the key received: those kept, and those only
-- counted beyond the first 20, with the last one's digest.
SELECT (SELECT count(*) FROM inbox_conflicts AS c
        WHERE c.namespace = %(namespace)s AND c.event_key = %(event_key)s) AS kept,
       o.copies, o.first_received_at, o.last_received_at, o.last_payload_sha256
FROM (SELECT 1) AS one
LEFT JOIN inbox_conflict_overflow AS o ON o.namespace = %(namespace)s AND o.event_key = %(event_key)s

-- name: event_replays
-- The replay audit of one key, oldest first. It outlives deleted rows, so a
-- key accepted again after retention shows the replays of its predecessor.
SELECT actor, reason, state_before, replayed_at
FROM inbox_replays
WHERE namespace = %(namespace)s AND event_key = %(event_key)s
ORDER BY id

-- name: state_counts_fold_turn
-- One fold at a time (any number would be exact; one is enough): a Stats
-- that finds another folding reads the changes as they stand.
SELECT pg_try_advisory_xact_lock(7311028)

-- name: state_counts_fold
-- Moves the counted changes (migration 0030's triggers) into the counts, in
-- key order. A change committed after this statement's snapshot stays for
-- the next fold; the reader sums counts and changes alike, so a fold moves
-- figures and never changes them.
WITH folded AS (
    DELETE FROM inbox_state_count_changes RETURNING namespace, state, events
)
INSERT INTO inbox_state_counts AS c (namespace, state, events)
SELECT f.namespace, f.state, sum(f.events) FROM folded AS f
GROUP BY f.namespace, f.state
ORDER BY f.namespace, f.state
ON CONFLICT (namespace, state) DO UPDATE SET events = c.events + excluded.events

-- name: namespace_stats
-- Per namespace: events per state, from the maintained counts (0030: one
-- row per namespace and state, plus the changes not folded yet), never from
-- the events themselves; and the age of the oldest PENDING event that is
-- claimable now, by one walk of the namespace's due index from its start.
-- Delayed and backing-off events (due later) are not waiting on workers, so
-- they do not count; nor is an event waiting behind another of its ordering
-- key (it shows in the blocked keys): a keyed event counts only when it is
-- its key's next (inboxd_next_of_key, as the claim statement judges it).
-- And the flow-control rule that governs the namespace (inboxd_flow_rule,
-- as the claim statement finds it) and whether it pauses it: an operator
-- paged about a paused namespace's age sees why.
SELECT s.namespace, s.pending, s.processing, s.completed, s.dead_lettered,
       inboxd_now(%(now)s) - (
           SELECT e.available_at FROM inbox_events AS e
           WHERE e.namespace COLLATE "C" = s.namespace AND e.due_at IS NOT NULL
             -- PENDING, said as "open and not leased" (the CHECKs inbox_events_due_while_open and
             -- inbox_events_pending_has_no_claim): `state = 'pending'` would let the planner walk
             -- inbox_events_due, every namespace's due events, for a namespace with none claimable.
             AND e.due_at <= inboxd_now(%(now)s) AND e.lease_expires_at IS NULL
             AND e.available_at <= inboxd_now(%(now)s)
             AND (e.ordering_key = '' OR inboxd_next_of_key(e.namespace, e.ordering_key, e.event_key, e.revision,
                                                            e.accepted_at, false))
           ORDER BY e.due_at
           LIMIT 1),
       coalesce(r.paused, false), coalesce(r.pattern, '')
FROM (
    SELECT c.namespace,
           coalesce(sum(c.events) FILTER (WHERE c.state = 'pending'), 0)::bigint,
           coalesce(sum(c.events) FILTER (WHERE c.state = 'processing'), 0)::bigint,
           coalesce(sum(c.events) FILTER (WHERE c.state = 'completed'), 0)::bigint,
           coalesce(sum(c.events) FILTER (WHERE c.state = 'dead_lettered'), 0)::bigint,
           sum(c.events)
    FROM (SELECT namespace, state, events FROM inbox_state_counts
          UNION ALL
          SELECT namespace, state, events FROM inbox_state_count_changes) AS c
    WHERE (%(namespace)s::text IS NULL OR c.namespace = %(namespace)s::text)
    GROUP BY c.namespace
) AS s(namespace, pending, processing, completed, dead_lettered, total)
LEFT JOIN LATERAL inboxd_flow_rule(s.namespace) AS r ON true
WHERE s.total > 0
ORDER BY s.namespace

-- name: action_list_for_events
-- The action ledgers of the given events (GetEvent reads one).
SELECT a.namespace, a.event_key, a.action, a.state, a.idempotency_key, a.external_ref, a.detail,
       a.fencing_token, a.updated_at
FROM inbox_actions AS a
JOIN unnest(%(namespaces)s::text[], %(event_keys)s::text[]) AS k(namespace, event_key)
  ON a.namespace = k.namespace AND a.event_key = k.event_key
ORDER BY a.created_at, a.action

-- name: action_history_for_event
-- Every record the event's actions received, oldest first, applied or not.
SELECT action, state, external_ref, detail, fencing_token, applied, recorded_at
FROM inbox_action_history
WHERE namespace = %(namespace)s AND event_key = %(event_key)s
ORDER BY id

-- name: action_unresolved_count
-- Per namespace: actions whose outcome is UNKNOWN, and actions INTENDED for
-- longer than the threshold (a worker that died mid-action, say).
SELECT namespace,
       count(*) FILTER (WHERE state = 'unknown') AS unknown,
       count(*) FILTER (WHERE state = 'intended'
                        AND updated_at < inboxd_now(%(now)s) - %(stale_after)s::interval) AS stale_intended
FROM inbox_actions
WHERE state IN ('unknown', 'intended')
  AND (%(namespace)s::text IS NULL OR namespace = %(namespace)s::text)
GROUP BY namespace

-- name: action_list_unresolved
-- One namespace's unresolved actions, oldest first, as action_unresolved_count
-- counts them (UNKNOWN, and INTENDED for longer than the threshold), each with
-- its event: what an operator settles (inbox_actions_unresolved).
SELECT namespace, event_key, action, state, idempotency_key, external_ref, detail, fencing_token, updated_at
FROM inbox_actions
WHERE namespace = %(namespace)s
  AND (state = 'unknown'
       OR state = 'intended' AND updated_at < inboxd_now(%(now)s) - %(stale_after)s::interval)
ORDER BY updated_at, event_key, action
LIMIT %(limit)s
