/*
 * claims.pml: leases, claim tokens and fencing tokens of inboxd, checked by SPIN.
 *
 * Three workers, two events, leases that may expire at any moment, Claim,
 * RenewLease, Complete, Fail, Release, a stalled worker coming back with a
 * claim it no longer holds, and the lease rescuer. Each RPC is one atomic
 * step: every statement it runs locks the event row (UPDATE or SELECT ... FOR
 * UPDATE), so no other write to that row interleaves with it. model/README.md
 * maps every variable and step to its SQL.
 *
 * Lines tagged @inv name the invariant their assertion checks; model/check.sh
 * reports a counterexample by that name.
 *
 * Bug switches (spin -DNAME): each puts back one known way to get it wrong.
 *   UNFENCED_COMPLETE          Complete's WHERE lacks claim_token
 *   RECLAIM_KEEPS_OLD_CLAIM    a reclaim neither rotates claim_token nor ends the old claim
 *   RELEASE_WITHOUT_STATE      Release's WHERE lacks state = 'processing'
 *   RESCUE_GIVES_BACK_ATTEMPT  the rescuer gives the attempt back, as Release does
 *   CLAIM_IGNORES_MAX_ATTEMPTS Claim hands out events whose attempts are spent
 *   FENCE_FROM_ATTEMPT         the fencing token is the attempt number, not a sequence
 */

#ifndef W
#define W        3
#endif   /* workers */
#define E        2   /* events */
#define MAXATT   2   /* INBOXD_MAX_ATTEMPTS */
#ifndef BUDGET
#define BUDGET   5   /* at most 5: open[] and OPEN_N below hold 5 claims */
#endif   /* claims the whole run may issue: bounds the sequence */
#define NOBODY   255

/* event states; the RPCs and answers are here only to print a counterexample */
mtype = { PENDING, PROCESSING, COMPLETED, DEAD };
mtype = { RenewLease, Complete, Fail, Release, OK, ABORTED };

/* inbox_events: one row per event */
mtype st[E];         /* state */
byte tok[E];         /* claim_token; 0 is NULL. Claim tokens are numbered by their claim */
byte fence[E];       /* fencing_token */
byte att[E];         /* attempt */
bool expired[E];     /* lease_expires_at <= now: the clock may pass it at any moment */
bool why[E];         /* last_error is set */

/* the inbox_fencing_tokens sequence, and inbox_claims: one row per claim */
byte seq = 0;
byte issued = 0;             /* claims issued: the budget */
bool open[6];       /* ended_at IS NULL */
byte claim_ev[6];     /* the event of each claim */

/* what each worker holds: the claim (by its number), the token it sends, the event */
byte held_ev[W];
byte held_claim[W];
byte held_tok[W];

/* scratch for one atomic step: never part of the state */
hidden byte e;
hidden byte ok, was_current;
hidden mtype before;

/* ghosts: what the design says, kept beside the model of the code */
byte current[E];             /* the current claim per DESIGN.md, 0 when none */
byte completer[E];           /* the claim that completed the event */
byte claims_n[E];            /* claims of the event so far */
byte releases_n[E];          /* releases of the event so far */
byte last_fence = 0;         /* the highest fencing token handed out */

#define HOLDS(w)       (held_ev[w] != NOBODY)
#define FENCE_OK(w, e) (tok[e] == held_tok[w] && st[e] == PROCESSING)
#define DUE(e)         (st[e] == PENDING || (st[e] == PROCESSING && expired[e]))

/* The claim on the row ends in inbox_claims (ended_at set: the claim is keyed
 * by its fencing token), and in the design's eyes (the ghost). */
inline end_claim(e) {
  open[fence[e]] = false;
  current[e] = 0
}

