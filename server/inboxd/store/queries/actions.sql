-- Every transition of an external action in an event's ledger, and the
-- reads and locks that decide it: the state diagram that names them is the
-- docstring of inboxd/store/actions.py, and tests/unit/test_state_diagrams.py
-- holds the two to each other. What operators read of the ledger (its
-- history, the unresolved actions) stands in operators.sql.

-- name: action_claim_lookup
-- Whether the event exists, and the claim the token names: its fencing token
-- and whether it is the event's current claim. An outcome is accepted from
-- any claim ever issued for the event; intent only from the current one.
-- The key-share lock is the one the ledger's foreign keys take anyway, taken
-- first: every ledger write then locks the event before the action row, the
-- order retention's cascading delete takes them in, so the two cannot deadlock.
SELECT c.fencing_token,
       (e.state = 'processing' AND e.claim_token = c.claim_token) AS is_current
FROM inbox_events AS e
LEFT JOIN inbox_claims AS c
       ON c.claim_token = %(claim_token)s AND c.namespace = e.namespace AND c.event_key = e.event_key
WHERE e.namespace = %(namespace)s AND e.event_key = %(event_key)s
FOR KEY SHARE OF e

-- name: action_claim_lookup_for_intent
-- The same, for INTENDED: the event row stays share-locked until the intent is
-- written, so a takeover (which updates the row) cannot commit between the
-- currency check and the write; it waits, or a SKIP LOCKED claimer passes by.
SELECT c.fencing_token,
       (e.state = 'processing' AND e.claim_token = c.claim_token) AS is_current
FROM inbox_events AS e
LEFT JOIN inbox_claims AS c
       ON c.claim_token = %(claim_token)s AND c.namespace = e.namespace AND c.event_key = e.event_key
WHERE e.namespace = %(namespace)s AND e.event_key = %(event_key)s
FOR SHARE OF e

-- name: action_lock
-- The action's current state and the claim that last wrote it, locked until
-- the transition is written: an older claim's outcome is judged against it.
SELECT state, fencing_token FROM inbox_actions
WHERE namespace = %(namespace)s AND event_key = %(event_key)s AND action = %(action)s
FOR UPDATE

-- name: action_create
-- The first record of an action mints its idempotency key. A concurrent first
-- record wins the race; the loser finds its row and transitions instead.
INSERT INTO inbox_actions
    (namespace, event_key, action, state, idempotency_key, external_ref, detail, fencing_token, created_at, updated_at)
VALUES (%(namespace)s, %(event_key)s, %(action)s, %(state)s, 'idk_' || replace(gen_random_uuid()::text, '-', ''),
        %(external_ref)s, %(detail)s, %(fencing_token)s, inboxd_now(%(now)s), inboxd_now(%(now)s))
ON CONFLICT (namespace, event_key, action) DO NOTHING
RETURNING action, state, idempotency_key, external_ref, detail, fencing_token, updated_at

-- name: action_update
-- A transition: the new state, and the claim that recorded it. An empty
-- external_ref keeps the one already known.
UPDATE inbox_actions
SET state = %(state)s,
    external_ref = CASE WHEN %(external_ref)s = '' THEN external_ref ELSE %(external_ref)s END,
    detail = %(detail)s, fencing_token = %(fencing_token)s, updated_at = inboxd_now(%(now)s)
WHERE namespace = %(namespace)s AND event_key = %(event_key)s AND action = %(action)s
RETURNING action, state, idempotency_key, external_ref, detail, fencing_token, updated_at

-- name: action_history_add
-- Every record the action received, applied or not (an older claim's outcome,
-- a repeat): the ledger row says where the action stands, this says how.
INSERT INTO inbox_action_history
    (namespace, event_key, action, state, external_ref, detail, fencing_token, applied, recorded_at)
VALUES (%(namespace)s, %(event_key)s, %(action)s, %(state)s, %(external_ref)s, %(detail)s, %(fencing_token)s,
        %(applied)s, inboxd_now(%(now)s))

-- name: action_read
SELECT action, state, idempotency_key, external_ref, detail, fencing_token, updated_at
FROM inbox_actions
WHERE namespace = %(namespace)s AND event_key = %(event_key)s AND action = %(action)s
