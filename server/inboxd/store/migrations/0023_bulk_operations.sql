-- Bulk operations (DESIGN, Bulk operations; issue 30): replay or ignore every
-- event a filter matches, in the background, in chunks of one transaction
-- each (store/bulk_operations.py, queries/bulk.sql).

-- One operation: its filter, its action, its state and counts, and who
-- started it and why (the audit of the act as one). `cursor` is the position
-- in inbox_bulk_matches of the last match a chunk dealt with, committed with
-- that chunk's changes: a runner that dies between two chunks leaves the
-- next one exactly where it stopped, and no match is dealt with twice.
CREATE TABLE inbox_bulk_operations (
    id                uuid             PRIMARY KEY,
    namespace_pattern text             NOT NULL,
    like_pattern      text             NOT NULL,
    event_types       text[]           NOT NULL,
    states            text[]           NOT NULL,
    accepted_from     timestamptz,
    accepted_until    timestamptz,
    error_contains    text             NOT NULL,
    ordering_key      text             NOT NULL,
    action            text             NOT NULL,
    reason            text             NOT NULL,
    rate              double precision NOT NULL,
    dry_run           boolean          NOT NULL,
    state             text             NOT NULL,
    matched           bigint           NOT NULL DEFAULT 0,
    done              bigint           NOT NULL DEFAULT 0,
    skipped           bigint           NOT NULL DEFAULT 0,
    cursor            bigint           NOT NULL DEFAULT 0,
    actor             text             NOT NULL,
    started_at        timestamptz      NOT NULL,
    finished_at       timestamptz,
    cancelled_by      text             NOT NULL DEFAULT '',
    cancel_reason     text             NOT NULL DEFAULT '',
    error             text             NOT NULL DEFAULT '',
    CONSTRAINT inbox_bulk_operations_action_known CHECK (action IN ('replay', 'ignore')),
    CONSTRAINT inbox_bulk_operations_state_known CHECK (state IN ('running', 'done', 'cancelled', 'failed')),
    CONSTRAINT inbox_bulk_operations_rate_bounded CHECK (rate >= 0 AND rate <= 10000),
    CONSTRAINT inbox_bulk_operations_finished_when_ended CHECK ((state = 'running') = (finished_at IS NULL)),
    CONSTRAINT inbox_bulk_operations_dry_runs_end_at_once CHECK (NOT dry_run OR state = 'done' AND done = 0),
    CONSTRAINT inbox_bulk_operations_counts_within_matches CHECK (done >= 0 AND skipped >= 0 AND done + skipped <= matched)
);

-- The runners look for RUNNING operations; the listing is newest first.
CREATE INDEX inbox_bulk_operations_running ON inbox_bulk_operations (started_at) WHERE state = 'running';
CREATE INDEX inbox_bulk_operations_listing ON inbox_bulk_operations (started_at DESC, id DESC);

-- The events an operation matched when it started, numbered in the order it
-- deals with them (oldest accepted first). A chunk reads the next positions
-- after the cursor by this primary key and reaches each event by its own:
-- a chunk costs its size in rows however large the inbox is. A match whose
-- event moved on (claimed, completed, replayed, deleted) by the time its
-- chunk came is skipped, and counted. The rows go when the operation ends.
CREATE TABLE inbox_bulk_matches (
    operation uuid   NOT NULL REFERENCES inbox_bulk_operations (id) ON DELETE CASCADE,
    position  bigint NOT NULL,
    namespace text   NOT NULL,
    event_key text   NOT NULL,
    PRIMARY KEY (operation, position)
);

-- Each event an operation changes gets the audit row a single Replay or
-- Discard writes, naming the operation (NULL: an operator's single act).
ALTER TABLE inbox_replays ADD COLUMN bulk_operation uuid;
ALTER TABLE inbox_operator_actions ADD COLUMN bulk_operation uuid;
CREATE INDEX inbox_replays_bulk_operation ON inbox_replays (bulk_operation) WHERE bulk_operation IS NOT NULL;
CREATE INDEX inbox_operator_actions_bulk_operation ON inbox_operator_actions (bulk_operation)
    WHERE bulk_operation IS NOT NULL;

-- Whether an event matches an operation's filter, written once for the match
-- at the start (bulk_matches_insert) and the look again in each chunk
-- (event_bulk_replay, event_bulk_ignore): a match whose event no longer
-- matches by then moved on. The state is the chunk's own test beside it
-- (the action's states). A REPLAY needs a payload to replay, as Replay does.
-- One SELECT of an expression: the planner inlines it.
CREATE FUNCTION inboxd_bulk_filter_matches(e inbox_events, o inbox_bulk_operations) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT e.namespace LIKE o.like_pattern
       AND e.state = ANY (o.states)
       AND (cardinality(o.event_types) = 0 OR e.event_type = ANY (o.event_types))
       AND (o.accepted_from IS NULL OR e.accepted_at >= o.accepted_from)
       AND (o.accepted_until IS NULL OR e.accepted_at < o.accepted_until)
       AND (o.error_contains = '' OR strpos(coalesce(e.last_error, ''), o.error_contains) > 0)
       AND (o.ordering_key = '' OR e.ordering_key = o.ordering_key)
       AND (o.action <> 'replay' OR e.payload IS NOT NULL OR e.raw_payload IS NOT NULL)
$$;
