-- Stats without reading the table: events per (namespace, state), kept by
-- statement-level triggers. A trigger never updates a shared counter (every
-- Accept would queue on it); it appends the statement's net change, one row
-- per (namespace, state) it moved, to inbox_state_count_changes, which only
-- grows. Stats folds the changes into inbox_state_counts now and then
-- (state_counts_fold) and reads both, so it reads a row per (namespace,
-- state) and the changes since the last fold, whatever the table holds.
CREATE TABLE inbox_state_counts (
    namespace text   NOT NULL,
    state     text   NOT NULL,
    events    bigint NOT NULL,
    PRIMARY KEY (namespace, state)
);

CREATE TABLE inbox_state_count_changes (
    namespace text   NOT NULL,
    state     text   NOT NULL,
    events    bigint NOT NULL
);

CREATE FUNCTION inboxd_state_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO inbox_state_count_changes (namespace, state, events)
    SELECT n.namespace, n.state, count(*) FROM inboxd_new AS n GROUP BY n.namespace, n.state;
    RETURN NULL;
END $$;

-- An update that moves no row between states (a lease renewed, a payload
-- dropped by retention) nets to nothing and appends nothing.
CREATE FUNCTION inboxd_state_counts_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO inbox_state_count_changes (namespace, state, events)
    SELECT c.namespace, c.state, sum(c.events)
    FROM (SELECT n.namespace, n.state, 1 AS events FROM inboxd_new AS n
          UNION ALL
          SELECT o.namespace, o.state, -1 FROM inboxd_old AS o) AS c
    GROUP BY c.namespace, c.state
    HAVING sum(c.events) <> 0;
    RETURN NULL;
END $$;

CREATE FUNCTION inboxd_state_counts_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO inbox_state_count_changes (namespace, state, events)
    SELECT o.namespace, o.state, -count(*) FROM inboxd_old AS o GROUP BY o.namespace, o.state;
    RETURN NULL;
END $$;

-- Written in the writer's own transaction: a rolled-back write leaves no change behind.
CREATE TRIGGER inbox_events_state_counts_inserted AFTER INSERT ON inbox_events
    REFERENCING NEW TABLE AS inboxd_new FOR EACH STATEMENT EXECUTE FUNCTION inboxd_state_counts_inserted();
CREATE TRIGGER inbox_events_state_counts_updated AFTER UPDATE ON inbox_events
    REFERENCING OLD TABLE AS inboxd_old NEW TABLE AS inboxd_new
    FOR EACH STATEMENT EXECUTE FUNCTION inboxd_state_counts_updated();
CREATE TRIGGER inbox_events_state_counts_deleted AFTER DELETE ON inbox_events
    REFERENCING OLD TABLE AS inboxd_old FOR EACH STATEMENT EXECUTE FUNCTION inboxd_state_counts_deleted();

-- The counts of the rows already there. CREATE TRIGGER above holds a lock
-- that no writer passes until this transaction commits, so every row this
-- count sees was written before the triggers, and every later write fires
-- them: nothing is counted twice or missed. Writers wait for this count
-- (one pass over the table: 0.8 s at 2 million rows on a 2-core machine)
-- and then go on.
INSERT INTO inbox_state_counts (namespace, state, events)
SELECT namespace, state, count(*) FROM inbox_events GROUP BY namespace, state;
