"""The life of an event: its states, every transition between them, and the statement that makes each.

Every statement named below stands in one of the event's transition files,
queries/accepts.sql, claims.sql, completions.sql, events.sql, streams.sql and
operator_actions.sql, and every
statement there is named below; tests/unit/test_state_diagrams.py holds the
two to each other and the states to EventState. A line reads `FROM -> TO
statement  who moves the event, and when`. (none) is before the first Accept of a key,
(deleted) after retention: a later Accept of that key is a new event. The
functions that run the statements are in claims.py, accepts.py, replays.py,
rescue.py, streams.py, retention.py, operator_actions.py and bulk_operations.py, one per
transition.

    (none)        -> PENDING        event_accept_many       Accept, AcceptBatch: a new key, due at available_at
    (none)        -> PENDING        event_accept_fanned     likewise while a subscription stands: with its copies
    PENDING       -> PROCESSING     event_claim             Claim, when due: attempt + 1, a new claim and fencing token
    PROCESSING    -> PROCESSING     event_claim             Claim by anyone once the lease expired: the old claim ends
    PENDING       -> DEAD_LETTERED  event_claim             Claim, when due with no attempts left: last_error says why
    PROCESSING    -> DEAD_LETTERED  event_claim             Claim once the lease expired, with no attempts left
    PENDING       -> COMPLETED      event_claim             Claim of a stale revision (not replayed): IGNORED
    PROCESSING    -> COMPLETED      event_claim             Claim of a stale revision once the lease expired: likewise
    PENDING       -> PROCESSING     event_claim_one         Claim of one named namespace no rule governs: as event_claim
    PROCESSING    -> PROCESSING     event_claim_one         likewise, once the lease expired
    PENDING       -> DEAD_LETTERED  event_claim_one         likewise, with no attempts left
    PROCESSING    -> DEAD_LETTERED  event_claim_one         likewise, once the lease expired, with no attempts left
    PENDING       -> COMPLETED      event_claim_one         likewise, of a stale revision (not replayed): IGNORED
    PROCESSING    -> COMPLETED      event_claim_one         likewise, of a stale revision once the lease expired
    PROCESSING    -> PROCESSING     event_renew_lease       RenewLease (current token): a later lease end
    PROCESSING    -> COMPLETED      event_complete_many     Complete, CompleteBatch (current token): APPLIED or IGNORED
    PROCESSING    -> COMPLETED      event_complete_waiting  Complete of a row another transaction held, waited for
    PROCESSING    -> PENDING        event_fail              Fail, retryable, attempts left: due after the backoff
    PROCESSING    -> DEAD_LETTERED  event_fail              Fail, permanent or with no attempts left
    PROCESSING    -> PENDING        event_release_many      Release (current token): due now, the attempt given back
    PROCESSING    -> PENDING        event_release_many      a Work stream cut off at its drain's grace end: likewise
    COMPLETED     -> PENDING        event_replay            Replay (audited): attempts reset, ledger kept, even stale
    DEAD_LETTERED -> PENDING        event_replay            Replay, likewise
    PROCESSING    -> PENDING        event_end_claim         EndClaim (audited), the claim the operator saw: due now
    PENDING       -> COMPLETED      event_discard           Discard (audited), in the state the operator saw: IGNORED
    DEAD_LETTERED -> COMPLETED      event_discard           Discard, likewise
    COMPLETED     -> PENDING        event_bulk_replay       a bulk REPLAY's chunk (audited, naming it): due at its pace
    DEAD_LETTERED -> PENDING        event_bulk_replay       a bulk REPLAY's chunk, likewise
    PENDING       -> COMPLETED      event_bulk_ignore       a bulk IGNORE's chunk (audited, naming it): IGNORED
    DEAD_LETTERED -> COMPLETED      event_bulk_ignore       a bulk IGNORE's chunk, likewise
    (none)        -> PENDING        event_bulk_copy         a bulk COPY's chunk: a subscription's copy, due at its pace
    PROCESSING    -> PROCESSING     event_stream_renew      a Work stream's heartbeat: every lease it holds, later
    PROCESSING    -> PENDING        event_stream_end        a Work stream ended holding it, attempts left: due at once
    PROCESSING    -> DEAD_LETTERED  event_stream_end        a Work stream ended holding it, no attempts left
    PROCESSING    -> PENDING        event_rescue_expired    the rescuer: lease expired past a grace, attempts left
    PROCESSING    -> DEAD_LETTERED  event_rescue_expired    the rescuer: lease expired past a grace, no attempts left
    COMPLETED     -> (deleted)      event_delete_completed  retention: completed longer ago than INBOXD_RETENTION

No attempts left means attempt >= INBOXD_MAX_ATTEMPTS (an attempt is a
claim; Release gives one back): event_claim, event_rescue_expired and
event_stream_end test it in SQL, Fail in domain.backoff.decide_failure, and
tests/integration/test_attempts_rule.py holds the four to one rule. Every
transition out of PROCESSING ends the claim in inbox_claims with its outcome
(expired, completed, failed, dead_lettered, released, ended): its token is dead.

Beside the transitions, statements that move no event: they lock, diagnose or
set up the transition they serve.

    event_payload_probe           which payload of a refused group PostgreSQL cannot hold
    event_complete_lock_timeout   how long event_complete_waiting may wait for the row
    event_fail_lock               the current claim's row, locked while Fail decides
    event_fence_diagnose          why a fenced write matched no row: no such event, or a claim not current
    event_replay_lock             the event's row, locked while Replay judges its state
    event_operator_lock           the event's row, locked while an operator's act is judged against what they saw
    event_operator_settle_lookup  the event's state and claim, key-share locked, while a settlement is judged
    event_bulk_lock               a bulk chunk's matches, locked (held ones waited for) before the chunk judges them
    claim_lock_timeout            how long a Claim that lost a limited namespace's lock waits for its holder
    claim_wait_for_namespace      that wait: the namespace's lock, taken and let go, so the Claim looks again
    fencing_token_mint            a settlement's own fencing token, newer than every claim before it
    operator_action_audit         a settlement's audit row (end_claim and discard write theirs in their statement)
    operator_actions_for_event    the operators' audited acts on one key, for GetEvent
"""
