-- Every transition of an event, one statement each: the state diagram that
-- names them is the docstring of inboxd/store/events.py, and
-- tests/unit/test_state_diagrams.py holds the two to each other. What
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

-- Accepting: (none) -> PENDING. One group of events (one caller's batch, or
-- several callers' events gathered by group commit) is one statement, so one
-- transaction and one round trip.

-- name: event_accept_many
-- Inserts every event whose key is new, judges every other one against the
-- stored row (or against the copy of this group that won the insert), and
-- keeps each conflicting copy for investigation, in one statement.
--
-- The events travel as one JSON array (one object per event: pos, ord,
-- namespace, event_key, event_type, and those of metadata as an object,
-- message_id, ordering_key, revision, available_at that are not at their
-- defaults), expanded by json_to_recordset: one parameter, not one array per
-- column. Their payloads travel beside them as one text[] in binary format
-- (%(payloads)b), element pos of it the payload of the event at pos: each is
-- the caller's text as it came, with nothing to escape on either side, and
-- jsonb's cast of each is the one parse it gets (PostgreSQL judges what
-- jsonb can hold; a refusal is named by event_payload_probe).
--
-- Rows go in key order so that concurrent groups lock keys in the same order
-- and cannot deadlock; among copies of one key in a group, the first in
-- request order wins. A key that another transaction committed after this
-- statement's snapshot was taken is neither inserted nor visible here: its
-- outcome is 'retry', and the caller runs those events again.
WITH incoming AS (
    -- first_ord: which copy of its key wins the insert (the first in request order).
    -- A field left at its default is left out of its object: NULL here.
    SELECT i.pos, i.ord, i.namespace, i.event_key, i.event_type, p.payload::jsonb AS payload,
           coalesce(i.metadata, '{}') AS metadata, coalesce(i.message_id, '') AS message_id,
           coalesce(i.ordering_key, '') AS ordering_key, coalesce(i.revision, 0) AS revision,
           inboxd_now(%(now)s) AS accepted_at, coalesce(i.available_at, inboxd_now(%(now)s)) AS available_at,
           min(i.ord) OVER (PARTITION BY i.namespace, i.event_key) AS first_ord
    FROM json_to_recordset(%(events)s::json)
         AS i(pos int, ord int, namespace text, event_key text, event_type text, metadata jsonb,
              message_id text, ordering_key text, revision bigint, available_at timestamptz)
    JOIN unnest(%(payloads)b::text[]) WITH ORDINALITY AS p(payload, pos) ON p.pos = i.pos
), inserted AS (
    INSERT INTO inbox_events AS e
        (namespace, event_key, event_type, payload, metadata, message_id, ordering_key,
         revision, state, accepted_at, available_at, due_at, updated_at)
    SELECT i.namespace, i.event_key, i.event_type, i.payload, i.metadata,
           i.message_id, i.ordering_key, i.revision, 'pending', i.accepted_at,
           i.available_at, i.available_at, i.accepted_at
    FROM incoming AS i
    ORDER BY i.namespace, i.event_key, i.ord
    ON CONFLICT (namespace, event_key) DO NOTHING
    RETURNING e.namespace, e.event_key, e.event_type, e.payload, e.state, e.accepted_at
), judged AS (
    -- A repeat is the same event when its type matches and its payload is an
    -- equal JSON value (jsonb equality ignores key order and whitespace). A
    -- payload dropped by retention cannot be compared; the key was already
    -- processed, so the copy counts as a duplicate.
    SELECT i.ord, i.namespace, i.event_key, i.event_type, i.payload, i.metadata,
           CASE
               WHEN w.event_key IS NOT NULL AND i.ord = i.first_ord THEN 'accepted'
               WHEN w.event_key IS NOT NULL THEN
                   CASE WHEN w.event_type = i.event_type AND w.payload = i.payload
                        THEN 'duplicate' ELSE 'conflict' END
               WHEN s.found THEN
                   CASE WHEN s.event_type = i.event_type AND coalesce(s.payload = i.payload, true)
                        THEN 'duplicate' ELSE 'conflict' END
               ELSE 'retry'
           END AS outcome,
           coalesce(w.state, s.state) AS state,
           coalesce(w.accepted_at, s.accepted_at) AS accepted_at
    FROM incoming AS i
    LEFT JOIN inserted AS w ON w.namespace = i.namespace AND w.event_key = i.event_key
    -- A probe of the primary key per repeat, under any plan: as a plain join,
    -- a generic plan (json_to_recordset is always estimated at 100 rows) chose
    -- a hash join over a sequential scan of inbox_events, which grew with the
    -- table until autoanalyze replanned it. LIMIT keeps the subquery a loop.
    LEFT JOIN LATERAL (
        SELECT true AS found, s.event_type, s.payload, s.state, s.accepted_at
        FROM inbox_events AS s
        WHERE w.event_key IS NULL AND s.namespace = i.namespace AND s.event_key = i.event_key
        LIMIT 1
    ) AS s ON true
), copies AS (
    -- Each conflicting copy's number among its key's copies: those kept before,
    -- then this group's in request order. Conflicts are rare, so the count runs
    -- for few rows, and stays short: at most 20 rows are kept per key.
    SELECT j.ord, j.namespace, j.event_key, j.event_type, j.payload, j.metadata,
           sha256(convert_to(j.payload::text, 'UTF8')) AS payload_sha256,
           octet_length(j.payload::text) AS payload_bytes,
           (SELECT count(*) FROM inbox_conflicts AS c WHERE c.namespace = j.namespace AND c.event_key = j.event_key)
           + row_number() OVER (PARTITION BY j.namespace, j.event_key ORDER BY j.ord) AS copy_number
    FROM judged AS j
    WHERE j.outcome = 'conflict'
), kept AS (
    -- The first 20 copies of a key are kept whole (migration 0015).
    INSERT INTO inbox_conflicts
        (namespace, event_key, event_type, payload, metadata, received_at, payload_sha256, payload_bytes)
    SELECT c.namespace, c.event_key, c.event_type, c.payload, c.metadata, inboxd_now(%(now)s),
           c.payload_sha256, c.payload_bytes
    FROM copies AS c
    WHERE c.copy_number <= 20
    ORDER BY c.ord
), counted AS (
    -- The rest are counted, with the digest of the last.
    INSERT INTO inbox_conflict_overflow AS o
        (namespace, event_key, copies, first_received_at, last_received_at, last_payload_sha256)
    SELECT c.namespace, c.event_key, count(*), inboxd_now(%(now)s), inboxd_now(%(now)s),
           (array_agg(c.payload_sha256 ORDER BY c.ord DESC))[1]
    FROM copies AS c
    WHERE c.copy_number > 20
    GROUP BY c.namespace, c.event_key
    ORDER BY c.namespace, c.event_key
    ON CONFLICT (namespace, event_key) DO UPDATE
        SET copies = o.copies + excluded.copies, last_received_at = excluded.last_received_at,
            last_payload_sha256 = excluded.last_payload_sha256
), durable AS (
    -- Every OK is as durable as the first: a group of nothing but duplicates
    -- writes nothing, so its COMMIT would not wait for a synchronous standby,
    -- and a repeat of an Accept whose wait for it was cancelled would answer
    -- OK for a row the standby may not have. A transactional message gives
    -- the group a commit record to wait for, after the stored row's. A group
    -- that inserts a row or a conflicting copy waits anyway and pays nothing.
    SELECT pg_logical_emit_message(true, 'inboxd', '') AS lsn
    WHERE EXISTS (SELECT 1 FROM judged AS d WHERE d.outcome = 'duplicate')
      AND NOT EXISTS (SELECT 1 FROM judged AS w WHERE w.outcome IN ('accepted', 'conflict'))
)
-- Joined, so that the volatile message is evaluated (once) and not left out.
SELECT ord, outcome, state, accepted_at FROM judged LEFT JOIN durable ON true

