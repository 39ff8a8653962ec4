-- Claim's transitions (a lease handed out, an expired one taken over, an
-- event dead-lettered or ignored as stale on its way out) and RenewLease's
-- later lease end (store/claims.py). One of the event's transition files:
-- the state diagram is the docstring of inboxd/store/events.py.
-- The rules every transition statement keeps (the claim token in the WHERE
-- clause, inboxd_now(%(now)s) for now, the fence written `state IS NOT
-- DISTINCT FROM 'processing'`) stand once, at the head of events.sql.

-- name: event_claim
-- Leases up to max_events due events: PENDING ones whose available_at has
-- come and PROCESSING ones whose lease expired (the old claim dies). The
-- namespaces are taken in turn (inboxd_claim_turn_takeovers, migrations
-- 0024 and 0027: a walk round the ring of namespaces with open rows from
-- where the filter's last turn ended, one index descent per namespace
-- whatever its backlog, the flow-control rules deciding each namespace's
-- cap and, at a max_in_flight, the expired leases it takes over), oldest due first within
-- each; SKIP LOCKED lets concurrent claimers pass each other. Due events with
-- no attempts left are dead-lettered instead of handed out. One statement,
-- so one round trip on an autocommit connection: the claimed events' action
-- ledgers come back with them. Per namespace of the turn, its events are a
-- range of inbox_events_namespace_due, under a custom or a generic plan alike.
-- The cut-off is inboxd_now(%(now)s) in each WHERE, not a column of a CTE:
-- an index condition, not a join filter, so with many delayed events and
-- nothing due a Claim reads no rows.
--
-- Ordering keys (migration 0008): an event with a non-empty ordering_key is
-- a candidate only when it is its key's next (inboxd_next_of_key: the event
-- holding the key or, when none does, the first open one by (revision,
-- accepted_at, event_key)). That test runs only for keyed rows (the OR stops
-- at ordering_key = ''), so a Claim over unkeyed events reads what it read
-- before. It is judged in the statement's snapshot; `eligible` then locks
-- each keyed candidate's key row, whose latest version decides: a key another
-- Claim took since is skipped. A keyed event handed out holds its key (the
-- trigger inboxd_ordering_key_claimed sets inbox_ordering_keys.holder on the
-- row `eligible` locked) until it is completed or dead-lettered.
-- A candidate at or below its key's applied revision is stale: completed
-- IGNORED here, never handed out, and then it neither needs its key nor holds
-- back the events after it, so the key's next event comes out in the same
-- Claim. With ignore_stale off it is handed out in its turn, stale set; so is
-- a replayed one (migration 0012) whatever ignore_stale says: an operator
-- asked for it again, and the worker decides.
--
-- The answer's size (DESIGN, Claim): the events handed out are kept within
-- max_bytes in `taken`, a running total in answer order, so that no client's
-- receive limit can turn a lease into an attempt spent unread. An event
-- counts its payload, metadata and last_error as sent, and 4 KiB for the
-- rest of its ClaimedEvent (six identity fields of at most 512 bytes, tokens,
-- timestamps, framing). A Claim of one event measures nothing.
WITH flow AS MATERIALIZED (
    -- The turn: which namespaces, in which order, how many events each may
    -- give under its flow-control rules (migrations 0024, 0027; store/claims.py
    -- passes the walk's prefixes and where this filter's last turn ended).
    SELECT t.* FROM inboxd_claim_turn_takeovers(%(namespaces)s::text[], %(namespace_patterns)s::text[],
                                                %(prefixes)s::text[], %(after)s, %(turn_limit)s, %(max_events)s,
                                                %(event_types)s::text[], inboxd_now(%(now)s)) AS t
), due AS (
    -- The turn's events: each namespace's oldest due ones up to its cap,
    -- taken in turn (one round of the weights, then the next), oldest first
    -- within a round. A namespace's cap is its `fresh` events, oldest due
    -- first, and the expired leases its turn found to take over at its
    -- max_in_flight (`takeovers`, migration 0027), each by primary key: a
    -- takeover moves no count, so it needs no free slot.
    SELECT ranked.* FROM (
        SELECT d.*, f.position, f.weight, row_number() OVER (PARTITION BY d.namespace ORDER BY d.due_at) AS rank
        FROM flow AS f CROSS JOIN LATERAL (
            SELECT fresh.* FROM (
                SELECT e.namespace, e.event_key, e.state AS state_before, e.fencing_token AS old_fencing_token,
                       e.attempt >= %(max_attempts)s AS exhausted, e.due_at, e.ordering_key, e.revision, e.replayed,
                       CASE WHEN %(max_events)s > 1
                            THEN coalesce(octet_length(e.raw_payload), octet_length(e.payload::text))
                                 + octet_length(e.metadata::text)
                                 + octet_length(coalesce(e.last_error, '')) + 4096
                            ELSE 0 END AS answer_bytes
                FROM inbox_events AS e
                WHERE e.namespace COLLATE "C" = f.namespace
                  AND e.due_at <= inboxd_now(%(now)s)
                  AND (cardinality(%(event_types)s::text[]) = 0 OR e.event_type = ANY(%(event_types)s::text[]))
                  AND (e.ordering_key = '' OR inboxd_next_of_key(e.namespace, e.ordering_key, e.event_key, e.revision,
                                                                 e.accepted_at, %(ignore_stale)s AND NOT e.replayed))
                  AND NOT e.event_key = ANY(f.takeovers)
                ORDER BY e.due_at
                LIMIT f.fresh
                FOR UPDATE OF e SKIP LOCKED
            ) AS fresh
            UNION ALL
            SELECT takeover.* FROM (
                SELECT e.namespace, e.event_key, e.state, e.fencing_token, e.attempt >= %(max_attempts)s, e.due_at,
                       e.ordering_key, e.revision, e.replayed,
                       CASE WHEN %(max_events)s > 1
                            THEN coalesce(octet_length(e.raw_payload), octet_length(e.payload::text))
                                 + octet_length(e.metadata::text)
                                 + octet_length(coalesce(e.last_error, '')) + 4096
                            ELSE 0 END
                FROM inbox_events AS e
                WHERE e.namespace = f.namespace AND e.event_key = ANY(f.takeovers)
                  AND e.state = 'processing' AND e.due_at <= inboxd_now(%(now)s)
                  AND (e.ordering_key = '' OR inboxd_next_of_key(e.namespace, e.ordering_key, e.event_key, e.revision,
                                                                 e.accepted_at, %(ignore_stale)s AND NOT e.replayed))
                LIMIT cardinality(f.takeovers)
                FOR UPDATE OF e SKIP LOCKED
            ) AS takeover
        ) AS d
        WHERE f.cap > 0
    ) AS ranked
    -- Each namespace may lock up to its cap; the ones not kept here are
    -- unlocked when the statement ends.
    ORDER BY ceil(ranked.rank::numeric / ranked.weight), ranked.position, ranked.due_at
    LIMIT %(max_events)s
-- use: claim_from_due
-- One row per claimed event, its action ledger as a JSON array; when none was
-- claimed, one row of NULLs that still carries the counts (the dead letters
-- as the namespace of each, for the console's per-namespace trends) and the
-- turn: the last namespace it looked at (`turn_end`: where the next turn
-- starts when this one served none; store/claims.py finds the last one it
-- served from the events themselves), whether the walks stopped short
-- of the ring's end (`turn_cut`), the rules that held events back and why,
-- and when a rate's next token is due. Tokens taken and not used go back to
-- their buckets here (inboxd_flow_give_back), after `claimed` has run.
SELECT claimed.*, ledger.actions, counts.ignored_stale, counts.dead_lettered_in, counts.leases_expired,
       counts.turn_end, counts.turn_cut, counts.throttled_rules, counts.throttled_namespaces, counts.throttled_by, counts.next_token_at,
       counts.tokens_given_back, false AS governed
FROM (SELECT (SELECT count(*) FILTER (WHERE finished.ignored) FROM finished) AS ignored_stale,
             (SELECT coalesce(array_agg(finished.namespace) FILTER (WHERE NOT finished.ignored), '{}')
              FROM finished) AS dead_lettered_in,
             (SELECT count(*) FROM ended_claims) AS leases_expired,
             (SELECT max(f.last_examined) FROM flow AS f) AS turn_end,
             (SELECT coalesce(bool_or(f.turn_cut), false) FROM flow AS f) AS turn_cut,
             (SELECT coalesce(array_agg(f.rule_pattern ORDER BY f.position), '{}') FROM flow AS f
              WHERE f.held_back IS NOT NULL) AS throttled_rules,
             (SELECT coalesce(array_agg(f.namespace ORDER BY f.position), '{}') FROM flow AS f
              WHERE f.held_back IS NOT NULL) AS throttled_namespaces,
             (SELECT coalesce(array_agg(f.held_back ORDER BY f.position), '{}') FROM flow AS f
              WHERE f.held_back IS NOT NULL) AS throttled_by,
             (SELECT min(f.next_token_at) FROM flow AS f) AS next_token_at,
             (SELECT coalesce(sum(inboxd_flow_give_back(f.namespace, f.cap - used.events)), 0)
              FROM flow AS f
              CROSS JOIN LATERAL (SELECT count(*)::integer AS events FROM claimed AS c
                                  WHERE c.namespace = f.namespace) AS used
              WHERE f.rate IS NOT NULL AND f.cap > used.events) AS tokens_given_back) AS counts
-- use: claim_answer

-- name: event_claim_one
-- The commonest Claim, one named namespace, when no flow-control rule
-- governs it: event_claim's statement without the turn (store/claims.py
-- runs this one first for such a Claim). The turn's function call, its
-- rounds and its summary cost a Claim of one namespace 7% of its PostgreSQL
-- time (docs/benchmarks.md, fair claiming ÷ the claim before it), for
-- nothing when there is nothing to be fair between and no rule to apply.
-- Whether a rule governs the namespace is looked up here, in the
-- statement's snapshot, as the turn would: if one does, `flow` is empty,
-- nothing is claimed, and the answer says `governed`: the caller then runs
-- event_claim, whose turn applies the rule. Same parameters as event_claim;
-- the turn's columns are those of a turn over one namespace that no rule
-- held back.
WITH flow AS MATERIALIZED (
    SELECT true AS ungoverned
    WHERE NOT EXISTS (SELECT FROM inbox_flow_rules AS r
                      WHERE r.pattern = (%(namespaces)s::text[])[1]
                         OR r.is_pattern AND (%(namespaces)s::text[])[1] LIKE r.like_pattern)
), due AS (
    -- The namespace's oldest due events, as the turn's lateral takes them
    -- but without it: no rank, no weights, no sort of the turn's rounds
    -- (3% of a claim-10 and its completion on one connection, measured beside
    -- the turn's `due`). `flow` is a one-time filter: a governed namespace
    -- reads no rows.
    SELECT e.namespace, e.event_key, e.state AS state_before, e.fencing_token AS old_fencing_token,
           e.attempt >= %(max_attempts)s AS exhausted, e.due_at, e.ordering_key, e.revision, e.replayed,
           CASE WHEN %(max_events)s > 1
                THEN coalesce(octet_length(e.raw_payload), octet_length(e.payload::text))
                     + octet_length(e.metadata::text)
                     + octet_length(coalesce(e.last_error, '')) + 4096
                ELSE 0 END AS answer_bytes
    FROM inbox_events AS e
    WHERE e.namespace COLLATE "C" = (%(namespaces)s::text[])[1]
      AND EXISTS (SELECT FROM flow)
      AND e.due_at <= inboxd_now(%(now)s)
      AND (cardinality(%(event_types)s::text[]) = 0 OR e.event_type = ANY(%(event_types)s::text[]))
      AND (e.ordering_key = '' OR inboxd_next_of_key(e.namespace, e.ordering_key, e.event_key, e.revision,
                                                     e.accepted_at, %(ignore_stale)s AND NOT e.replayed))
    ORDER BY e.due_at
    LIMIT %(max_events)s
    FOR UPDATE OF e SKIP LOCKED
-- use: claim_from_due
SELECT claimed.*, ledger.actions, counts.*
FROM (SELECT (SELECT count(*) FILTER (WHERE finished.ignored) FROM finished) AS ignored_stale,
             (SELECT coalesce(array_agg(finished.namespace) FILTER (WHERE NOT finished.ignored), '{}')
              FROM finished) AS dead_lettered_in,
             (SELECT count(*) FROM ended_claims) AS leases_expired,
             NULL::text AS turn_end, false AS turn_cut, '{}'::text[] AS throttled_rules,
             '{}'::text[] AS throttled_namespaces, '{}'::text[] AS throttled_by,
             NULL::timestamptz AS next_token_at, 0 AS tokens_given_back,
             NOT EXISTS (SELECT FROM flow) AS governed) AS counts
-- use: claim_answer

-- part: claim_from_due
-- The events of `due` claimed (both claim statements): the ordering keys,
-- the answer's size, the dead letters and stale revisions, the leases and
-- the claims ledger.
), picked AS (
    -- One row of parallel arrays. Under a generic plan `due` is estimated at
    -- a tenth of the table (LIMIT of a parameter), and the writes below
    -- joined it by hashing a full scan; the unnest in `candidates` is
    -- estimated at 10 rows under any plan, so they reach their rows by
    -- primary key.
    SELECT array_agg(due.namespace ORDER BY due.namespace, due.event_key) AS namespaces,
           array_agg(due.event_key ORDER BY due.namespace, due.event_key) AS event_keys,
           array_agg(due.state_before ORDER BY due.namespace, due.event_key) AS states_before,
           array_agg(due.old_fencing_token ORDER BY due.namespace, due.event_key) AS old_fencing_tokens,
           array_agg(due.exhausted ORDER BY due.namespace, due.event_key) AS exhausted,
           array_agg(due.due_at ORDER BY due.namespace, due.event_key) AS due_ats,
           array_agg(due.ordering_key ORDER BY due.namespace, due.event_key) AS ordering_keys,
           array_agg(due.revision ORDER BY due.namespace, due.event_key) AS revisions,
           array_agg(due.replayed ORDER BY due.namespace, due.event_key) AS replayed,
           array_agg(due.answer_bytes ORDER BY due.namespace, due.event_key) AS answer_bytes
    FROM due
), candidates AS (
    SELECT t.*
    FROM picked, unnest(picked.namespaces, picked.event_keys, picked.states_before, picked.old_fencing_tokens,
                        picked.exhausted, picked.due_ats, picked.ordering_keys, picked.revisions, picked.replayed,
                        picked.answer_bytes)
                 AS t(namespace, event_key, state_before, old_fencing_token, exhausted, due_at, ordering_key,
                      revision, replayed, answer_bytes)
), eligible AS (
    -- Each keyed candidate's key row, locked and read in its latest version:
    -- a key another Claim took after this statement's snapshot shows its new
    -- holder here (or is skipped while that Claim runs: then `key_row` is
    -- NULL and so is its NOT NULL applied_revision), so a key is never handed
    -- out twice; its applied revision is the latest too. One primary-key
    -- probe per keyed candidate (the OFFSET keeps the subquery apart, so no
    -- plan hashes a scan of the whole key table), none for an unkeyed one.
    -- SKIP LOCKED never waits, so lock order does not matter.
    -- Eligible: unkeyed events; keyed ones whose key is free or theirs; and,
    -- when stale events are ignored, stale ones whatever holds their key
    -- (they are never handed out). At most one per key is handed out: the
    -- snapshot's test lets one non-stale event per key through.
    SELECT judged.*
    FROM (
        SELECT c.*, coalesce(k.applied_revision, 0) AS applied_revision,
               c.revision > 0 AND c.revision <= coalesce(k.applied_revision, 0) AS stale,
               c.revision > 0 AND c.revision <= coalesce(k.applied_revision, 0) AND %(ignore_stale)s
                   AND NOT c.replayed AS to_ignore,
               k.applied_revision IS NOT NULL AND (k.holder IS NULL OR k.holder = c.event_key) AS key_free
        FROM candidates AS c
        LEFT JOIN LATERAL (
            SELECT key_row.applied_revision, key_row.holder
            FROM inbox_ordering_keys AS key_row
            WHERE c.ordering_key <> ''
              AND key_row.namespace = c.namespace AND key_row.ordering_key = c.ordering_key
            OFFSET 0
            FOR NO KEY UPDATE OF key_row SKIP LOCKED
        ) AS k ON true
    ) AS judged
    WHERE judged.ordering_key = '' OR judged.key_free OR judged.to_ignore
), taken AS (
    -- The answer's byte budget: events to hand out, in the order they are
    -- answered, while their running total stays within max_bytes; the first
    -- always goes, however big (within the payload limit). The rest are never
    -- leased: no attempt counted, their old claims not ended, still due.
    -- Those that end here (stale, out of attempts) send no bytes and stay.
    SELECT budgeted.*
    FROM (
        SELECT eligible.*,
               sum(eligible.answer_bytes) FILTER (WHERE NOT eligible.exhausted AND NOT eligible.to_ignore)
                   OVER (ORDER BY eligible.due_at, eligible.namespace, eligible.event_key) AS running_bytes,
               count(*) FILTER (WHERE NOT eligible.exhausted AND NOT eligible.to_ignore)
                   OVER (ORDER BY eligible.due_at, eligible.namespace, eligible.event_key) AS handed_out
        FROM eligible
    ) AS budgeted
    WHERE budgeted.exhausted OR budgeted.to_ignore OR budgeted.handed_out = 1
       OR budgeted.running_bytes <= %(max_bytes)s
), ended_claims AS (
    UPDATE inbox_claims AS c
    SET ended_at = inboxd_now(%(now)s), outcome = 'expired'
    FROM taken AS due
    WHERE due.state_before = 'processing' AND c.fencing_token = due.old_fencing_token AND c.ended_at IS NULL
    RETURNING c.fencing_token
), finished AS (
    -- Events that end here, never handed out. Stale ones (to_ignore):
    -- COMPLETED IGNORED, both revisions in the reason. Those out of
    -- attempts: DEAD_LETTERED, saying why. No claim is issued, and an expired
    -- claim's token dies with its lease. One UPDATE for both, so a Claim
    -- carries no more write nodes than before ordering keys.
    UPDATE inbox_events AS e
    SET state = CASE WHEN due.to_ignore THEN 'completed' ELSE 'dead_lettered' END,
        completed_at = CASE WHEN due.to_ignore THEN inboxd_now(%(now)s) END,
        disposition = CASE WHEN due.to_ignore THEN 'ignored' END,
        disposition_reason = CASE WHEN due.to_ignore
                                  THEN format('stale revision: %%s is at or below the applied revision %%s of ordering key %%s',
                                              e.revision, due.applied_revision, e.ordering_key) END,
        due_at = NULL, claim_token = NULL, lease_expires_at = NULL, worker_id = NULL,
        updated_at = inboxd_now(%(now)s),
        last_error = CASE WHEN due.to_ignore THEN e.last_error
                          WHEN due.state_before = 'processing'
                          THEN format('lease expired on attempt %%s of %%s; attempts exhausted', e.attempt, %(max_attempts)s::int)
                          ELSE format('attempts exhausted (%%s of %%s)', e.attempt, %(max_attempts)s::int) END
    FROM taken AS due
    WHERE (due.exhausted OR due.to_ignore) AND e.namespace = due.namespace AND e.event_key = due.event_key
    RETURNING due.to_ignore AS ignored, e.namespace
), claimed AS (
    UPDATE inbox_events AS e
    SET state = 'processing', attempt = e.attempt + 1,
        -- A keyed event's token says so ('k-'): its Complete, wherever it is served, wakes the key's next event.
        claim_token = CASE WHEN e.ordering_key <> '' THEN 'k-' ELSE '' END || gen_random_uuid()::text,
        fencing_token = nextval('inbox_fencing_tokens'),
        worker_id = %(worker_id)s, lease_expires_at = inboxd_now(%(now)s) + %(lease)s::interval,
        due_at = inboxd_now(%(now)s) + %(lease)s::interval, updated_at = inboxd_now(%(now)s)
    FROM taken AS due
    WHERE NOT due.exhausted AND NOT due.to_ignore AND e.namespace = due.namespace AND e.event_key = due.event_key
    -- The payload as accepted (an event from before migration 0019: jsonb's rendering).
    RETURNING e.namespace, e.event_key, e.event_type, coalesce(e.raw_payload, convert_to(e.payload::text, 'UTF8')),
              e.metadata, e.message_id, e.ordering_key, e.revision, e.attempt, e.claim_token, e.fencing_token,
              e.lease_expires_at, e.accepted_at, coalesce(e.last_error, ''), due.applied_revision, due.stale,
              e.content_type, e.traceparent, e.tracestate, e.replayed, due.due_at, due.state_before, e.worker_id
), history AS (
    -- On the database's clock, the ledger's claimed_at is the moment of this
    -- write (inboxd_moment, migration 0021; not the transaction's start): after
    -- inboxd_flow_room counted the namespace's leases, so that a claim that
    -- ended before that count never seems to overlap this one in the ledger
    -- (its ended_at is its own transaction's start, before its commit).
    INSERT INTO inbox_claims (fencing_token, namespace, event_key, claim_token, worker_id, attempt, claimed_at)
    SELECT fencing_token, namespace, event_key, claim_token, worker_id, attempt,
           inboxd_moment(%(now)s)
    FROM claimed
)

-- part: claim_answer
-- The answer's rows: one per claimed event with its action ledger, or one of NULLs carrying the counts.
LEFT JOIN claimed ON true
LEFT JOIN LATERAL (
    SELECT jsonb_agg(jsonb_build_object(
               'action', a.action, 'state', a.state, 'idempotency_key', a.idempotency_key,
               'external_ref', a.external_ref, 'detail', a.detail, 'fencing_token', a.fencing_token,
               'updated_at', a.updated_at) ORDER BY a.created_at, a.action) AS actions
    FROM inbox_actions AS a
    WHERE a.namespace = claimed.namespace AND a.event_key = claimed.event_key
) AS ledger ON true
ORDER BY claimed.due_at

-- name: claim_lock_timeout
-- For this transaction only: how long a Claim waits for another Claim's hold
-- on a limited namespace (claim_wait_for_namespace); answers the setting it
-- replaces, which the claim statement after the wait runs under again.
SELECT previous.setting, set_config('lock_timeout', %(lock_timeout)s, true)
FROM (SELECT current_setting('lock_timeout') AS setting) AS previous

-- name: claim_wait_for_namespace
-- Waits for the Claim that holds a limited namespace's lock (inboxd_flow_room,
-- migration 0027: the lock its Claims take turns on to count its slots) to
-- commit, and holds it for this transaction: the claim statement run next in
-- the same transaction takes it again at once (advisory locks are
-- re-entrant) and counts after that commit. A Claim that found the lock
-- taken took none of the namespace; this is its second look
-- (store/claim_waits.py). The only advisory lock a
-- claimer ever waits for, and it waits holding none: no cycle of waits.
SELECT pg_advisory_xact_lock(7311002, hashtext(%(namespace)s))

-- name: event_renew_lease
-- Moves the lease's end; an expired lease that nobody reclaimed is still current.
UPDATE inbox_events AS e
SET lease_expires_at = inboxd_now(%(now)s) + %(lease)s::interval,
    due_at = inboxd_now(%(now)s) + %(lease)s::interval, updated_at = inboxd_now(%(now)s)
WHERE e.namespace = %(namespace)s AND e.event_key = %(event_key)s
  AND e.claim_token = %(claim_token)s AND e.state IS NOT DISTINCT FROM 'processing'
RETURNING e.lease_expires_at
