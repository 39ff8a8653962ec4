/*
 * actions.pml: the action ledger (RecordActionOutcome) of one event, checked by SPIN.
 *
 * Two claims of one event in turn: claim A (fencing token 1) holds the event
 * first; claim B (fencing token 2) takes it over when A's lease expires, at
 * any moment. A is stalled, not dead: it carries on to the end of its script,
 * whatever B did meanwhile. Each claim does what the Python client's
 * ActionLedger does: it reads the ledger (ClaimedEvent.actions), records an
 * abandoned INTENDED as UNKNOWN and reconciles an UNKNOWN by looking the key up
 * downstream, records INTENDED, sends, records what it learned (SUCCEEDED,
 * FAILED, or UNKNOWN when the answer was lost), and reconciles an UNKNOWN. The downstream
 * dedupes on the idempotency key: a second request under a key that already
 * took effect is answered with the first one's success.
 *
 * The honest model follows DESIGN.md (Fine print, Actions): an outcome from a
 * claim older than the one that last wrote the action is kept in its history
 * and answered OK with the action as it stands; SUCCEEDED always stands;
 * INTENDED needs the current claim, decided under the same lock as the write.
 * model/README.md maps every variable and step to its SQL.
 *
 * Bug switches (spin -DNAME). Today's server code (before the fix of issue
 * 15) is TODAY_RULE plus INTENDED_CHECK_THEN_ACT; TODAY_RULE is the sum of
 * the two halves below it, each of which is a bug on its own:
 *   TODAY_RULE               action_update takes an outcome from any claim by the
 *                            transition table alone, and stores that claim's fencing token
 *   OLDER_OUTCOME_OVERWRITES an older claim's FAILED or UNKNOWN moves the state
 *                            (issue 15 item 1: it overwrites a newer claim's INTENDED)
 *   OLDER_SUCCEEDED_REFUSED  an older claim's SUCCEEDED is judged by the transition
 *                            table (FAILED -> SUCCEEDED refused): the effect is lost
 *   INTENDED_CHECK_THEN_ACT  action_claim_lookup decides "current" in a plain
 *                            SELECT, before and apart from the write (issue 15 item 2)
 */

#ifdef TODAY_RULE
#define OLDER_OUTCOME_OVERWRITES
#define OLDER_SUCCEEDED_REFUSED
#endif

/* action states (NONE: no row in inbox_actions), and answers (PRECONDITION: FAILED_PRECONDITION) */
mtype = { NONE, INTENDED, SUCCEEDED, FAILED, UNKNOWN };
mtype = { OK, ABORTED, PRECONDITION };

/* inbox_events: the claim that is current (its fencing token; A is 1, B is 2) */
byte current = 1;

/* inbox_actions: the one action's row */
mtype lstate = NONE;   /* state */
byte lfence = 0;      /* fencing_token: the claim that last wrote it */
byte lkey = 0;        /* idempotency_key; 0 until minted */
byte minted = 0;      /* keys minted so far */

/* the downstream: it dedupes on the idempotency key */
bool done = false;    /* the effect took place under the key */
byte effects = 0;     /* effects that took place */

/* ghost: some claim has learned that the effect took place */
bool learned = false;

hidden mtype before;

#define NAME(f) (f == 1 -> 65 : (f == 2 -> 66 : 45))   /* A, B, - */

#define ALLOWED(from, to) ((from == INTENDED) || \
                           (from == UNKNOWN && (to == SUCCEEDED || to == FAILED)) || \
                           (from == FAILED && to == INTENDED))

/* plan_action_write, then action_update or action_read */
inline transition(f, s) {
  if
  :: s == lstate && s != INTENDED -> ans = OK                    /* a repeat: nothing changes */
  :: s != lstate || s == INTENDED ->
       if
       :: ALLOWED(lstate, s) -> lstate = s; lfence = f; ans = OK
       :: else -> ans = PRECONDITION
       fi
  fi
}

/* An outcome from a claim older than the one that last wrote the action. */
inline older_outcome(f, s) {
  if
  :: s == SUCCEEDED ->
#ifdef OLDER_SUCCEEDED_REFUSED
       transition(f, s)
#else
       lstate = SUCCEEDED; lfence = f; ans = OK                  /* SUCCEEDED always stands, with its claim's token */
#endif
  :: s != SUCCEEDED ->
#ifdef OLDER_OUTCOME_OVERWRITES
       transition(f, s)
#else
       ans = OK                                                  /* kept in history; the action as it stands */
#endif
  fi
}

