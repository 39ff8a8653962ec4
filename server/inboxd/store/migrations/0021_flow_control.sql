-- Flow control (DESIGN, Flow control; issue 28): per-namespace rules that
-- bind every replica at once because they live here, read by the claim
-- statement itself (store/queries/claims.sql). A namespace with no rule
-- costs a Claim one probe of inbox_flow_rules and nothing else.

-- One rule per namespace or namespace pattern. `like_pattern` is the
-- pattern as SQL LIKE (the tokens' translation, domain/namespace_patterns.py);
-- `specificity` orders the rules that match one namespace, most specific
-- first (domain/flow_rules.py computes it: its own name above any pattern,
-- then the pattern with the most literal characters).
CREATE TABLE inbox_flow_rules (
    pattern       text             PRIMARY KEY,
    like_pattern  text             NOT NULL,
    is_pattern    boolean          NOT NULL,
    specificity   integer          NOT NULL,
    max_in_flight integer,
    rate          double precision,
    burst         integer,
    paused        boolean          NOT NULL DEFAULT false,
    weight        integer          NOT NULL DEFAULT 1,
    -- A resume with a ramp: from resumed_at, for ramp, the claim rate climbs
    -- from zero to ramp_rate; after it the rule's own rate holds.
    resumed_at    timestamptz,
    ramp          interval,
    ramp_rate     double precision,
    updated_at    timestamptz      NOT NULL,
    updated_by    text             NOT NULL,
    CONSTRAINT inbox_flow_rules_max_in_flight_positive CHECK (max_in_flight IS NULL OR max_in_flight > 0),
    CONSTRAINT inbox_flow_rules_rate_positive CHECK (rate IS NULL OR rate > 0),
    CONSTRAINT inbox_flow_rules_burst_positive CHECK (burst IS NULL OR burst > 0),
    CONSTRAINT inbox_flow_rules_weight_positive CHECK (weight > 0),
    CONSTRAINT inbox_flow_rules_ramp_whole CHECK ((ramp IS NULL) = (ramp_rate IS NULL) AND (ramp IS NULL) = (resumed_at IS NULL))
);

-- The rule that governs a namespace: its own, else the most specific pattern
-- that matches it (a namespace's own rule has the highest specificity). The
-- table holds a handful of rules, read whole. A set-returning SQL function of one SELECT, so the
-- planner inlines it into the statements that call it (LATERAL).
CREATE FUNCTION inboxd_flow_rule(p_namespace text) RETURNS SETOF inbox_flow_rules
LANGUAGE sql STABLE AS $$
    SELECT r.* FROM inbox_flow_rules AS r
    WHERE r.pattern = p_namespace OR r.is_pattern AND p_namespace LIKE r.like_pattern
    ORDER BY r.specificity DESC, length(r.pattern) DESC, r.pattern COLLATE "C"
    LIMIT 1
$$;

-- Every change of a rule, as the operator actions are audited (0016): who,
-- when, why, and the rule before and after in words.
CREATE TABLE inbox_flow_changes (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pattern    text        NOT NULL,
    actor      text        NOT NULL,
    reason     text        NOT NULL,
    before     text        NOT NULL,
    after      text        NOT NULL,
    changed_at timestamptz NOT NULL
);

CREATE INDEX inbox_flow_changes_pattern ON inbox_flow_changes (pattern, id);

-- A rate's token bucket, one per namespace a rate governs: refilled at the
-- rate up to the burst, debited by each Claim that hands events out.
CREATE TABLE inbox_flow_buckets (
    namespace   text             PRIMARY KEY,
    tokens      double precision NOT NULL,
    refilled_at timestamptz      NOT NULL
);

-- How many more of a namespace's events may be leased now, under its
-- max_in_flight. Claims of one namespace take turns on an advisory lock held
-- to the end of the claiming transaction, and count with a snapshot taken
-- after they hold it: VOLATILE, so its query sees what the Claim before it
-- committed, where the calling statement's snapshot (taken before it waited)
-- would not, and the limit would be exceeded. A Claim that finds another
-- claiming the namespace takes none of it this time rather than wait: no
-- claimer ever waits for another, and two Claims over the same two limited
-- namespaces cannot deadlock. Every PROCESSING event counts, an expired lease
-- too, until it is taken over or rescued.
CREATE FUNCTION inboxd_flow_slots(p_namespace text, p_max_in_flight integer) RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    leased integer;
BEGIN
    IF NOT pg_try_advisory_xact_lock(7311002, hashtext(p_namespace)) THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO leased FROM (
        SELECT FROM inbox_events AS e
        WHERE e.namespace COLLATE "C" = p_namespace AND e.state = 'processing'
        LIMIT p_max_in_flight) AS held;
    RETURN greatest(0, p_max_in_flight - leased);
END $$;

-- Takes up to p_wanted tokens from a namespace's bucket, refilled to now at
-- p_rate up to p_burst; answers how many it took and, when it took fewer
-- than wanted, when the next whole token is due. One composite value, not a
-- set: the claim statement calls it inside a CASE, so that a namespace
-- without a rate never runs it. The bucket row is locked to
-- the end of the claiming transaction (a Claim that finds it locked takes
-- none, as above), so a Claim that hands out fewer gives the rest back
-- (inboxd_flow_give_back) before anyone else reads the bucket.
CREATE TYPE inboxd_flow_tokens AS (taken integer, next_token_at timestamptz);

CREATE FUNCTION inboxd_flow_take_tokens(
    p_namespace text, p_rate double precision, p_burst double precision, p_wanted integer, p_now timestamptz
) RETURNS inboxd_flow_tokens
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    bucket inbox_flow_buckets;
    available double precision;
    taken integer;
    next_token_at timestamptz;
BEGIN
    INSERT INTO inbox_flow_buckets (namespace, tokens, refilled_at) VALUES (p_namespace, p_burst, p_now)
    ON CONFLICT DO NOTHING;
    SELECT * INTO bucket FROM inbox_flow_buckets AS b WHERE b.namespace = p_namespace FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN ROW(0, p_now + interval '10 milliseconds')::inboxd_flow_tokens;
    END IF;
    available := least(p_burst, bucket.tokens
                       + p_rate * greatest(0, extract(epoch FROM p_now - bucket.refilled_at)::double precision));
    taken := least(p_wanted, floor(available)::integer);
    UPDATE inbox_flow_buckets SET tokens = available - taken, refilled_at = greatest(bucket.refilled_at, p_now)
    WHERE namespace = p_namespace;
    IF taken < p_wanted THEN
        next_token_at := p_now + make_interval(secs => (1 - (available - taken)) / p_rate);
    END IF;
    RETURN ROW(taken, next_token_at)::inboxd_flow_tokens;
END $$;

-- Tokens a Claim took and did not use (fewer events were due, or skipped as
-- locked): back in the bucket, which that Claim still holds locked.
CREATE FUNCTION inboxd_flow_give_back(p_namespace text, p_tokens integer) RETURNS integer
LANGUAGE sql VOLATILE AS $$
    UPDATE inbox_flow_buckets SET tokens = tokens + p_tokens WHERE namespace = p_namespace AND p_tokens > 0;
    SELECT p_tokens;
$$;
