-- Takeovers at the limit (DESIGN, Flow control; issue 43). A namespace at
-- its max_in_flight could not take over its own expired leases: the count
-- included them, and a namespace at its limit had no place in the turn, so
-- when the holders of every slot vanished it waited for the lease rescuer
-- (lease + 30 s grace + up to 15 s), and with INBOXD_RESCUE_INTERVAL=0 for
-- ever. A takeover moves no count (the expired lease was one of the
-- namespace's, the new one replaces it), so it is never refused: a namespace
-- at its limit with an expired lease has room, and its turn may take over up
-- to its share of expired leases, still under the namespace's lock, besides
-- fresh events up to its free slots.
--
-- The turn answers, per namespace, besides 0026's columns: `fresh`, how many
-- events that are not a takeover it may lease (PENDING ones, or an expired
-- lease not on the list), and `takeovers`, the keys of the expired leases it
-- takes over (the claim statement locks them by primary key, apart from the
-- fresh ones, so that a backlog of PENDING events older than the leases
-- never hides them); and `busy`: another Claim held the namespace's lock, so
-- this one took none of it (held_back says 'busy'; the server then waits for
-- that Claim's commit and looks again, store/claim_waits.py). A new function, not
-- a replacement of inboxd_claim_turn: a server from before this migration
-- still calls that one, unchanged, beside a newer one (docs/upgrades.md).

-- The room a Claim has in a namespace under its max_in_flight, found under
-- the namespace's lock as inboxd_flow_slots finds its slots (0021: a Claim
-- that finds the lock taken takes none of the namespace, and says so in
-- `busy`): the free slots, and the keys of up to p_wanted expired leases of
-- the Claim's event types, oldest first. One read of the namespace's leased
-- rows (inbox_events_in_flight), whatever its backlog.
CREATE TYPE inboxd_flow_room AS (slots integer, takeovers text[], busy boolean);

CREATE FUNCTION inboxd_flow_room(
    p_namespace text, p_max_in_flight integer, p_wanted integer, p_event_types text[], p_now timestamptz
) RETURNS inboxd_flow_room
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    leased integer;
    expired text[];
BEGIN
    IF NOT pg_try_advisory_xact_lock(7311002, hashtext(p_namespace)) THEN
        RETURN ROW(0, '{}'::text[], true)::inboxd_flow_room;
    END IF;
    SELECT count(*),
           coalesce((array_agg(held.event_key ORDER BY held.lease_expires_at)
                     FILTER (WHERE held.lease_expires_at <= p_now
                               AND (cardinality(p_event_types) = 0 OR held.event_type = ANY(p_event_types))))
                    [1:greatest(p_wanted, 0)], '{}')
      INTO leased, expired
    FROM (SELECT e.event_key, e.event_type, e.lease_expires_at FROM inbox_events AS e
          WHERE e.namespace COLLATE "C" = p_namespace AND e.state = 'processing') AS held;
    RETURN ROW(greatest(0, p_max_in_flight - leased), expired, false)::inboxd_flow_room;
END $$;

-- 0026's turn, with the room above in place of inboxd_flow_slots and the
-- three columns of takeovers; the walk, the weights, the rates and the fast
-- paths are 0026's.
CREATE FUNCTION inboxd_claim_turn_takeovers(
    p_namespaces text[], p_patterns text[], p_prefixes text[], p_after text, p_turn_limit integer,
    p_max_events integer, p_event_types text[], p_now timestamptz
) RETURNS TABLE (
    namespace text, "position" bigint, weight integer, share integer, allowed integer, cap integer,
    rate double precision, rule_pattern text, next_token_at timestamptz, held_back text,
    turn_cut boolean, last_examined text, fresh integer, takeovers text[], busy boolean
)
-- ROWS: a turn is at most max_events namespaces and those left out; the
-- default estimate of 1,000 made the planner cost the claim statement's look
-- per namespace a thousand times, over jit_above_cost.
LANGUAGE plpgsql VOLATILE ROWS 20 AS $$
#variable_conflict use_column
BEGIN
    IF cardinality(p_prefixes) = 0 AND cardinality(p_namespaces) = 1
       AND NOT EXISTS (SELECT FROM inboxd_flow_rule(p_namespaces[1])) THEN
        RETURN QUERY SELECT p_namespaces[1], 1::bigint, 1, p_max_events, p_max_events, p_max_events,
                            NULL::double precision, NULL::text, NULL::timestamptz, NULL::text, false, p_namespaces[1],
                            p_max_events, '{}'::text[], false;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM inbox_flow_rules) THEN
        -- No rule anywhere: every namespace of the turn weighs 1, has room and no rate, so the turn is
        -- the first max_events examined namespaces with a due event, sharing max_events equally.
        RETURN QUERY
    WITH walked AS MATERIALIZED (
        -- The walk round the ring and the named namespaces (inboxd_claim_ring), and a last row of no
        -- namespace that says whether the walk stopped short of the ring's end.
        SELECT w.* FROM inboxd_claim_ring(p_namespaces, p_patterns, p_prefixes, p_after, p_turn_limit) AS w
    ), examined AS (
        SELECT w.namespace, w.position FROM walked AS w WHERE w.namespace IS NOT NULL
    ), turn AS MATERIALIZED (
        -- The oldest due event, not EXISTS, as the whole turn's probe below (0024).
        SELECT x.namespace, x.position FROM examined AS x
        WHERE (SELECT e.due_at FROM inbox_events AS e
               WHERE e.namespace COLLATE "C" = x.namespace AND e.due_at <= p_now
                 AND (cardinality(p_event_types::text[]) = 0 OR e.event_type = ANY(p_event_types::text[]))
               ORDER BY e.due_at LIMIT 1) IS NOT NULL
        ORDER BY x.position
        LIMIT p_max_events
    )
    SELECT t.namespace, t.position, 1, s.events, s.events, s.events, NULL::double precision, NULL::text,
           NULL::timestamptz, NULL::text, false, NULL::text, s.events, '{}'::text[], false
    FROM turn AS t
    CROSS JOIN (SELECT ceil(p_max_events::numeric / greatest(1, (SELECT count(*) FROM turn)))::integer AS events) AS s
    UNION ALL
    SELECT NULL::text, NULL::bigint, NULL::integer, 0, 0, 0, NULL::double precision, NULL::text, NULL::timestamptz,
           NULL::text, (SELECT w.cut FROM walked AS w WHERE w.namespace IS NULL),
           (SELECT x.namespace FROM examined AS x ORDER BY x.position DESC LIMIT 1), 0, '{}'::text[], false;
        RETURN;
    END IF;
    RETURN QUERY
    WITH walked AS MATERIALIZED (
        -- The walk round the ring and the named namespaces (inboxd_claim_ring), and a last row of no
        -- namespace that says whether the walk stopped short of the ring's end.
        SELECT w.* FROM inboxd_claim_ring(p_namespaces, p_patterns, p_prefixes, p_after, p_turn_limit) AS w
    ), examined AS (
        SELECT w.namespace, w.position FROM walked AS w WHERE w.namespace IS NOT NULL
    ), contenders AS MATERIALIZED (
        -- The examined namespaces that have a due event for this Claim and are
        -- not paused, each with the flow-control rule that governs it
        -- (inboxd_flow_rule, migration 0021), and whether it has room: one at its
        -- max_in_flight with no expired lease to take over, or whose bucket is
        -- empty (judged in this snapshot; `shares` and `paced` decide under their
        -- locks), takes no place in the turn, so it cannot crowd out one with
        -- room. A Claim of one named namespace skips the probe: its look below
        -- reads the same rows.
        SELECT x.namespace, x.position, rule.pattern AS rule_pattern, coalesce(rule.weight, 1) AS weight,
               rule.max_in_flight,
               pace.rate,
               -- The bucket holds a second's worth unless a burst is set; while a
               -- resume ramps up, never more than a second's worth of the rate so far.
               CASE WHEN pace.ramping THEN least(coalesce(rule.burst, 2147483647), greatest(1, ceil(pace.rate)))
                    ELSE coalesce(rule.burst, greatest(1, ceil(pace.rate))) END AS burst,
               -- Room under max_in_flight: a free slot, or else an expired lease
               -- to take over (a takeover moves no count). Both read only the
               -- namespace's leased rows (inbox_events_in_flight), whatever its backlog.
               (rule.max_in_flight IS NULL
                OR (SELECT count(*) FROM (SELECT FROM inbox_events AS e
                                          WHERE e.namespace COLLATE "C" = x.namespace AND e.state = 'processing'
                                          LIMIT rule.max_in_flight) AS held) < rule.max_in_flight
                OR EXISTS (SELECT FROM inbox_events AS e
                           WHERE e.namespace COLLATE "C" = x.namespace AND e.state = 'processing'
                             AND e.lease_expires_at <= p_now
                             AND (cardinality(p_event_types::text[]) = 0
                                  OR e.event_type = ANY(p_event_types::text[])))) AS has_room,
               coalesce(bucket.tokens >= 1, true) AS has_tokens,
               CASE WHEN bucket.tokens < 1
                    THEN p_now + make_interval(secs => (1 - bucket.tokens) / pace.rate) END AS token_due_at
        FROM examined AS x
        LEFT JOIN LATERAL inboxd_flow_rule(x.namespace) AS rule ON true
        -- A resume's ramp: from 1% of ramp_rate at resumed_at to all of it at its end.
        CROSS JOIN LATERAL (
            SELECT ramp.ramping,
                   CASE WHEN ramp.ramping
                        THEN rule.ramp_rate * greatest(0.01, extract(epoch FROM p_now - rule.resumed_at)
                                                             / extract(epoch FROM rule.ramp))
                        ELSE rule.rate END AS rate
            FROM (SELECT coalesce(p_now < rule.resumed_at + rule.ramp, false) AS ramping) AS ramp
        ) AS pace
        -- The tokens a rate's bucket holds now (none read without a rate; a namespace without a bucket yet has its burst).
        LEFT JOIN LATERAL (
            SELECT b.tokens + pace.rate * greatest(0, extract(epoch FROM p_now - b.refilled_at)::double precision)
                       AS tokens
            FROM inbox_flow_buckets AS b
            WHERE pace.rate IS NOT NULL AND b.namespace = x.namespace
        ) AS bucket ON true
        WHERE NOT coalesce(rule.paused, false)
          AND (cardinality(p_namespaces::text[]) = 1 AND cardinality(p_prefixes::text[]) = 0
               -- The oldest due event, not EXISTS: ordered as inbox_events_namespace_due
               -- is, so that no plan answers it by a sequential scan that stops at a
               -- first match it guesses is near.
               OR (SELECT e.due_at FROM inbox_events AS e
                   WHERE e.namespace COLLATE "C" = x.namespace AND e.due_at <= p_now
                     AND (cardinality(p_event_types::text[]) = 0 OR e.event_type = ANY(p_event_types::text[]))
                   ORDER BY e.due_at LIMIT 1) IS NOT NULL)
    ), turn AS MATERIALIZED (
        -- This turn: up to max_events of them with room, in ring order.
        SELECT c.* FROM contenders AS c WHERE c.has_room AND c.has_tokens ORDER BY c.position LIMIT p_max_events
    ), shares AS MATERIALIZED (
        -- Each namespace's share of the turn, by weight; then, only where a
        -- limit is set, its room under the namespace's lock (inboxd_flow_room:
        -- a fresh count of its free slots, and the expired leases it may take
        -- over, up to the share).
        SELECT t.*, share.events AS share,
               CASE WHEN t.max_in_flight IS NOT NULL
                    THEN inboxd_flow_room(t.namespace, t.max_in_flight, share.events, p_event_types, p_now) END AS room
        FROM turn AS t
        CROSS JOIN LATERAL (SELECT ceil(p_max_events * t.weight::numeric
                                        / (SELECT sum(w.weight) FROM turn AS w))::integer AS events) AS share
    ), roomed AS MATERIALIZED (
        -- What the limit allows of the share: every takeover found, and fresh
        -- events up to the free slots in what is left.
        SELECT s.*,
               CASE WHEN s.room IS NULL THEN s.share
                    ELSE cardinality((s.room).takeovers)
                         + least(s.share - cardinality((s.room).takeovers), (s.room).slots) END AS allowed
        FROM shares AS s
    ), paced AS MATERIALIZED (
        -- And what a rate leaves: tokens taken from the namespace's bucket (in a
        -- CASE, so that a namespace without a rate never calls the function;
        -- materialized, so that it runs once however its fields are read).
        SELECT s.*, CASE WHEN s.rate IS NOT NULL AND s.allowed > 0
                         THEN inboxd_flow_take_tokens(s.namespace, s.rate, s.burst, s.allowed, p_now)
                    END AS bucket
        FROM roomed AS s
    ), flow AS MATERIALIZED (
        -- The rate's tokens go to the takeovers first: those events waited longest.
        SELECT p.*, coalesce((p.bucket).taken, p.allowed) AS cap, (p.bucket).next_token_at,
               coalesce((p.room).takeovers[1:coalesce((p.bucket).taken, p.allowed)], '{}') AS takeovers,
               coalesce((p.room).busy, false) AS busy
        FROM paced AS p
    )
    SELECT f.namespace, f.position, f.weight, f.share, f.allowed, f.cap, f.rate, f.rule_pattern, f.next_token_at,
           CASE WHEN f.busy THEN 'busy'
                WHEN f.cap < f.share THEN CASE WHEN f.allowed < f.share THEN 'max_in_flight' ELSE 'rate' END END,
           false, NULL::text, f.cap - cardinality(f.takeovers), f.takeovers, f.busy
    FROM flow AS f
    UNION ALL
    SELECT c.namespace, c.position, c.weight, 0, 0, 0, c.rate, c.rule_pattern, c.token_due_at,
           CASE WHEN NOT c.has_room THEN 'max_in_flight' ELSE 'rate' END, false, NULL::text, 0, '{}'::text[], false
    FROM contenders AS c
    WHERE NOT (c.has_room AND c.has_tokens)
    UNION ALL
    SELECT NULL::text, NULL::bigint, NULL::integer, 0, 0, 0, NULL::double precision, NULL::text, NULL::timestamptz,
           NULL::text, (SELECT w.cut FROM walked AS w WHERE w.namespace IS NULL),
           (SELECT x.namespace FROM examined AS x ORDER BY x.position DESC LIMIT 1), 0, '{}'::text[], false;
END $$;