/* Claim (query claim_events) for worker w, of event e, which is due */
inline claim(w, e) {
  assert(completer[e] == 0);                                         /* @inv completed_never_claimed_again */
#ifdef CLAIM_IGNORES_MAX_ATTEMPTS
  if
  :: false -> skip
#else
  if
  :: att[e] >= MAXATT ->
       /* the dead CTE: attempts spent, dead-lettered with last_error; the old claim ends */
       if :: st[e] == PROCESSING -> end_claim(e) :: else -> skip fi;
       st[e] = DEAD; tok[e] = 0; expired[e] = false; why[e] = true;
       printf("w%d: Claim finds event %d due with attempts spent: DEAD_LETTERED\n", w, e)
#endif
  :: else ->
       if
       :: st[e] == PROCESSING ->
#ifdef RECLAIM_KEEPS_OLD_CLAIM
            current[e] = 0   /* the design ends it; the code below keeps its token alive */
#else
            end_claim(e)     /* the ended_claims CTE, and the new claim_token below */
#endif
       :: else -> skip
       fi;
       seq++; issued++;
       att[e]++;
#ifdef FENCE_FROM_ATTEMPT
       fence[e] = att[e];
#else
       fence[e] = seq;
#endif
#ifdef RECLAIM_KEEPS_OLD_CLAIM
       if :: tok[e] == 0 -> tok[e] = seq :: else -> skip fi;
#else
       tok[e] = seq;
#endif
       st[e] = PROCESSING; expired[e] = false;
       open[seq] = true; claim_ev[seq] = e; current[e] = seq; claims_n[e]++;
       held_ev[w] = e; held_claim[w] = seq; held_tok[w] = tok[e];
       printf("w%d: Claim event %d -> claim %d, token %d, fencing token %d, attempt %d\n",
              w, e, seq, tok[e], fence[e], att[e]);
       assert(fence[e] > last_fence);                                /* @inv fencing_tokens_increase */
       last_fence = fence[e]
  fi
}

/* the answer a fenced call must get: OK exactly when its claim is current */
#define MUST_BE_OK(w, e) (current[e] == held_claim[w])

/* the narrative of a counterexample (spin -t prints it; pan stays silent) */
inline say(rpc) {
  printf("w%d: %e(event %d, token %d of claim %d) -> %e; event %d is %e, current claim %d, attempt %d\n",
         w, rpc, e, held_tok[w], held_claim[w], (ok -> OK : ABORTED), e, st[e], current[e], att[e])
}

/* RenewLease (query renew_lease) */
inline renew(w, e) {
  was_current = MUST_BE_OK(w, e);
  if
  :: FENCE_OK(w, e) -> expired[e] = false; ok = true
  :: else -> ok = false
  fi;
  say(RenewLease);
  assert(ok == was_current)                                          /* @inv stale_write_refused */
}

/* Complete (function inboxd_complete_event) */
inline complete(w, e) {
  was_current = MUST_BE_OK(w, e);
  before = st[e];
  if
#ifdef UNFENCED_COMPLETE
  :: st[e] == PROCESSING ->
#else
  :: FENCE_OK(w, e) ->
#endif
       st[e] = COMPLETED; expired[e] = false;
       open[fence[e]] = false;
       if :: was_current -> completer[e] = held_claim[w]; current[e] = 0 :: else -> skip fi;
       ok = true
  :: else ->
       /* already_completed: the same token completed it; OK, nothing changes */
       ok = (st[e] == COMPLETED && tok[e] == held_tok[w])
  fi;
  say(Complete);
  assert(was_current || before == st[e]);                            /* @inv stale_write_refused */
  assert(ok == (was_current || completer[e] == held_claim[w]))       /* @inv stale_write_refused */
}

/* Fail (queries fail_lock, then fail_retry or fail_dead_letter, in one transaction) */
inline fail(w, e) {
  was_current = MUST_BE_OK(w, e);
  if
  :: FENCE_OK(w, e) ->
       open[fence[e]] = false; tok[e] = 0; expired[e] = false; why[e] = true;
       if :: was_current -> current[e] = 0 :: else -> skip fi;
       if
       :: att[e] >= MAXATT -> st[e] = DEAD        /* attempts exhausted */
       :: true -> st[e] = DEAD                    /* permanent */
       :: att[e] < MAXATT -> st[e] = PENDING      /* retry after the backoff: due whenever the clock says */
       fi;
       ok = true
  :: else -> ok = false
  fi;
  say(Fail);
  assert(ok == was_current)                                          /* @inv stale_write_refused */
}

/* Release (query release_events) */
inline release(w, e) {
  was_current = MUST_BE_OK(w, e);
  before = st[e];
  if
#ifdef RELEASE_WITHOUT_STATE
  :: tok[e] == held_tok[w] ->
#else
  :: FENCE_OK(w, e) ->
#endif
       open[fence[e]] = false;
       if :: was_current -> current[e] = 0 :: else -> skip fi;
       st[e] = PENDING; tok[e] = 0; expired[e] = false;
       if :: att[e] > 0 -> att[e]-- :: else -> skip fi;
       releases_n[e]++;
       ok = true
  :: else -> ok = false
  fi;
  say(Release);
  assert(was_current || before == st[e]);                            /* @inv stale_write_refused */
  assert(ok == was_current)                                          /* @inv stale_write_refused */
}

