-- Presence of Work streams (store/presence.py): each server process
-- replaces its own rows in one statement per period, and Stats counts the
-- connected workers per namespace from every process's fresh rows
-- (migrations/0017_work_stream_presence.sql).

-- name: presence_replace
-- One process's rows, whole: what it writes now is upserted, its rows not in
-- it are deleted (the streams that ended), and so are other processes' rows
-- not refreshed for %(forget_after)s (processes that died). One statement,
-- whatever the number of streams; an empty set clears the process's rows.
-- The DELETE sees the table as it stood before the statement, so it never
-- touches a row the upsert writes (its own rows are kept by the NOT EXISTS,
-- the process's own by the process_id).
WITH mine AS (
    SELECT * FROM unnest(%(worker_ids)s::text[], %(covers)s::text[], %(targets)s::text[],
                         %(streams)s::int[], %(held)s::int[]) AS m(worker_id, covers, target, streams, held)
), written AS (
    INSERT INTO inbox_presence AS p (process_id, worker_id, covers, target, streams, held, seen_at)
    SELECT %(process_id)s, worker_id, covers, target, streams, held, inboxd_now(%(now)s) FROM mine
    ON CONFLICT (process_id, worker_id, covers, target) DO UPDATE
    SET streams = excluded.streams, held = excluded.held, seen_at = excluded.seen_at
)
DELETE FROM inbox_presence AS p
WHERE (p.process_id = %(process_id)s
       AND NOT EXISTS (SELECT 1 FROM mine
                       WHERE mine.worker_id = p.worker_id AND mine.covers = p.covers AND mine.target = p.target))
   OR (p.process_id <> %(process_id)s AND p.seen_at < inboxd_now(%(now)s) - %(forget_after)s::interval)

-- name: presence_connected_workers
-- Per namespace given: the distinct workers with a live Work stream whose
-- subscription covers it (named, matched by a grant's LIKE pattern, or every
-- namespace), from the rows of every process written within %(fresh_for)s.
-- Streams without a worker id count as one worker per process. Three joins,
-- not one with an OR: the named namespaces (most rows) join by equality, so
-- Stats over many namespaces and thousands of streams stays a hash join.
WITH live AS (
    SELECT covers, target, (worker_id, CASE WHEN worker_id = '' THEN process_id ELSE '' END) AS worker
    FROM inbox_presence
    WHERE seen_at > inboxd_now(%(now)s) - %(fresh_for)s::interval
), names AS (
    SELECT DISTINCT namespace FROM unnest(%(namespaces)s::text[]) AS n(namespace)
), covered AS (
    SELECT n.namespace, l.worker FROM names AS n JOIN live AS l ON l.covers = 'namespace' AND l.target = n.namespace
    UNION ALL
    SELECT n.namespace, l.worker FROM names AS n JOIN live AS l ON l.covers = 'pattern' AND n.namespace LIKE l.target
    UNION ALL
    SELECT n.namespace, l.worker FROM names AS n CROSS JOIN live AS l WHERE l.covers = 'every'
)
SELECT namespace, count(DISTINCT worker) FROM covered GROUP BY namespace
