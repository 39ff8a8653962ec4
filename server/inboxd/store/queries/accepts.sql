-- Accept's transition, (none) -> PENDING, and the probe that names a payload
-- PostgreSQL refused (store/accepts.py). One of the event's transition files:
-- the state diagram is the docstring of inboxd/store/events.py.
-- The rules every transition statement keeps (the claim token in the WHERE
-- clause, inboxd_now(%(now)s) for now, the fence written `state IS NOT
-- DISTINCT FROM 'processing'`) stand once, at the head of events.sql.

-- Accepting: (none) -> PENDING. One group of events (one caller's batch, or
-- several callers' events gathered by group commit) is one statement, so one
-- transaction and one round trip.

-- Two statements share the work, as parts: event_accept_many while no
-- subscription exists (the common case, and as lean as before subscriptions
-- were), and event_accept_fanned, which also inserts the subscriptions'
-- copies (fan-out, migration 0028). A second INSERT into inbox_events costs a
-- statement its setup (the table, its indexes, the arbiter, the triggers)
-- even when it inserts nothing: measured by EXPLAIN ANALYZE, 8 new events took
-- 0.45 ms to execute in the lean statement and 0.60-0.74 ms in one that held
-- the fan-out, with no subscription at all. So the server runs the lean one
-- until it learns otherwise (store/subscriptions.py, FanOutMode), and the
-- lean one checks that it may: with any subscription it does nothing at all
-- and answers no row, and the server runs the fanned one instead, in the
-- same round. No replica can therefore accept an event without the copies
-- that the subscriptions standing in its snapshot ask for.

-- part: accept_incoming
WITH incoming AS (
    -- first_pos: which copy of its key wins the insert (the first in request order).
    -- A field left at its default has no extras: NULL here.
    SELECT p.pos, p.namespace, p.event_key, p.event_type, p.payload,
           coalesce(x.content_type, 'application/json') AS content_type, coalesce(x.json, true) AS is_json,
           coalesce(x.metadata, '{}') AS metadata, coalesce(x.message_id, '') AS message_id,
           coalesce(x.ordering_key, '') AS ordering_key, coalesce(x.revision, 0) AS revision,
           x.traceparent, x.tracestate,
           inboxd_now(%(now)s) AS accepted_at, coalesce(x.available_at, inboxd_now(%(now)s)) AS available_at,
           min(p.pos) OVER (PARTITION BY p.namespace, p.event_key) AS first_pos
    FROM unnest(%(namespaces)s::text[], %(event_keys)s::text[], %(event_types)s::text[], %(payloads)s::bytea[])
         WITH ORDINALITY AS p(namespace, event_key, event_type, payload, pos)
    LEFT JOIN json_to_recordset(%(extras)s::json)
         AS x(pos bigint, metadata jsonb, message_id text, ordering_key text, revision bigint,
              available_at timestamptz, content_type text, json boolean, traceparent text, tracestate text)
         ON x.pos = p.pos
-- part: accept_inserted
), inserted AS (
    INSERT INTO inbox_events AS e
        (namespace, event_key, event_type, raw_payload, content_type, metadata, message_id, ordering_key,
         revision, state, accepted_at, available_at, due_at, updated_at, traceparent, tracestate)
    SELECT i.namespace, i.event_key, i.event_type, i.payload, i.content_type, i.metadata,
           i.message_id, i.ordering_key, i.revision, 'pending', i.accepted_at,
           i.available_at, i.available_at, i.accepted_at, i.traceparent, i.tracestate
    FROM incoming AS i
    ORDER BY i.namespace, i.event_key, i.pos
    ON CONFLICT (namespace, event_key) DO NOTHING
    RETURNING e.namespace, e.event_key, e.event_type, e.raw_payload, e.content_type, e.state, e.accepted_at,
              e.traceparent, e.tracestate
-- part: accept_fan
), fan AS (
    -- Fan-out (subscriptions, migration 0028): each event this statement
    -- inserted, once more per subscription whose pattern (and types, when it
    -- names any) it matches, as a copy of the subscriber's own in the
    -- namespace `<subscriber>/<origin namespace>`: same key, type, payload,
    -- metadata, content type, ordering key, revision, availability and trace
    -- context. Only a new event is copied: a repeat (DUPLICATE or CONFLICT)
    -- leaves each copy as it leaves its original, and a copy is never copied
    -- again, nor is an event under the subscriber's own `<name>/` copied to
    -- it. The EXISTS is a one-time filter: with no subscription the plan
    -- stops at one probe of an empty table, whatever the group holds.
    SELECT i.pos, s.name || '/' || i.namespace AS namespace, i.event_key, i.event_type, i.payload, i.content_type,
           i.metadata, i.message_id, i.ordering_key, i.revision, i.accepted_at, i.available_at,
           i.traceparent, i.tracestate
    FROM inserted AS w
    JOIN incoming AS i ON i.namespace = w.namespace AND i.event_key = w.event_key AND i.pos = i.first_pos
    JOIN inbox_subscriptions AS s
         ON i.namespace LIKE s.like_pattern AND (s.event_types = '{}' OR i.event_type = ANY (s.event_types))
         AND NOT starts_with(i.namespace, s.name || '/')
    WHERE EXISTS (SELECT 1 FROM inbox_subscriptions)
), fanned AS (
    -- Insert-if-absent as the originals are, in key order: a copy's key that
    -- already holds an event (a COPY bulk operation's, or a copy whose
    -- original retention deleted) keeps it untouched.
    INSERT INTO inbox_events AS e
        (namespace, event_key, event_type, raw_payload, content_type, metadata, message_id, ordering_key,
         revision, state, accepted_at, available_at, due_at, updated_at, traceparent, tracestate)
    SELECT f.namespace, f.event_key, f.event_type, f.payload, f.content_type, f.metadata,
           f.message_id, f.ordering_key, f.revision, 'pending', f.accepted_at,
           f.available_at, f.available_at, f.accepted_at, f.traceparent, f.tracestate
    FROM fan AS f
    ORDER BY f.namespace, f.event_key
    ON CONFLICT (namespace, event_key) DO NOTHING
    RETURNING e.namespace, e.event_key
-- part: accept_judged
), judged AS (
    -- A repeat is the same event when its type matches and its payload is the
    -- same (inboxd_same_payload, migration 0019: a JSON payload equal as a
    -- JSON value, so key order and whitespace do not count; any other by its
    -- bytes; the content type never counts). A payload dropped by retention
    -- cannot be compared; the key was already processed, so the copy counts
    -- as a duplicate.
    SELECT i.pos, i.namespace, i.event_key, i.event_type, i.payload, i.content_type, i.metadata,
           CASE
               WHEN w.event_key IS NOT NULL AND i.pos = i.first_pos THEN 'accepted'
               WHEN w.event_key IS NOT NULL THEN
                   CASE WHEN w.event_type = i.event_type
                             AND inboxd_same_payload(w.raw_payload, NULL, w.content_type, i.payload, i.is_json)
                        THEN 'duplicate' ELSE 'conflict' END
               WHEN s.found THEN
                   CASE WHEN s.event_type = i.event_type
                             AND inboxd_same_payload(s.raw_payload, s.payload, s.content_type, i.payload, i.is_json)
                        THEN 'duplicate' ELSE 'conflict' END
               ELSE 'retry'
           END AS outcome,
           coalesce(w.state, s.state) AS state,
           coalesce(w.accepted_at, s.accepted_at) AS accepted_at,
           -- The stored event's trace context (its first delivery's), for a repeat's span to link to.
           CASE WHEN w.event_key IS NOT NULL THEN w.traceparent ELSE s.traceparent END AS traceparent,
           CASE WHEN w.event_key IS NOT NULL THEN w.tracestate ELSE s.tracestate END AS tracestate
    FROM incoming AS i
    LEFT JOIN inserted AS w ON w.namespace = i.namespace AND w.event_key = i.event_key
    -- A probe of the primary key per repeat, under any plan: as a plain join,
    -- a generic plan (a set-returning function is estimated at 100 rows) chose
    -- a hash join over a sequential scan of inbox_events, which grew with the
    -- table until autoanalyze replanned it. LIMIT keeps the subquery a loop.
    LEFT JOIN LATERAL (
        SELECT true AS found, s.event_type, s.raw_payload, s.payload, s.content_type, s.state, s.accepted_at,
               s.traceparent, s.tracestate
        FROM inbox_events AS s
        WHERE w.event_key IS NULL AND s.namespace = i.namespace AND s.event_key = i.event_key
        LIMIT 1
    ) AS s ON true
-- part: accept_settled
), copies AS (
    -- Each conflicting copy's number among its key's copies: those kept before,
    -- then this group's in request order. Conflicts are rare, so the count runs
    -- for few rows, and stays short: at most 20 rows are kept per key.
    SELECT j.pos, j.namespace, j.event_key, j.event_type, j.payload, j.content_type, j.metadata,
           sha256(j.payload) AS payload_sha256, octet_length(j.payload) AS payload_bytes,
           (SELECT count(*) FROM inbox_conflicts AS c WHERE c.namespace = j.namespace AND c.event_key = j.event_key)
           + row_number() OVER (PARTITION BY j.namespace, j.event_key ORDER BY j.pos) AS copy_number
    FROM conflicting AS j
), kept AS (
    -- The first 20 copies of a key are kept whole (migration 0015).
    INSERT INTO inbox_conflicts
        (namespace, event_key, event_type, raw_payload, content_type, metadata, received_at,
         payload_sha256, payload_bytes)
    SELECT c.namespace, c.event_key, c.event_type, c.payload, c.content_type, c.metadata, inboxd_now(%(now)s),
           c.payload_sha256, c.payload_bytes
    FROM copies AS c
    WHERE c.copy_number <= 20
    ORDER BY c.pos
), counted AS (
    -- The rest are counted, with the digest of the last.
    INSERT INTO inbox_conflict_overflow AS o
        (namespace, event_key, copies, first_received_at, last_received_at, last_payload_sha256)
    SELECT c.namespace, c.event_key, count(*), inboxd_now(%(now)s), inboxd_now(%(now)s),
           (array_agg(c.payload_sha256 ORDER BY c.pos DESC))[1]
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
-- One row per event that is not ACCEPTED, and one row (pos NULL) for all those
-- that are: they share their state and acceptance time, so a group of new
-- events answers one row, not one per event, for the server to read.
-- it is due only with duplicates, whose rows are read.
SELECT pos, outcome, state, accepted_at, traceparent, tracestate
FROM judged LEFT JOIN durable ON true WHERE outcome <> 'accepted'
UNION ALL
(SELECT NULL, 'accepted', state, accepted_at, NULL, NULL FROM inserted LIMIT 1)

-- name: event_accept_many
-- Inserts every event whose key is new, judges every other one against the
-- stored row (or against the copy of this group that won the insert), and
-- keeps each conflicting copy for investigation, in one statement.
--
-- The events travel as one binary array per column (store/arrays.py): the
-- namespaces, event keys and event types as text[], the payloads as bytea[],
-- element pos of each the event at pos. unnest splits them; nothing is
-- parsed or unescaped on either side, and each payload is the caller's bytes
-- as they came, stored as they are. The fields most events leave at their
-- defaults (metadata as an object, message_id, ordering_key, revision,
-- available_at, content_type, json: false for a payload of a type that is
-- not JSON, and the delivery's traceparent and tracestate) travel as one JSON
-- array, %(extras)s, holding an object (with its pos) only for an event
-- that sets one: most groups send `[]`.
-- PostgreSQL parses no payload to insert it (the server validated each JSON
-- one); it parses JSON only to judge a repeat whose bytes differ from the
-- stored payload's (inboxd_same_payload).
--
-- Rows go in key order so that concurrent groups lock keys in the same order
-- and cannot deadlock; among copies of one key in a group, the first in
-- request order (the lowest pos) wins. A key that another transaction
-- committed after this statement's snapshot was taken is neither inserted
-- nor visible here: its outcome is 'retry', and the caller runs those events
-- again.
--
-- With any subscription standing, it does nothing and answers no row (see
-- above): the caller then runs event_accept_fanned.
-- use: accept_incoming
    WHERE NOT EXISTS (SELECT 1 FROM inbox_subscriptions)
-- use: accept_inserted
-- use: accept_judged
), conflicting AS (
    SELECT j.pos, j.namespace, j.event_key, j.event_type, j.payload, j.content_type, j.metadata
    FROM judged AS j
    WHERE j.outcome = 'conflict'
-- use: accept_settled

-- name: event_accept_fanned
-- event_accept_many with the subscriptions' copies: each event it inserts is
-- inserted again for each subscription it matches, and a conflicting
-- delivery is kept for each copy as for its original. Its rows are
-- event_accept_many's, then one row per copy inserted (outcome 'copied', pos
-- its original's, its namespace in the traceparent column) for the server
-- to wake the copy's claimers.
-- use: accept_incoming
-- use: accept_inserted
-- use: accept_fan
-- use: accept_judged
), conflicting AS (
    -- The conflicting deliveries, each kept for its key and, as its original
    -- keeps it, for each subscription's copy of that original that stands:
    -- the subscriber's operators see on the copy what the original's see.
    SELECT j.pos, j.namespace, j.event_key, j.event_type, j.payload, j.content_type, j.metadata
    FROM judged AS j
    WHERE j.outcome = 'conflict'
    UNION ALL
    SELECT j.pos, s.name || '/' || j.namespace, j.event_key, j.event_type, j.payload, j.content_type, j.metadata
    FROM judged AS j
    JOIN inbox_subscriptions AS s
         ON j.namespace LIKE s.like_pattern AND (s.event_types = '{}' OR j.event_type = ANY (s.event_types))
         AND NOT starts_with(j.namespace, s.name || '/')
    WHERE j.outcome = 'conflict'
      AND EXISTS (SELECT 1 FROM inbox_events AS c WHERE c.namespace = s.name || '/' || j.namespace
                                                    AND c.event_key = j.event_key)
-- use: accept_settled
UNION ALL
SELECT f.pos, 'copied', NULL, NULL, f.namespace, NULL
FROM fan AS f JOIN fanned AS x ON x.namespace = f.namespace AND x.event_key = f.event_key

-- name: event_payload_probe
-- Whether jsonb takes this JSON payload: the diagnosis after a group failed
-- on a value, so the refusal can name its event. Nothing is written.
SELECT convert_from(%(payload)s::bytea, 'UTF8')::jsonb IS NOT NULL
