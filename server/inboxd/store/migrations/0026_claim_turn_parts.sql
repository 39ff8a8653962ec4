-- The turn in parts (issue 28: a Claim over every namespace with 10,000
-- namespaces holding backlog, wanted within 2 ms under a generic plan, took
-- 2.36 ms). Most of a turn's time was not reading rows but setting up its
-- query's plan at each call: some 280 plan nodes (the rules, the rates'
-- buckets, the slots, the shares), the same cost whether any rule exists or
-- none. So the walk round the ring moves into a function of its own,
-- inboxd_claim_ring (a SQL function the planner inlines: no call of its own),
-- and the turn takes one of two queries over it: with no rule anywhere, the
-- turn is the first max_events namespaces of the walk with a due event, equal
-- shares, nothing held back, a query of half the nodes; with any rule, the
-- whole turn of 0024, unchanged but for reading the walk from the function.
-- The answer's columns and the one-namespace fast path are as in 0024.

CREATE FUNCTION inboxd_claim_ring(
    p_namespaces text[], p_patterns text[], p_prefixes text[], p_after text, p_turn_limit integer
) RETURNS TABLE (namespace text, "position" bigint, cut boolean)
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE ring AS (
        -- Per prefix, the namespaces with open rows in byte order, starting after
        -- the cursor (p_after, where this process's last turn for the same
        -- filter ended) and wrapping round to the prefix's first namespace, up to
        -- the cursor: one index descent a step, at most turn_limit steps. The
        -- first of the UNION ALL that passes its filter is taken (LIMIT 1), so
        -- the wrap is looked for only at the end of the range.
        SELECT p.prefix, first.wrapped, 1 AS depth, first.namespace
        FROM unnest(p_prefixes::text[]) AS p(prefix) CROSS JOIN LATERAL (
            SELECT s.namespace, s.wrapped FROM (
                (SELECT e.namespace, false AS wrapped FROM inbox_events AS e
                 WHERE e.due_at IS NOT NULL AND e.namespace COLLATE "C" >= p.prefix
                   AND e.namespace COLLATE "C" > p_after
                 ORDER BY e.namespace COLLATE "C" LIMIT 1)
                UNION ALL
                (SELECT e.namespace, true FROM inbox_events AS e
                 WHERE e.due_at IS NOT NULL AND e.namespace COLLATE "C" >= p.prefix
                 ORDER BY e.namespace COLLATE "C" LIMIT 1)
            ) AS s
            WHERE starts_with(s.namespace, p.prefix) AND (NOT s.wrapped OR s.namespace COLLATE "C" <= p_after)
            LIMIT 1
        ) AS first
        UNION ALL
        SELECT r.prefix, step.wrapped, r.depth + 1, step.namespace
        FROM ring AS r CROSS JOIN LATERAL (
            SELECT s.namespace, s.wrapped FROM (
                (SELECT e.namespace, r.wrapped AS wrapped FROM inbox_events AS e
                 WHERE e.due_at IS NOT NULL AND e.namespace COLLATE "C" > r.namespace
                 ORDER BY e.namespace COLLATE "C" LIMIT 1)
                UNION ALL
                (SELECT e.namespace, true FROM inbox_events AS e
                 WHERE NOT r.wrapped AND e.due_at IS NOT NULL AND e.namespace COLLATE "C" >= r.prefix
                 ORDER BY e.namespace COLLATE "C" LIMIT 1)
            ) AS s
            WHERE starts_with(s.namespace, r.prefix) AND (NOT s.wrapped OR s.namespace COLLATE "C" <= p_after)
            LIMIT 1
        ) AS step
        WHERE r.depth < p_turn_limit
    ), examined AS (
        -- The namespaces this Claim may take from, in ring order: the named ones
        -- (after the cursor first) and those the walks found that the patterns keep.
        SELECT x.namespace, row_number() OVER (ORDER BY x.wrapped, x.namespace COLLATE "C") AS position
        FROM (
            SELECT n.namespace, n.namespace COLLATE "C" <= p_after AS wrapped
            FROM unnest(p_namespaces::text[]) AS n(namespace)
            UNION
            SELECT r.namespace, r.wrapped FROM ring AS r
            WHERE cardinality(p_patterns::text[]) = 0 OR r.namespace LIKE ANY(p_patterns::text[])
        ) AS x
    )
    SELECT x.namespace, x.position, false FROM examined AS x
    UNION ALL
    SELECT NULL::text, NULL::bigint, EXISTS (SELECT FROM ring AS r WHERE r.depth >= p_turn_limit)
$$;

