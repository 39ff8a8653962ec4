-- A Work stream's own transitions (store/streams.py): the heartbeat that
-- keeps alive every lease the stream holds, and the end of those claims when
-- the stream ends. One statement each, whatever the stream holds: the claims
-- come as parallel arrays (namespace, event_key, claim_token). The rules of
-- events.sql hold here too (the claim token in the WHERE clause,
-- inboxd_now(%(now)s), the fence written `state IS NOT DISTINCT FROM
-- 'processing'`); the state diagram in inboxd/store/events.py names both.

-- name: event_stream_renew
-- The stream's heartbeat: moves the lease end of every claim it still holds.
-- A claim that is no longer current (completed over a unary call, taken over,
-- dead-lettered) matches nothing and is not returned: the stream forgets it.
-- It never shortens a lease: a short lease is renewed only as far as the
-- worker's last word allows (usecases/streams.py), which may fall before the
-- end its push (or a RenewLease) granted.
UPDATE inbox_events AS e
SET lease_expires_at = GREATEST(e.lease_expires_at, inboxd_now(%(now)s) + %(lease)s::interval),
    due_at = GREATEST(e.due_at, inboxd_now(%(now)s) + %(lease)s::interval), updated_at = inboxd_now(%(now)s)
FROM unnest(%(namespaces)s::text[], %(event_keys)s::text[], %(claim_tokens)s::text[])
     AS h(namespace, event_key, claim_token)
WHERE e.namespace = h.namespace AND e.event_key = h.event_key
  AND e.claim_token = h.claim_token AND e.state IS NOT DISTINCT FROM 'processing'
RETURNING e.namespace, e.event_key

-- name: event_stream_end
-- The stream ended holding these claims: each ends at once as an expired
-- lease would end it (the rescuer's rule, event_rescue_expired), without
-- waiting for the lease. The attempt stays counted (it was at the claim);
-- attempts left: PENDING, due at once in its place in line (its
-- available_at, which a claim leaves as it was); none left: DEAD_LETTERED.
-- last_error says the worker's stream ended. The claim history row ends
-- 'expired', its token dead: the worker, if alive behind a broken
-- connection, gets ABORTED from then on. A keyed event back to PENDING still
-- holds its key (it comes out first again); one dead-lettered frees it.
WITH ended AS (
    UPDATE inbox_events AS e
    SET state = CASE WHEN e.attempt >= %(max_attempts)s THEN 'dead_lettered' ELSE 'pending' END,
        claim_token = NULL, lease_expires_at = NULL, worker_id = NULL,
        due_at = CASE WHEN e.attempt >= %(max_attempts)s THEN NULL
                      ELSE least(e.available_at, inboxd_now(%(now)s)) END,
        last_error = CASE WHEN e.attempt >= %(max_attempts)s
                          THEN format('the worker''s Work stream ended while it held the event, on attempt %%s of %%s; attempts exhausted',
                                      e.attempt, %(max_attempts)s::int)
                          ELSE format('the worker''s Work stream ended while it held the event, on attempt %%s of %%s',
                                      e.attempt, %(max_attempts)s::int) END,
        updated_at = inboxd_now(%(now)s)
    FROM unnest(%(namespaces)s::text[], %(event_keys)s::text[], %(claim_tokens)s::text[])
         AS h(namespace, event_key, claim_token)
    WHERE e.namespace = h.namespace AND e.event_key = h.event_key
      AND e.claim_token = h.claim_token AND e.state IS NOT DISTINCT FROM 'processing'
    RETURNING e.fencing_token, e.namespace, e.event_key, e.event_type, e.state, e.ordering_key
), history AS (
    UPDATE inbox_claims AS c
    SET ended_at = inboxd_now(%(now)s), outcome = 'expired'
    FROM ended
    WHERE c.fencing_token = ended.fencing_token AND c.ended_at IS NULL
)
SELECT namespace, event_key, event_type, state, ordering_key FROM ended
