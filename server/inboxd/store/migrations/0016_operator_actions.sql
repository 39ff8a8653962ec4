-- Operators act, not only look (issue 32): settle an action whose outcome
-- nobody recorded, end a dead worker's claim now, discard an event that
-- should never run. Each is audited here, in the statement that makes it,
-- as Replay is in inbox_replays: who, when, why, and what stood before and
-- after, in words an operator reads. Like the replay audit, it outlives the
-- event's row (no foreign key): retention deletes an event, not its history
-- of operators' decisions.
CREATE TABLE inbox_operator_actions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace text NOT NULL,
    event_key text NOT NULL,
    kind text NOT NULL,
    -- The action's name for a settlement; '' for the others.
    subject text NOT NULL DEFAULT '',
    actor text NOT NULL,
    reason text NOT NULL,
    before text NOT NULL,
    after text NOT NULL,
    acted_at timestamptz NOT NULL,
    CONSTRAINT inbox_operator_actions_kind_known CHECK (kind IN ('settle_action', 'end_claim', 'discard'))
);

CREATE INDEX inbox_operator_actions_event ON inbox_operator_actions (namespace, event_key);

-- A claim an operator ended (EndClaim) ends with an outcome of its own:
-- neither expired (its lease may have had an hour left) nor released (the
-- worker did not give it back).
ALTER TABLE inbox_claims DROP CONSTRAINT inbox_claims_outcome_known;
ALTER TABLE inbox_claims ADD CONSTRAINT inbox_claims_outcome_known CHECK (outcome IS NULL OR outcome IN
    ('completed', 'failed', 'released', 'expired', 'dead_lettered', 'replayed', 'ended'));
