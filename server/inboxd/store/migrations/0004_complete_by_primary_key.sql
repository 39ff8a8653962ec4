-- inboxd_complete_event, again, finding the row by its primary key first.
-- The single fenced UPDATE of 0002 left the planner free to reach the row
-- through inbox_events_listing (namespace, state, ...), walking every
-- PROCESSING row of the namespace: measured at ~150 buffers per completion.
-- Now the row is locked by primary key, then updated by its tuple id; the
-- fence (claim token and state) stays in the UPDATE's WHERE clause.
CREATE OR REPLACE FUNCTION inboxd_complete_event(
    p_namespace text, p_event_key text, p_claim_token text,
    p_disposition text DEFAULT 'applied', p_reason text DEFAULT NULL, p_now timestamptz DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_now   timestamptz := coalesce(p_now, now());
    v_row   tid;
    v_fence bigint;
    v_state text;
    v_token text;
BEGIN
    SELECT ctid, state, claim_token INTO v_row, v_state, v_token
    FROM inbox_events WHERE namespace = p_namespace AND event_key = p_event_key
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    UPDATE inbox_events
    SET state = 'completed', completed_at = v_now, disposition = p_disposition,
        disposition_reason = p_reason, due_at = NULL, lease_expires_at = NULL, updated_at = v_now
    WHERE ctid = v_row AND claim_token = p_claim_token AND state = 'processing'
    RETURNING fencing_token INTO v_fence;
    IF FOUND THEN
        UPDATE inbox_claims SET ended_at = v_now, outcome = 'completed' WHERE fencing_token = v_fence;
        RETURN 'completed';
    ELSIF v_state = 'completed' AND v_token = p_claim_token THEN
        RETURN 'already_completed';
    END IF;
    RETURN 'superseded';
END $$;
