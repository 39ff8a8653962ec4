-- Ordering keys (migration 0008): what operators read about them.

-- name: ordering_key_blocked_count
-- Per namespace: the ordering keys with a PENDING event claimable now by its
-- own schedule that no Claim may take, because another event of its key comes
-- first (it holds the key: in flight, retrying or released; or, when none
-- does, it is first in order but not due yet), and how long the oldest such
-- event has waited since it became due. A key held for long, or a head
-- delayed far ahead, shows here instead of stalling silently. Reads only open
-- keyed rows (inbox_events_ordering_open).
SELECT e.namespace, count(DISTINCT e.ordering_key), inboxd_now(%(now)s) - min(e.due_at)
FROM inbox_events AS e
JOIN inbox_ordering_keys AS k ON k.namespace = e.namespace AND k.ordering_key = e.ordering_key
WHERE e.ordering_key <> '' AND e.due_at IS NOT NULL
  AND e.state = 'pending' AND e.due_at <= inboxd_now(%(now)s)
  AND (%(namespace)s::text IS NULL OR e.namespace = %(namespace)s::text)
  AND e.event_key IS DISTINCT FROM k.holder
  AND (k.holder IS NOT NULL OR EXISTS (
          SELECT FROM inbox_events AS o
          WHERE o.namespace = e.namespace AND o.ordering_key = e.ordering_key
            AND o.ordering_key <> '' AND o.due_at IS NOT NULL
            AND (o.revision, o.accepted_at, o.event_key) < (e.revision, e.accepted_at, e.event_key)))
GROUP BY e.namespace

-- name: ordering_key_blocker
-- The event a PENDING keyed event waits behind, if any: the one holding its
-- key, or, when none does, the first open event of the key before it in
-- order (revision, then acceptance). No row, or NULL: it waits for nobody.
SELECT coalesce(
    (SELECT k.holder FROM inbox_ordering_keys AS k
     WHERE k.namespace = e.namespace AND k.ordering_key = e.ordering_key AND k.holder <> e.event_key),
    (SELECT o.event_key FROM inbox_events AS o
     WHERE o.namespace = e.namespace AND o.ordering_key = e.ordering_key
       AND o.ordering_key <> '' AND o.due_at IS NOT NULL
       AND (o.revision, o.accepted_at, o.event_key) < (e.revision, e.accepted_at, e.event_key)
     ORDER BY o.revision, o.accepted_at, o.event_key
     LIMIT 1))
FROM inbox_events AS e
WHERE e.namespace = %(namespace)s AND e.event_key = %(event_key)s
  AND e.state = 'pending' AND e.ordering_key <> ''
  -- An event holding its own key (released, retrying) waits for nobody.
  AND NOT EXISTS (SELECT FROM inbox_ordering_keys AS h
                  WHERE h.namespace = e.namespace AND h.ordering_key = e.ordering_key AND h.holder = e.event_key)
