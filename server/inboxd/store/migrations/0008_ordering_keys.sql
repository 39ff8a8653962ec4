-- Ordering keys: events that share (namespace, ordering_key), the key not
-- empty, are claimed one at a time, in order, and a revision at or below the
-- key's highest APPLIED one is stale (DESIGN, Fine print, Ordering keys).
--
-- Events with an empty ordering key never touch anything here: the triggers
-- below fire only for keyed rows (their WHEN clauses are checked in the
-- executor, before any function call), the index is partial, and the claim
-- statement probes the key table only for a keyed candidate.

-- One row per ordering key ever accepted. No foreign key: the applied
-- revision outlives the events (retention deletes them), so a stale copy
-- arriving after retention is still recognised.
CREATE TABLE inbox_ordering_keys (
    namespace        text   NOT NULL,
    ordering_key     text   NOT NULL,
    -- The highest revision completed as APPLIED; 0 while none.
    applied_revision bigint NOT NULL DEFAULT 0,
    -- The event that holds the key: set by the Claim that hands it out, kept
    -- while it fails and retries, is released or has its lease expire (so the
    -- same event comes back first), cleared when it is completed or
    -- dead-lettered. NULL: the key's next event is its first open one in
    -- (revision, accepted_at, event_key) order.
    holder           text,
    PRIMARY KEY (namespace, ordering_key),
    CONSTRAINT inbox_ordering_keys_key_not_empty CHECK (ordering_key <> '')
);

-- A keyed event's place in its key: the open events of one key in claim order.
-- The claim statement asks "is any open event of my key before me?" with one
-- descent; the wake-up of a key's next event and Stats read it too.
CREATE INDEX inbox_events_ordering_open
    ON inbox_events (namespace, ordering_key, revision, accepted_at, event_key)
    WHERE ordering_key <> '' AND due_at IS NOT NULL;

-- Whether a keyed event is its key's next, in the calling statement's
-- snapshot: the event holding the key; a stale one when stale events are
-- ignored (they neither need the key nor hold back the events after it); or,
-- when nothing holds the key, the first open one by (revision, accepted_at,
-- event_key), stale ones to be ignored aside. The claim statement's
-- pre-filter; its key-row lock then decides on the latest version.
--
-- A function, not the same EXISTS written inline: the planner costs a subplan
-- in a scan's filter as if it ran for every row, the OR that skips it for
-- unkeyed rows notwithstanding. Under a generic plan (the scan estimated at a
-- tenth of the table) that put the claim statement over jit_above_cost beside
-- a 100,000-event backlog, and every execution paid about 100 ms to
-- JIT-compile it. A SQL function whose body holds a sublink is never inlined,
-- so its declared cost is what the planner sees. It runs only for keyed rows,
-- about 10 µs each (a plpgsql body cost as much and, under custom plans,
-- planned its query on every call).
CREATE FUNCTION inboxd_next_of_key(
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
                     AND NOT (p_ignore_stale AND o.revision > 0 AND o.revision <= k.applied_revision))))
$$;

-- Accepting a keyed event makes sure its key has a row, so a Claim can lock
-- it. Looked up first: the key row exists for all but a key's first event, and
-- the plain read never waits, where an INSERT ... ON CONFLICT would wait for a
-- transaction that is updating the key row (a worker completing inside its
-- own transaction, say).
CREATE FUNCTION inboxd_ordering_key_accepted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM inbox_ordering_keys WHERE namespace = NEW.namespace AND ordering_key = NEW.ordering_key;
    IF NOT FOUND THEN
        INSERT INTO inbox_ordering_keys (namespace, ordering_key) VALUES (NEW.namespace, NEW.ordering_key)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER inbox_events_ordering_key_accepted
    AFTER INSERT ON inbox_events
    FOR EACH ROW WHEN (NEW.ordering_key <> '')
    EXECUTE FUNCTION inboxd_ordering_key_accepted();

-- A Claim hands a keyed event out: it holds its key from now on. Only the
-- claim statement issues claims, and it has locked the key row (its `taken`
-- CTE) and found the key free or already this event's. A trigger rather than
-- one more write in that statement, whose every node Claims without ordering
-- keys would pay for too.
CREATE FUNCTION inboxd_ordering_key_claimed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE inbox_ordering_keys SET holder = NEW.event_key
    WHERE namespace = NEW.namespace AND ordering_key = NEW.ordering_key AND holder IS DISTINCT FROM NEW.event_key;
    RETURN NULL;
END $$;

CREATE TRIGGER inbox_events_ordering_key_claimed
    AFTER UPDATE OF state ON inbox_events
    FOR EACH ROW WHEN (NEW.ordering_key <> '' AND NEW.state = 'processing'
                       AND OLD.claim_token IS DISTINCT FROM NEW.claim_token)
    EXECUTE FUNCTION inboxd_ordering_key_claimed();

-- A keyed event's claim ends for good (COMPLETED or DEAD_LETTERED): it gives
-- its key up, and an APPLIED revision raises the key's applied revision.
-- A trigger, so that every way of completing an event keeps the rule, written
-- once: inboxd's own Complete and CompleteBatch, a worker's inboxd_complete()
-- inside its own transaction, the claim statement, the rescuer. The key row
-- is written only when something changes.
CREATE FUNCTION inboxd_ordering_key_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE inbox_ordering_keys AS k
    SET holder = CASE WHEN k.holder = NEW.event_key THEN NULL ELSE k.holder END,
        applied_revision = CASE WHEN NEW.disposition = 'applied'
                                THEN greatest(k.applied_revision, NEW.revision)
                                ELSE k.applied_revision END
    WHERE k.namespace = NEW.namespace AND k.ordering_key = NEW.ordering_key
      AND (k.holder = NEW.event_key
           OR (NEW.disposition = 'applied' AND NEW.revision > k.applied_revision));
    RETURN NULL;
END $$;

CREATE TRIGGER inbox_events_ordering_key_finished
    AFTER UPDATE OF state ON inbox_events
    FOR EACH ROW WHEN (NEW.ordering_key <> '' AND NEW.state IN ('completed', 'dead_lettered')
                       AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION inboxd_ordering_key_finished();

-- A deleted event (an operator's DELETE; retention deletes only COMPLETED
-- rows, which hold no key) never leaves its key held by nobody.
CREATE FUNCTION inboxd_ordering_key_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE inbox_ordering_keys SET holder = NULL
    WHERE namespace = OLD.namespace AND ordering_key = OLD.ordering_key AND holder = OLD.event_key;
    RETURN NULL;
END $$;

CREATE TRIGGER inbox_events_ordering_key_deleted
    AFTER DELETE ON inbox_events
    FOR EACH ROW WHEN (OLD.ordering_key <> '' AND OLD.state IN ('pending', 'processing'))
    EXECUTE FUNCTION inboxd_ordering_key_deleted();

-- Keys of events accepted before this migration: their applied revision from
-- the events completed as APPLIED, their holder the event in flight (the
-- earliest, should an older inboxd have handed out more than one).
INSERT INTO inbox_ordering_keys (namespace, ordering_key, applied_revision, holder)
SELECT e.namespace, e.ordering_key,
       greatest(0, coalesce(max(e.revision) FILTER (WHERE e.state = 'completed' AND e.disposition = 'applied'), 0)),
       (array_agg(e.event_key ORDER BY e.revision, e.accepted_at, e.event_key)
            FILTER (WHERE e.state = 'processing'))[1]
FROM inbox_events AS e
WHERE e.ordering_key <> ''
GROUP BY e.namespace, e.ordering_key;

ANALYZE inbox_ordering_keys;
