-- Accepting events. One batch of events is one transaction; Accept is a batch of one.
-- Parameters are parallel arrays, one element per event, in request order.

-- name: accept_insert
-- Inserts every event whose key is new. Rows go in key order so that
-- concurrent batches lock keys in the same order and cannot deadlock; among
-- copies of one key inside the batch, the first in request order wins.
INSERT INTO inbox_events AS e
    (namespace, event_key, event_type, payload, metadata, message_id, ordering_key,
     revision, state, accepted_at, available_at, due_at, updated_at)
SELECT i.namespace, i.event_key, i.event_type, i.payload::jsonb, i.metadata::jsonb,
       i.message_id, i.ordering_key, i.revision, 'pending', c.now,
       coalesce(i.available_at, c.now), coalesce(i.available_at, c.now), c.now
FROM unnest(%(namespaces)s::text[], %(event_keys)s::text[], %(event_types)s::text[],
            %(payloads)s::text[], %(metadata)s::text[], %(message_ids)s::text[],
            %(ordering_keys)s::text[], %(revisions)s::bigint[], %(available_ats)s::timestamptz[])
     WITH ORDINALITY AS i(namespace, event_key, event_type, payload, metadata, message_id,
                          ordering_key, revision, available_at, ord)
CROSS JOIN (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS c
ORDER BY i.namespace, i.event_key, i.ord
ON CONFLICT (namespace, event_key) DO NOTHING
RETURNING e.namespace, e.event_key, e.state, e.accepted_at

-- name: accept_compare
-- For events that were not inserted, the stored row and whether the copy is
-- the same event: same type and an equal JSON value (jsonb equality ignores
-- key order and whitespace). A payload dropped by retention cannot be
-- compared; the key was already processed, so the copy counts as a duplicate.
SELECT i.ord, e.state, e.accepted_at,
       (e.event_type = i.event_type AND coalesce(e.payload = i.payload::jsonb, true)) AS same
FROM unnest(%(ords)s::bigint[], %(namespaces)s::text[], %(event_keys)s::text[],
            %(event_types)s::text[], %(payloads)s::text[])
     AS i(ord, namespace, event_key, event_type, payload)
JOIN inbox_events AS e ON e.namespace = i.namespace AND e.event_key = i.event_key

-- name: accept_record_conflicts
-- Keeps each conflicting copy for investigation; the original row is untouched.
INSERT INTO inbox_conflicts (namespace, event_key, event_type, payload, metadata, received_at)
SELECT i.namespace, i.event_key, i.event_type, i.payload::jsonb, i.metadata::jsonb,
       coalesce(%(now)s::timestamptz, now())
FROM unnest(%(namespaces)s::text[], %(event_keys)s::text[], %(event_types)s::text[],
            %(payloads)s::text[], %(metadata)s::text[])
     AS i(namespace, event_key, event_type, payload, metadata)
