-- Who is connected (issue 27 item 5, issue 32 item 2): each server process
-- writes what its live Work streams are, so that Stats, `inboxd stats` and
-- the console count connected workers across every process and replica, not
-- only the one an admin call lands on. One row per (process, worker, what it
-- covers); a process replaces its own rows in one statement per period
-- (store/queries/presence.sql, presence_replace) while it has streams, and
-- once more after its last one ends. A row not refreshed for three periods
-- counts as gone (its process died); an hour later any writer deletes it.
--
-- UNLOGGED: presence is a few seconds' truth, rewritten every period. It
-- costs no WAL, waits for no synchronous standby, and after a crash or a
-- failover the table starts empty and fills again within a period.
CREATE UNLOGGED TABLE inbox_presence (
    -- The server process: host/pid/a start's own suffix.
    process_id text NOT NULL,
    worker_id text NOT NULL,
    -- What the streams cover: a named namespace, a LIKE pattern (a token's
    -- grants, for a subscription that named none), or every namespace.
    covers text NOT NULL,
    -- The namespace or the LIKE pattern; '' for every namespace.
    target text NOT NULL,
    -- This worker's live streams in the process that cover the target, and
    -- the events they hold.
    streams integer NOT NULL,
    held integer NOT NULL,
    seen_at timestamptz NOT NULL,
    PRIMARY KEY (process_id, worker_id, covers, target),
    CONSTRAINT inbox_presence_covers_known CHECK (covers IN ('namespace', 'pattern', 'every')),
    CONSTRAINT inbox_presence_every_has_no_target CHECK ((covers = 'every') = (target = '')),
    CONSTRAINT inbox_presence_counts CHECK (streams > 0 AND held >= 0)
);
