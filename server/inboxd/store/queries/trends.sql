-- The console's trends (store/trends.py): per-minute counts each server
-- process writes, the oldest-claimable age one replica records, and the
-- window they are kept for. Minutes are on the server's clock
-- (inboxd_now(%(now)s)), so tests move it instead of sleeping.

-- name: trend_counts_record
-- One process's tally since its last write, all namespaces in one statement:
-- %(counts)s is a JSON array of {namespace, accepted, completed, dead_lettered}.
INSERT INTO inbox_trend_counts (minute, namespace, accepted, completed, dead_lettered)
SELECT date_trunc('minute', inboxd_now(%(now)s)), c.namespace, c.accepted, c.completed, c.dead_lettered
FROM jsonb_to_recordset(%(counts)s::jsonb) AS c(namespace text, accepted bigint, completed bigint, dead_lettered bigint)

-- name: trend_ages_record
-- This minute's oldest-claimable age per namespace (seconds), from the Stats
-- query; a second pass within the same minute keeps the later figure.
INSERT INTO inbox_trend_ages (minute, namespace, oldest_claimable_seconds)
SELECT date_trunc('minute', inboxd_now(%(now)s)), a.namespace, a.seconds
FROM jsonb_to_recordset(%(ages)s::jsonb) AS a(namespace text, seconds double precision)
ON CONFLICT (minute, namespace) DO UPDATE SET oldest_claimable_seconds = excluded.oldest_claimable_seconds

-- name: trend_counts_forget
-- The minutes the window no longer shows: it keeps the current minute and
-- those after the one a window ago, as trend_counts_read reads.
DELETE FROM inbox_trend_counts WHERE minute <= date_trunc('minute', inboxd_now(%(now)s)) - %(window)s::interval

-- name: trend_ages_forget
DELETE FROM inbox_trend_ages WHERE minute <= date_trunc('minute', inboxd_now(%(now)s)) - %(window)s::interval

-- name: trend_counts_read
-- The window's counts of some namespaces, summed over the processes and
-- replicas that wrote them, one row per namespace and minute.
SELECT namespace, minute, sum(accepted)::bigint, sum(completed)::bigint, sum(dead_lettered)::bigint
FROM inbox_trend_counts
WHERE minute > date_trunc('minute', inboxd_now(%(now)s)) - %(window)s::interval
  AND namespace = ANY(%(namespaces)s::text[])
GROUP BY namespace, minute
ORDER BY namespace, minute

-- name: trend_ages_read
SELECT namespace, minute, oldest_claimable_seconds
FROM inbox_trend_ages
WHERE minute > date_trunc('minute', inboxd_now(%(now)s)) - %(window)s::interval
  AND namespace = ANY(%(namespaces)s::text[])
ORDER BY namespace, minute

-- name: trend_now
-- The server clock's current minute, where the charts end.
SELECT date_trunc('minute', inboxd_now(%(now)s))
