-- A Replay is an operator's explicit wish (DESIGN, Fine print, Ordering
-- keys): a replayed event is delivered even when it is stale, flagged, and
-- the worker decides. Before this, the next Claim judged a replayed keyed
-- event at or below its key's applied revision stale and completed it
-- IGNORED, over the APPLIED it had had: an operator could never re-run the
-- latest applied event of a key, the commonest reason to replay.

-- Set by Replay and never cleared: only a Replay reopens a finished event, so
-- an open event with it set is one an operator asked for again, through its
-- retries, releases and expired leases alike. The claim statement hands such
-- an event out in its key's turn, `stale` set, instead of completing it.
-- A constant default: no table rewrite.
ALTER TABLE inbox_events ADD COLUMN replayed boolean NOT NULL DEFAULT false;

-- What the event had been before the Replay, beside state_before: Replay
-- clears the event's disposition (a PENDING event has none), and its audit row
-- keeps it, so the disposition it had stays in its history. NULL for an event
-- that was DEAD_LETTERED, and for replays recorded before this migration.
ALTER TABLE inbox_replays
    ADD COLUMN disposition_before text,
    ADD COLUMN disposition_reason_before text;

-- The key test of 0008, with one change: an earlier open event of the key
-- that is stale but replayed is no longer stepped over as one to be ignored,
-- since it is to be delivered in its turn. The candidate's own exemption
-- comes from the caller: the claim statement passes p_ignore_stale false for
-- a replayed candidate, so it waits for its key like any other event.
CREATE OR REPLACE FUNCTION inboxd_next_of_key(
    p_namespace text, p_ordering_key text, p_event_key text, p_revision bigint, p_accepted_at timestamptz,
    p_ignore_stale boolean
) RETURNS boolean
LANGUAGE sql STABLE COST 1 AS $$
    SELECT EXISTS (
        SELECT FROM inbox_ordering_keys AS k
        WHERE k.namespace = p_namespace AND k.ordering_key = p_ordering_key
          AND (k.holder = p_event_key
               OR p_ignore_stale AND p_revision > 0 AND p_revision <= k.applied_revision
               OR k.holder IS NULL AND NOT EXISTS (
                   SELECT FROM inbox_events AS o
                   WHERE o.namespace = p_namespace AND o.ordering_key = p_ordering_key
                     AND o.ordering_key <> '' AND o.due_at IS NOT NULL
                     AND (o.revision, o.accepted_at, o.event_key) < (p_revision, p_accepted_at, p_event_key)
                     AND NOT (p_ignore_stale AND o.revision > 0 AND o.revision <= k.applied_revision
                              AND NOT o.replayed))))
$$;
