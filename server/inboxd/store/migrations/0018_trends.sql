-- The console's trends (issue 32): per namespace, how many events were
-- accepted, completed and dead-lettered each minute, and how old the oldest
-- claimable event was, over the last hours. Kept from what the server
-- already counts, not a second metrics system.
--
-- Each server process writes its own minute's tally (one statement a minute,
-- nothing when idle), so a minute may hold several rows per namespace, one
-- per process and replica: readers sum them. No key, hence no conflict to
-- resolve between writers.
CREATE TABLE inbox_trend_counts (
    minute timestamptz NOT NULL,
    namespace text NOT NULL,
    accepted bigint NOT NULL DEFAULT 0,
    completed bigint NOT NULL DEFAULT 0,
    dead_lettered bigint NOT NULL DEFAULT 0
);

CREATE INDEX inbox_trend_counts_by_minute ON inbox_trend_counts (minute, namespace);

-- One replica at a time records each namespace's oldest-claimable age once
-- a minute (an advisory lock): one row per namespace and minute.
CREATE TABLE inbox_trend_ages (
    minute timestamptz NOT NULL,
    namespace text NOT NULL,
    oldest_claimable_seconds double precision NOT NULL,
    PRIMARY KEY (minute, namespace)
);