/* The write, under the action row's lock (action_lock ... FOR UPDATE). */
inline write(f, s) {
  before = lstate;
  if
  :: lstate == NONE ->
       /* action_create: the first record mints the key */
       minted++; lkey = minted; lstate = s; lfence = f; ans = OK
  :: lstate != NONE ->
       if
       :: s != INTENDED && f < lfence -> older_outcome(f, s)
       :: s == INTENDED || f >= lfence -> transition(f, s)
       fi
  fi;
  printf("%c: RecordActionOutcome(%e) -> %e; ledger %e by claim %c\n",
         NAME(f), s, ans, lstate, NAME(lfence));
  assert(minted == 1 && lkey == 1);                              /* @inv key_never_changes */
  assert(before != SUCCEEDED || lstate == SUCCEEDED);            /* @inv succeeded_stands */
  assert(s != SUCCEEDED || lstate == SUCCEEDED);                 /* @inv succeeded_stands */
  assert(s != INTENDED || ans != OK || current == f);            /* @inv intended_needs_current_claim */
  assert(s != INTENDED || ans != OK || before != SUCCEEDED)      /* @inv no_act_after_succeeded */
}

inline refused(f, s) {
  printf("%c: RecordActionOutcome(%e) -> %e: claim %c is not current\n", NAME(f), s, ans, NAME(f))
}

/* RecordActionOutcome(state s) by claim f; answers ans */
inline record(f, s) {
#ifdef INTENDED_CHECK_THEN_ACT
  atomic {
    looked = (current == f);                      /* action_claim_lookup: a plain SELECT */
    printf("%c: action_claim_lookup says claim %c is current: %d\n", NAME(f), NAME(f), looked)
  };
  atomic {
    if
    :: s == INTENDED && !looked -> ans = ABORTED; refused(f, s)
    :: else -> write(f, s)
    fi;
    looked = false
  }
#else
  atomic {
    if
    :: s == INTENDED && current != f -> ans = ABORTED; refused(f, s)   /* decided under the lock of the write */
    :: else -> write(f, s)
    fi
  }
#endif
}

/* The client retries a call whose answer it lost: the outcome may arrive twice. */
inline record_retried(f, s) {
  record(f, s);
  if
  :: skip
  :: ans == OK -> record(f, s)
  fi
}

/* The send: one request under the key, one answer, which may be lost. */
inline send() {
  atomic {
    if
    :: done -> outcome = SUCCEEDED                   /* deduped: the first request's answer */
    :: done -> outcome = UNKNOWN                     /* ... lost on the way back */
    :: !done -> done = true; effects++; outcome = SUCCEEDED
    :: !done -> done = true; effects++; outcome = UNKNOWN
    :: !done -> outcome = FAILED                     /* refused: nothing happened */
    :: !done -> outcome = UNKNOWN                    /* lost before it arrived */
    fi;
    if :: outcome == SUCCEEDED -> learned = true :: else -> skip fi;
    if
    :: done -> printf("%c: sends under the key; the effect has happened; the answer: %e\n", NAME(f), outcome)
    :: else -> printf("%c: sends under the key; nothing happened; the answer: %e\n", NAME(f), outcome)
    fi
  }
}

/* Reconciliation: look the key up downstream. */
inline lookup() {
  atomic {
    if
    :: done -> outcome = SUCCEEDED; learned = true
    :: !done -> outcome = FAILED
    fi;
    printf("%c: looks the key up downstream: %e\n", NAME(f), outcome)
  }
}

proctype claim(byte f) {
  mtype seen, ans, outcome;
  bool looked;

  if
  :: f == 1 -> seen = NONE                            /* the first claim: the ledger is empty */
  :: f == 2 ->
       atomic {
         current = 2; seen = lstate;                   /* the takeover: A's lease expired */
         printf("B: Claim takes the event over (A's lease expired); B sees the action %e\n", seen)
       }
  fi;
  if
  :: seen == SUCCEEDED -> goto finish
  :: seen == INTENDED || seen == UNKNOWN ->
       if
       :: seen == INTENDED ->
            /* ActionLedger.prepare_reconcile: an abandoned INTENDED is recorded UNKNOWN first */
            record_retried(f, UNKNOWN);
            if :: ans != OK -> goto finish :: else -> skip fi
       :: else -> skip
       fi;
       lookup();
       record(f, outcome);
       if
       :: outcome == SUCCEEDED || ans != OK -> goto finish
       :: else -> skip
       fi
  :: seen == NONE || seen == FAILED -> skip
  fi;
  seen = NONE;
  record(f, INTENDED);
  if :: ans != OK -> goto finish :: else -> skip fi;
  send();
  record_retried(f, outcome);
  if
  :: outcome == UNKNOWN -> lookup(); record_retried(f, outcome)
  :: else -> skip
  fi;
finish:
  skip
}

init {
  run claim(1);
  run claim(2);
  (_nr_pr == 1) ->
    assert(effects <= 1);                                        /* @inv effect_once */
    assert(!done || lstate == SUCCEEDED);                        /* @inv never_failed_after_effect */
    assert(!learned || lstate == SUCCEEDED)                      /* @inv never_failed_after_effect */
}
