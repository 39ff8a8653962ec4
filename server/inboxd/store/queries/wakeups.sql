-- The wake-up poller: one look per server process and interval on behalf of
-- every waiting Claim, instead of one claim query per waiter.

-- name: event_due_kinds
-- Which (namespace, event_type) the waiters want have due rows, and how many
-- (up to `cap` per namespace or for the any-namespace waiters). Reads no
-- rows of namespaces nobody waits for: per wanted namespace a range of
-- inbox_events_namespace_due; patterns are resolved by a skip scan, from each
-- pattern's literal prefix, of the namespaces that have open rows; waiters for any namespace share one walk
-- of inbox_events_due. An event_type of '' means any type. Takes no locks.
-- A keyed event counts only when it is its key's next (inboxd_next_of_key,
-- the Claim's own test): one waiting behind its key's holder is claimable by
-- nobody, and counting it woke waiters to look in vain, every interval. The
-- test runs only for keyed rows, so it costs this look what it costs a Claim
-- of the namespace (operations.md: a deep backlog behind one key), once per
-- interval, instead of each woken waiter's Claim paying it.
WITH RECURSIVE open_namespaces AS (
    SELECT p.prefix, (SELECT e.namespace FROM inbox_events AS e
                      WHERE e.due_at IS NOT NULL AND e.namespace COLLATE "C" >= p.prefix
                      ORDER BY e.namespace COLLATE "C"
                      LIMIT 1) AS namespace
    FROM unnest(%(prefixes)s::text[]) AS p(prefix)
    UNION ALL
    SELECT o.prefix, (SELECT e.namespace FROM inbox_events AS e
                      WHERE e.due_at IS NOT NULL AND e.namespace COLLATE "C" > o.namespace
                      ORDER BY e.namespace COLLATE "C"
                      LIMIT 1)
    FROM open_namespaces AS o
    WHERE starts_with(o.namespace, o.prefix)
), wanted AS (
    SELECT w.namespace, w.event_type
    FROM unnest(%(namespaces)s::text[], %(event_types)s::text[]) AS w(namespace, event_type)
    UNION
    SELECT o.namespace, p.event_type
    FROM open_namespaces AS o
    JOIN unnest(%(patterns)s::text[], %(pattern_types)s::text[]) AS p(pattern, event_type)
      ON o.namespace LIKE p.pattern
), per_namespace AS (
    SELECT namespace, bool_or(event_type = '') AS any_type, array_agg(event_type) AS event_types
    FROM wanted
    GROUP BY namespace
), found AS (
    SELECT d.namespace, d.event_type
    FROM per_namespace AS w CROSS JOIN LATERAL (
        SELECT e.namespace, e.event_type
        FROM inbox_events AS e
        WHERE e.namespace COLLATE "C" = w.namespace
          AND e.due_at <= inboxd_now(%(now)s)
          AND (w.any_type OR e.event_type = ANY(w.event_types))
          AND (e.ordering_key = '' OR inboxd_next_of_key(e.namespace, e.ordering_key, e.event_key, e.revision,
                                                         e.accepted_at, %(ignore_stale)s))
        ORDER BY e.due_at
        LIMIT %(cap)s
    ) AS d
    UNION ALL
    SELECT a.namespace, a.event_type FROM (
        SELECT e.namespace, e.event_type
        FROM inbox_events AS e
        WHERE cardinality(%(anywhere_types)s::text[]) > 0
          AND e.state IN ('pending', 'processing')
          AND e.due_at <= inboxd_now(%(now)s)
          AND ('' = ANY(%(anywhere_types)s::text[]) OR e.event_type = ANY(%(anywhere_types)s::text[]))
          AND (e.ordering_key = '' OR inboxd_next_of_key(e.namespace, e.ordering_key, e.event_key, e.revision,
                                                         e.accepted_at, %(ignore_stale)s))
        ORDER BY e.due_at
        LIMIT %(cap)s
    ) AS a
)
-- A paused namespace's due events are claimable by no one (flow control):
-- counting them woke its waiters to look in vain, every interval.
SELECT kinds.namespace, kinds.event_type, kinds.count
FROM (SELECT found.namespace, found.event_type, count(*) FROM found GROUP BY found.namespace, found.event_type) AS kinds
WHERE NOT inboxd_flow_paused(kinds.namespace)

-- name: event_next_of_keys
-- Whom finished keyed events wake (completed or dead-lettered, they freed
-- their key): per key, its next event when that is due now and nobody holds
-- the key yet (the first open one by (revision, accepted_at, event_key),
-- passing over stale ones a Claim would complete IGNORED), counted per
-- (namespace, event_type). Per finished event one primary-key probe, and for
-- a keyed one a probe of inbox_ordering_keys and one descent of
-- inbox_events_ordering_open. Takes no locks.
SELECT n.namespace, n.event_type, count(*)
FROM (SELECT DISTINCT f.namespace, f.ordering_key
      FROM unnest(%(namespaces)s::text[], %(event_keys)s::text[]) AS r(namespace, event_key)
      JOIN inbox_events AS f ON f.namespace = r.namespace AND f.event_key = r.event_key
      WHERE f.ordering_key <> '') AS r
JOIN inbox_ordering_keys AS k ON k.namespace = r.namespace AND k.ordering_key = r.ordering_key
CROSS JOIN LATERAL (
    SELECT e.namespace, e.event_key, e.event_type, e.due_at
    FROM inbox_events AS e
    WHERE e.namespace = r.namespace AND e.ordering_key = r.ordering_key
      AND e.ordering_key <> '' AND e.due_at IS NOT NULL
      AND NOT (%(ignore_stale)s AND e.revision > 0 AND e.revision <= k.applied_revision)
    ORDER BY e.revision, e.accepted_at, e.event_key
    LIMIT 1
) AS n
WHERE n.due_at <= inboxd_now(%(now)s) AND (k.holder IS NULL OR k.holder = n.event_key)
GROUP BY n.namespace, n.event_type