CREATE OR REPLACE FUNCTION inboxd_claim_turn(
    p_namespaces text[], p_patterns text[], p_prefixes text[], p_after text, p_turn_limit integer,
    p_max_events integer, p_event_types text[], p_now timestamptz
) RETURNS TABLE (
    namespace text, "position" bigint, weight integer, share integer, allowed integer, cap integer,
    rate double precision, rule_pattern text, next_token_at timestamptz, held_back text,
    turn_cut boolean, last_examined text
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
                            NULL::double precision, NULL::text, NULL::timestamptz, NULL::text, false, p_namespaces[1];
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
           NULL::timestamptz, NULL::text, false, NULL::text
    FROM turn AS t
    CROSS JOIN (SELECT ceil(p_max_events::numeric / greatest(1, (SELECT count(*) FROM turn)))::integer AS events) AS s
    UNION ALL
    SELECT NULL::text, NULL::bigint, NULL::integer, 0, 0, 0, NULL::double precision, NULL::text, NULL::timestamptz,
           NULL::text, (SELECT w.cut FROM walked AS w WHERE w.namespace IS NULL),
           (SELECT x.namespace FROM examined AS x ORDER BY x.position DESC LIMIT 1);
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
        -- max_in_flight, or whose bucket is empty (judged in this snapshot;
        -- `shares` and `paced` decide under their locks), takes no place in the
        -- turn, so it cannot crowd out one with room. A Claim of one named
        -- namespace skips the probe: its look below reads the same rows.
        SELECT x.namespace, x.position, rule.pattern AS rule_pattern, coalesce(rule.weight, 1) AS weight,
               rule.max_in_flight,
               pace.rate,
               -- The bucket holds a second's worth unless a burst is set; while a
               -- resume ramps up, never more than a second's worth of the rate so far.
               CASE WHEN pace.ramping THEN least(coalesce(rule.burst, 2147483647), greatest(1, ceil(pace.rate)))
                    ELSE coalesce(rule.burst, greatest(1, ceil(pace.rate))) END AS burst,
               (rule.max_in_flight IS NULL
                OR (SELECT count(*) FROM (SELECT FROM inbox_events AS e
                                          WHERE e.namespace COLLATE "C" = x.namespace AND e.state = 'processing'
                                          LIMIT rule.max_in_flight) AS held) < rule.max_in_flight) AS below_limit,
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
        SELECT c.* FROM contenders AS c WHERE c.below_limit AND c.has_tokens ORDER BY c.position LIMIT p_max_events
    ), shares AS MATERIALIZED (
        -- Each namespace's share of the turn, by weight; then what max_in_flight
        -- leaves of it (inboxd_flow_slots: a fresh count under the namespace's
        -- lock), only where a limit is set.
        SELECT t.*, share.events AS share,
               CASE WHEN t.max_in_flight IS NULL THEN share.events
                    ELSE least(share.events, inboxd_flow_slots(t.namespace, t.max_in_flight)) END AS allowed
        FROM turn AS t
        CROSS JOIN LATERAL (SELECT ceil(p_max_events * t.weight::numeric
                                        / (SELECT sum(w.weight) FROM turn AS w))::integer AS events) AS share
    ), paced AS MATERIALIZED (
        -- And what a rate leaves: tokens taken from the namespace's bucket (in a
        -- CASE, so that a namespace without a rate never calls the function;
        -- materialized, so that it runs once however its fields are read).
        SELECT s.*, CASE WHEN s.rate IS NOT NULL AND s.allowed > 0
                         THEN inboxd_flow_take_tokens(s.namespace, s.rate, s.burst, s.allowed, p_now)
                    END AS bucket
        FROM shares AS s
    ), flow AS MATERIALIZED (
        SELECT p.*, coalesce((p.bucket).taken, p.allowed) AS cap, (p.bucket).next_token_at
        FROM paced AS p
    )
    SELECT f.namespace, f.position, f.weight, f.share, f.allowed, f.cap, f.rate, f.rule_pattern, f.next_token_at,
           CASE WHEN f.cap < f.share THEN CASE WHEN f.allowed < f.share THEN 'max_in_flight' ELSE 'rate' END END,
           false, NULL::text
    FROM flow AS f
    UNION ALL
    SELECT c.namespace, c.position, c.weight, 0, 0, 0, c.rate, c.rule_pattern, c.token_due_at,
           CASE WHEN NOT c.below_limit THEN 'max_in_flight' ELSE 'rate' END, false, NULL::text
    FROM contenders AS c
    WHERE NOT (c.below_limit AND c.has_tokens)
    UNION ALL
    SELECT NULL::text, NULL::bigint, NULL::integer, 0, 0, 0, NULL::double precision, NULL::text, NULL::timestamptz,
           NULL::text, (SELECT w.cut FROM walked AS w WHERE w.namespace IS NULL),
           (SELECT x.namespace FROM examined AS x ORDER BY x.position DESC LIMIT 1);
END $$;
