-- Completion as SQL functions, so a worker whose business data lives in this
-- same PostgreSQL can complete the event inside its own transaction: the
-- business write and the completion commit together or not at all.

-- The one implementation of PROCESSING -> COMPLETED. Answers instead of
-- raising, so inboxd's own Complete can map each answer to a status code:
--   'completed'          this call completed the event
--   'already_completed'  completed earlier by this very claim token (idempotent)
--   'not_found'          no such event
--   'superseded'         the token is not the event's current claim
CREATE FUNCTION inboxd_complete_event(
    p_namespace text, p_event_key text, p_claim_token text,
    p_disposition text DEFAULT 'applied', p_reason text DEFAULT NULL, p_now timestamptz DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_now   timestamptz := coalesce(p_now, now());
    v_fence bigint;
    v_state text;
    v_token text;
BEGIN
    UPDATE inbox_events
    SET state = 'completed', completed_at = v_now, disposition = p_disposition,
        disposition_reason = p_reason, due_at = NULL, lease_expires_at = NULL, updated_at = v_now
    WHERE namespace = p_namespace AND event_key = p_event_key
      AND claim_token = p_claim_token AND state = 'processing'
    RETURNING fencing_token INTO v_fence;
    IF FOUND THEN
        UPDATE inbox_claims SET ended_at = v_now, outcome = 'completed' WHERE fencing_token = v_fence;
        RETURN 'completed';
    END IF;
    SELECT state, claim_token INTO v_state, v_token
    FROM inbox_events WHERE namespace = p_namespace AND event_key = p_event_key;
    IF NOT FOUND THEN
        RETURN 'not_found';
    ELSIF v_state = 'completed' AND v_token = p_claim_token THEN
        RETURN 'already_completed';
    END IF;
    RETURN 'superseded';
END $$;

-- For workers: completes the event or raises, aborting the caller's
-- transaction (and so its business write).
--   SQLSTATE IX409  claim superseded: the lease was taken over
--   SQLSTATE IX404  no such event
-- Returns true when this call completed the event, false when this same
-- claim had already completed it.
CREATE FUNCTION inboxd_complete(
    p_namespace text, p_event_key text, p_claim_token text,
    p_disposition text DEFAULT 'applied', p_reason text DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_answer text := inboxd_complete_event(p_namespace, p_event_key, p_claim_token, p_disposition, p_reason);
BEGIN
    IF v_answer = 'superseded' THEN
        RAISE EXCEPTION 'inboxd: claim superseded for event % in namespace %', p_event_key, p_namespace
            USING ERRCODE = 'IX409', HINT = 'another worker holds the event now; roll back';
    ELSIF v_answer = 'not_found' THEN
        RAISE EXCEPTION 'inboxd: no event % in namespace %', p_event_key, p_namespace USING ERRCODE = 'IX404';
    END IF;
    RETURN v_answer = 'completed';
END $$;
