-- Flow control's control plane (issue 28): the operators' rules, their audit
-- and the live figures of what each governs. The claim statement reads the
-- same rules (inboxd_flow_rule, migration 0021) in claims.sql. Every change
-- writes its rule and its audit row in one statement: a rule never changes
-- unaudited, nor is an audit row left for a change that rolled back.

-- name: flow_rule_lock
-- Changes of one pattern take turns, a creation too (no row to lock yet): the
-- second of two concurrent changes reads the first's rule as its `before`.
SELECT pg_advisory_xact_lock(7311003, hashtext(%(pattern)s))

-- name: flow_clock
-- The change's time, read once: the rule's updated_at, a ramp's resumed_at and
-- the audit row's changed_at are the same instant.
SELECT inboxd_now(%(now)s)

-- name: flow_rule_read
-- One rule by its exact pattern; the change's `before` (after flow_rule_lock).
SELECT pattern, max_in_flight, rate, burst, paused, weight, resumed_at, ramp, ramp_rate, updated_at, updated_by
FROM inbox_flow_rules
WHERE pattern = %(pattern)s
FOR UPDATE

-- name: flow_rule_find
-- One rule by its exact pattern, for reading (GetFlowControl of a pattern).
SELECT pattern, max_in_flight, rate, burst, paused, weight, resumed_at, ramp, ramp_rate, updated_at, updated_by
FROM inbox_flow_rules
WHERE pattern = %(pattern)s

-- name: flow_rule_governing
-- The rule that governs a namespace: its own, else the most specific pattern
-- matching it, as the claim statement finds it.
SELECT pattern, max_in_flight, rate, burst, paused, weight, resumed_at, ramp, ramp_rate, updated_at, updated_by
FROM inboxd_flow_rule(%(namespace)s)

-- name: flow_rule_list
-- Every rule, most specific first (the order inboxd_flow_rule ranks them in).
SELECT pattern, max_in_flight, rate, burst, paused, weight, resumed_at, ramp, ramp_rate, updated_at, updated_by
FROM inbox_flow_rules
ORDER BY specificity DESC, length(pattern) DESC, pattern COLLATE "C"

-- name: flow_rule_insert
-- (none) -> a rule, audited.
WITH created AS (
    INSERT INTO inbox_flow_rules (pattern, like_pattern, is_pattern, specificity, max_in_flight, rate, burst, paused,
                                  weight, resumed_at, ramp, ramp_rate, updated_at, updated_by)
    VALUES (%(pattern)s, %(like_pattern)s, %(is_pattern)s, %(specificity)s, %(max_in_flight)s, %(rate)s, %(burst)s,
            %(paused)s, %(weight)s, %(resumed_at)s, %(ramp)s, %(ramp_rate)s, %(at)s, %(actor)s)
    RETURNING pattern
)
INSERT INTO inbox_flow_changes (pattern, actor, reason, before, after, changed_at)
SELECT pattern, %(actor)s, %(reason)s, %(before)s, %(after)s, %(at)s FROM created
RETURNING id

-- name: flow_rule_update
-- A rule -> the rule as changed (every field as the domain computed it), audited.
WITH changed AS (
    UPDATE inbox_flow_rules
    SET max_in_flight = %(max_in_flight)s, rate = %(rate)s, burst = %(burst)s, paused = %(paused)s,
        weight = %(weight)s, resumed_at = %(resumed_at)s, ramp = %(ramp)s, ramp_rate = %(ramp_rate)s,
        updated_at = %(at)s, updated_by = %(actor)s
    WHERE pattern = %(pattern)s
    RETURNING pattern
)
INSERT INTO inbox_flow_changes (pattern, actor, reason, before, after, changed_at)
SELECT pattern, %(actor)s, %(reason)s, %(before)s, %(after)s, %(at)s FROM changed
RETURNING id

-- name: flow_rule_delete
-- A rule -> (none), audited: its namespaces fall to the next most specific
-- rule, or none. Its namespaces' token buckets stay: the next rate to govern
-- them refills them (inboxd_flow_take_tokens caps them at its burst).
WITH removed AS (
    DELETE FROM inbox_flow_rules WHERE pattern = %(pattern)s RETURNING pattern
)
INSERT INTO inbox_flow_changes (pattern, actor, reason, before, after, changed_at)
SELECT pattern, %(actor)s, %(reason)s, %(before)s, %(after)s, %(at)s FROM removed
RETURNING id

-- name: flow_changes_recent
-- A pattern's audited changes, newest first, at most %(limit)s
-- (inbox_flow_changes_pattern, read backwards).
SELECT pattern, actor, reason, changed_at, before, after
FROM inbox_flow_changes
WHERE pattern = %(pattern)s
ORDER BY id DESC
LIMIT %(limit)s

-- name: flow_rule_figures
-- Live figures of one rule, over the namespaces it governs (those it matches
-- with no more specific rule of their own) that have open events: how many,
-- their events leased now and their PENDING events. The namespaces are found
-- by a skip scan of inbox_events_namespace_due from the pattern's literal
-- prefix (one index probe per distinct namespace, however long its backlog),
-- and each one's counts come from its index ranges: the open events in
-- inbox_events_namespace_due, the leased ones in inbox_events_in_flight.
-- Never a scan of the table.
WITH RECURSIVE spaces(namespace) AS (
    (SELECT e.namespace COLLATE "C"
     FROM inbox_events AS e
     WHERE e.due_at IS NOT NULL AND e.namespace COLLATE "C" >= %(prefix)s
     ORDER BY e.namespace COLLATE "C"
     LIMIT 1)
    UNION ALL
    SELECT (SELECT e.namespace COLLATE "C"
            FROM inbox_events AS e
            WHERE e.due_at IS NOT NULL AND e.namespace COLLATE "C" > s.namespace
            ORDER BY e.namespace COLLATE "C"
            LIMIT 1)
    FROM spaces AS s
    WHERE s.namespace IS NOT NULL AND starts_with(s.namespace, %(prefix)s)
)
SELECT count(*), coalesce(sum(f.in_flight), 0), coalesce(sum(f.open - f.in_flight), 0)
FROM spaces AS s
CROSS JOIN LATERAL inboxd_flow_rule(s.namespace) AS r
CROSS JOIN LATERAL (
    SELECT (SELECT count(*) FROM inbox_events AS e
            WHERE e.namespace COLLATE "C" = s.namespace AND e.due_at IS NOT NULL) AS open,
           (SELECT count(*) FROM inbox_events AS e
            WHERE e.namespace COLLATE "C" = s.namespace AND e.state = 'processing') AS in_flight
) AS f
WHERE s.namespace IS NOT NULL AND starts_with(s.namespace, %(prefix)s)
  AND s.namespace LIKE %(like_pattern)s AND r.pattern = %(pattern)s

-- name: flow_namespace_figures
-- One namespace's live figures, whatever rule governs it: whether it has open
-- events, its events leased now and its PENDING events (index ranges, as above).
SELECT (f.open > 0)::int, f.in_flight, f.open - f.in_flight
FROM (
    SELECT (SELECT count(*) FROM inbox_events AS e
            WHERE e.namespace COLLATE "C" = %(namespace)s AND e.due_at IS NOT NULL) AS open,
           (SELECT count(*) FROM inbox_events AS e
            WHERE e.namespace COLLATE "C" = %(namespace)s AND e.state = 'processing') AS in_flight
) AS f