-- name: event_payload_probe
-- Whether jsonb takes this payload: the diagnosis after a group failed on a
-- value, so the refusal can name its event. Nothing is written.
SELECT %(payload)s::jsonb IS NOT NULL

-- name: event_claim
-- Leases up to max_events due events: PENDING ones whose available_at has
-- come and PROCESSING ones whose lease expired (the old claim dies). Oldest
-- due first; SKIP LOCKED lets concurrent claimers pass each other. Due events
-- with no attempts left are dead-lettered instead of handed out. One
-- statement, so one round trip on an autocommit connection: the claimed
-- events' action ledgers come back with them.
--
-- Each shape of Claim has an access path whose cost does not depend on other
-- namespaces' rows, under a custom or a generic plan alike (the untaken
-- branches are one-time filters on the parameters):
--   named namespaces: per namespace, a range of inbox_events_namespace_due;
--   no namespace, granted patterns: a skip scan from each pattern's literal
--     prefix lists the namespaces under it that have open rows (one index
--     descent each, whatever their backlog), the patterns keep the granted
--     ones, then per namespace as above;
--   every namespace: inbox_events_due, oldest first (its predicate names the
--     open states, which only this branch states, so the per-namespace scans
--     cannot take it and walk other namespaces' rows in due order).
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
WITH RECURSIVE open_namespaces AS (
    -- From each pattern's literal prefix, the namespaces with open rows, one
    -- index descent each, up to the first that no longer has the prefix
    -- (byte order, so those with a prefix are contiguous).
    SELECT p.prefix, (SELECT e.namespace FROM inbox_events AS e
                      WHERE e.due_at IS NOT NULL AND e.namespace COLLATE "C" >= p.prefix
                      ORDER BY e.namespace COLLATE "C"
                      LIMIT 1) AS namespace
    FROM unnest(%(namespace_prefixes)s::text[]) AS p(prefix)
    WHERE cardinality(%(namespaces)s::text[]) = 0
    UNION ALL
    SELECT o.prefix, (SELECT e.namespace FROM inbox_events AS e
                      WHERE e.due_at IS NOT NULL AND e.namespace COLLATE "C" > o.namespace
                      ORDER BY e.namespace COLLATE "C"
                      LIMIT 1)
    FROM open_namespaces AS o
    WHERE starts_with(o.namespace, o.prefix)
), wanted AS (
    SELECT n.namespace FROM unnest(%(namespaces)s::text[]) AS n(namespace)
    WHERE cardinality(%(namespace_patterns)s::text[]) = 0 OR n.namespace LIKE ANY(%(namespace_patterns)s::text[])
    UNION
    SELECT o.namespace FROM open_namespaces AS o
    WHERE o.namespace LIKE ANY(%(namespace_patterns)s::text[])
), due AS (
    SELECT candidates.* FROM (
        SELECT d.* FROM wanted CROSS JOIN LATERAL (
            SELECT e.namespace, e.event_key, e.state AS state_before, e.fencing_token AS old_fencing_token,
                   e.attempt >= %(max_attempts)s AS exhausted, e.due_at, e.ordering_key, e.revision, e.replayed,
                   CASE WHEN %(max_events)s > 1
                        THEN octet_length(e.payload::text) + octet_length(e.metadata::text)
                             + octet_length(coalesce(e.last_error, '')) + 4096
                        ELSE 0 END AS answer_bytes
            FROM inbox_events AS e
            WHERE e.namespace COLLATE "C" = wanted.namespace
              AND e.due_at <= inboxd_now(%(now)s)
              AND (cardinality(%(event_types)s::text[]) = 0 OR e.event_type = ANY(%(event_types)s::text[]))
              AND (e.ordering_key = '' OR inboxd_next_of_key(e.namespace, e.ordering_key, e.event_key, e.revision,
                                                             e.accepted_at, %(ignore_stale)s AND NOT e.replayed))
            ORDER BY e.due_at
            LIMIT %(max_events)s
            FOR UPDATE OF e SKIP LOCKED
        ) AS d
        UNION ALL
        SELECT anywhere.* FROM (
            SELECT e.namespace, e.event_key, e.state, e.fencing_token, e.attempt >= %(max_attempts)s, e.due_at,
                   e.ordering_key, e.revision, e.replayed,
                   CASE WHEN %(max_events)s > 1
                        THEN octet_length(e.payload::text) + octet_length(e.metadata::text)
                             + octet_length(coalesce(e.last_error, '')) + 4096
                        ELSE 0 END
            FROM inbox_events AS e
            WHERE cardinality(%(namespaces)s::text[]) = 0 AND cardinality(%(namespace_patterns)s::text[]) = 0
              AND e.state IN ('pending', 'processing')
              AND e.due_at <= inboxd_now(%(now)s)
              AND (cardinality(%(event_types)s::text[]) = 0 OR e.event_type = ANY(%(event_types)s::text[]))
              AND (e.ordering_key = '' OR inboxd_next_of_key(e.namespace, e.ordering_key, e.event_key, e.revision,
                                                             e.accepted_at, %(ignore_stale)s AND NOT e.replayed))
            ORDER BY e.due_at
            LIMIT %(max_events)s
            FOR UPDATE OF e SKIP LOCKED
        ) AS anywhere
    ) AS candidates
    -- With several namespaces each may lock up to max_events; the ones not
    -- kept here are unlocked when the statement ends.
    ORDER BY candidates.due_at
    LIMIT %(max_events)s
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
    RETURNING due.to_ignore AS ignored
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
    RETURNING e.namespace, e.event_key, e.event_type, e.payload::text, e.metadata, e.message_id,
              e.ordering_key, e.revision, e.attempt, e.claim_token, e.fencing_token,
              e.lease_expires_at, e.accepted_at, coalesce(e.last_error, ''), due.applied_revision, due.stale,
              due.due_at, due.state_before, e.worker_id
), history AS (
    INSERT INTO inbox_claims (fencing_token, namespace, event_key, claim_token, worker_id, attempt, claimed_at)
    SELECT fencing_token, namespace, event_key, claim_token, worker_id, attempt, inboxd_now(%(now)s) FROM claimed
)
-- One row per claimed event, its action ledger as a JSON array; when none was
-- claimed, one row of NULLs that still carries the counts.
SELECT claimed.*, ledger.actions, counts.ignored_stale, counts.dead_lettered, counts.leases_expired
FROM (SELECT (SELECT count(*) FILTER (WHERE finished.ignored) FROM finished) AS ignored_stale,
             (SELECT count(*) FILTER (WHERE NOT finished.ignored) FROM finished) AS dead_lettered,
             (SELECT count(*) FROM ended_claims) AS leases_expired) AS counts
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

-- name: event_renew_lease
-- Moves the lease's end; an expired lease that nobody reclaimed is still current.
UPDATE inbox_events AS e
SET lease_expires_at = inboxd_now(%(now)s) + %(lease)s::interval,
    due_at = inboxd_now(%(now)s) + %(lease)s::interval, updated_at = inboxd_now(%(now)s)
WHERE e.namespace = %(namespace)s AND e.event_key = %(event_key)s
  AND e.claim_token = %(claim_token)s AND e.state IS NOT DISTINCT FROM 'processing'
RETURNING e.lease_expires_at

-- name: event_complete_many
-- PROCESSING -> COMPLETED for a whole group in one statement: the rule of
-- inboxd_complete_events (migration 0005, last replaced by 0011), which
-- workers' inboxd_complete() runs, word for word: a change here is a new
-- migration replacing the function (tests/integration/test_complete_batch.py
-- compares the two). Run here as a plain statement, it keeps psycopg's
-- prepared plan and skips a function call. The arrays travel in binary
-- (%(...)b): psycopg's text format escapes each element by regex (87 µs
-- against 32 µs for five arrays of ten). Rows another transaction holds are
-- skipped and answered 'locked', never waited for; one answer per request, by
-- position.
WITH request AS (
    SELECT r.namespace, r.event_key, r.claim_token, r.disposition, r.reason, r.ord
    FROM unnest(%(namespaces)b::text[], %(event_keys)b::text[], %(claim_tokens)b::text[],
                %(dispositions)b::text[], %(reasons)b::text[])
         WITH ORDINALITY AS r(namespace, event_key, claim_token, disposition, reason, ord)
), locked AS (
    -- Key order, so two groups never lock the same rows in opposite orders.
    SELECT e.namespace, e.event_key, e.state, e.claim_token
    FROM inbox_events AS e
    WHERE (e.namespace, e.event_key) IN (SELECT k.namespace, k.event_key FROM request AS k)
    ORDER BY e.namespace, e.event_key
    FOR NO KEY UPDATE OF e SKIP LOCKED
), winner AS (
    -- Per event, the first item that holds its current claim: it decides the
    -- disposition; a later item with the same token is a repeat.
    SELECT DISTINCT ON (q.namespace, q.event_key) q.namespace, q.event_key, q.claim_token,
           q.disposition, q.reason, q.ord
    FROM request AS q
    JOIN locked AS l ON l.namespace = q.namespace AND l.event_key = q.event_key
    WHERE l.state = 'processing' AND l.claim_token = q.claim_token
    ORDER BY q.namespace, q.event_key, q.ord
), completed AS (
    UPDATE inbox_events AS e
    SET state = 'completed', completed_at = inboxd_now(%(now)s),
        disposition = w.disposition, disposition_reason = w.reason, due_at = NULL, lease_expires_at = NULL,
        updated_at = inboxd_now(%(now)s)
    FROM winner AS w
    -- The fence: the claim token and the state, in the UPDATE's own WHERE.
    WHERE e.namespace = w.namespace AND e.event_key = w.event_key
      AND e.claim_token = w.claim_token AND e.state IS NOT DISTINCT FROM 'processing'
    RETURNING e.namespace, e.event_key, e.claim_token, e.fencing_token, w.ord
), ended AS (
    UPDATE inbox_claims AS c
    SET ended_at = inboxd_now(%(now)s), outcome = 'completed'
    FROM completed AS d
    WHERE c.fencing_token = d.fencing_token
)
SELECT q.ord,
       CASE
           WHEN d.ord = q.ord THEN 'completed'
           WHEN d.claim_token = q.claim_token THEN 'already_completed'
           WHEN l.namespace IS NULL THEN
               CASE WHEN EXISTS (SELECT 1 FROM inbox_events AS x
                                 WHERE x.namespace = q.namespace AND x.event_key = q.event_key)
                    THEN 'locked' ELSE 'not_found' END
           WHEN l.state = 'completed' AND l.claim_token = q.claim_token THEN 'already_completed'
           ELSE 'superseded'
       END
FROM request AS q
LEFT JOIN locked AS l ON l.namespace = q.namespace AND l.event_key = q.event_key
LEFT JOIN completed AS d ON d.namespace = q.namespace AND d.event_key = q.event_key
ORDER BY q.ord

-- name: event_complete_lock_timeout
-- For this transaction only: how long a completion may wait for a row lock.
SELECT set_config('lock_timeout', %(lock_timeout)s, true)

-- name: event_complete_waiting
-- One completion whose row another transaction held: waits for the row (up
-- to the lock timeout), then applies the same rule.
SELECT inboxd_complete_event(%(namespace)s, %(event_key)s, %(claim_token)s, %(disposition)s, %(reason)s,
                             %(now)s::timestamptz)

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
SELECT state, event_type, payload IS NOT NULL
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