proctype worker(byte w) {
end_idle:
  do
  :: atomic {
         !HOLDS(w) && issued < BUDGET && (DUE(0) || DUE(1)) ->
         if
         :: DUE(0) -> e = 0
         :: DUE(1) -> e = 1
         fi;
         claim(w, e)
       }
  /* a stalled worker may come back with any of these, in any order, at any later time */
  :: atomic { HOLDS(w) -> e = held_ev[w]; renew(w, e) }
  :: atomic { HOLDS(w) -> e = held_ev[w]; complete(w, e) }
  :: atomic { HOLDS(w) -> e = held_ev[w]; fail(w, e) }
  :: atomic { HOLDS(w) -> e = held_ev[w]; release(w, e) }
  :: atomic { HOLDS(w) -> held_ev[w] = NOBODY; held_claim[w] = 0; held_tok[w] = 0 }   /* drops the claim */
  od
}

/* The clock: any running lease may expire at any moment. */
proctype clock() {
end:
  do
  :: atomic { st[0] == PROCESSING && !expired[0] -> expired[0] = true; printf("clock: the lease on event 0 expires\n") }
  :: atomic { st[1] == PROCESSING && !expired[1] -> expired[1] = true; printf("clock: the lease on event 1 expires\n") }
  od
}

/* The lease rescuer: a lease expired past its grace goes back to PENDING, or
 * to DEAD_LETTERED when its attempts are spent; the old claim ends as a
 * reclaim would end it. Past the grace is some moment after expiry: any. */
inline rescue(e) {
  printf("rescuer: event %d, lease expired past grace, claim %d ends\n", e, current[e]);
  end_claim(e);
  tok[e] = 0; expired[e] = false;
  if
  :: att[e] >= MAXATT -> st[e] = DEAD; why[e] = true
  :: else ->
       st[e] = PENDING;
#ifdef RESCUE_GIVES_BACK_ATTEMPT
       att[e]--
#else
       skip
#endif
  fi
}

proctype rescuer() {
end:
  do
  :: atomic { st[0] == PROCESSING && expired[0] -> rescue(0) }
  :: atomic { st[1] == PROCESSING && expired[1] -> rescue(1) }
  od
}

/* Invariants over every reachable state. */
#define HOLDS_E(w, e) (HOLDS(w) && held_ev[w] == e && FENCE_OK(w, e))
#if W > 2
#define HOLDERS(e) (HOLDS_E(0, e) + HOLDS_E(1, e) + HOLDS_E(2, e))
#else
#define HOLDERS(e) (HOLDS_E(0, e) + HOLDS_E(1, e))
#endif
#define OPEN_OF(c, e) (open[c] && claim_ev[c] == e)
#define OPEN_N(e) (OPEN_OF(1, e) + OPEN_OF(2, e) + OPEN_OF(3, e) + OPEN_OF(4, e) + OPEN_OF(5, e))
#define OPEN_CLAIMS_OK(e) ((OPEN_N(e) <= 1) && (st[e] == PROCESSING -> (open[fence[e]] && current[e] == fence[e]) : current[e] == 0))
#define ATTEMPTS_OK(e) (att[e] == claims_n[e] - releases_n[e])
#define LIVE_OK(e) (att[e] <= MAXATT && (st[e] == PENDING -> att[e] < MAXATT : true) && \
                    (st[e] == DEAD -> why[e] : true))

active proctype monitor() {
end:
  atomic {
    !(HOLDERS(0) <= 1 && HOLDERS(1) <= 1) ->
      assert(HOLDERS(0) <= 1 && HOLDERS(1) <= 1)                     /* @inv one_current_claim */
  }
}

active proctype monitor_claims() {
end:
  atomic {
    !(OPEN_CLAIMS_OK(0) && OPEN_CLAIMS_OK(1)) ->
      assert(OPEN_CLAIMS_OK(0) && OPEN_CLAIMS_OK(1))                 /* @inv one_current_claim */
  }
}

active proctype monitor_attempts() {
end:
  atomic {
    !(ATTEMPTS_OK(0) && ATTEMPTS_OK(1)) ->
      assert(ATTEMPTS_OK(0) && ATTEMPTS_OK(1))                       /* @inv attempts_counted */
  }
}

active proctype monitor_dead_letters() {
end:
  atomic {
    !(LIVE_OK(0) && LIVE_OK(1)) ->
      assert(LIVE_OK(0) && LIVE_OK(1))                               /* @inv dead_lettered_never_lost */
  }
}

init {
  byte i = 0;
  atomic {
    do
    :: i < W -> held_ev[i] = NOBODY; i++
    :: else -> break
    od;
    st[0] = PENDING; st[1] = PENDING;    /* both events accepted */
    run clock();
    run rescuer();
    run worker(0);
    run worker(1);
#if W > 2
    run worker(2)
#endif
  }
}
