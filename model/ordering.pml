/*
 * ordering.pml: ordering keys of inboxd, checked by SPIN.
 *
 * One ordering key, three events of it with revisions 1, 2 and 3 that arrive
 * in any order at any time, two workers, leases that may expire at any
 * moment, the lease rescuer, and an operator who may replay one finished
 * event. A Claim is two steps, as the statement claim_events runs: it reads
 * the key in its snapshot (the pre-filter that picks a key's next event), and
 * later, after any other process may have committed, locks the event row and
 * the key row (inbox_ordering_keys) and decides on their latest versions.
 * Every other RPC is one atomic step. model/README.md maps every variable and
 * step to its SQL.
 *
 * Lines tagged @inv name the invariant their assertion checks; model/check.sh
 * reports a counterexample by that name.
 *
 * Configurations and bug switches (spin -DNAME):
 *   DELIVER               INBOXD_STALE_REVISIONS=deliver: stale events are handed out flagged (honest)
 *   SNAPSHOT_DECIDES      the Claim trusts its snapshot of the key: no lock and recheck of the key row
 *   RETRY_FREES_KEY       Fail (retry), Release and the rescuer let go of the key, as if in flight meant PROCESSING
 *   NO_STALE_CHECK        the Claim hands out stale revisions unflagged (no applied revision kept on the key)
 *   REPLAY_IGNORED        the Claim completes a replayed stale event IGNORED, as before migration 0012
 */

#define E        3     /* events of the one ordering key */
#ifndef W
#define W        3     /* workers */
#endif
#ifndef BUDGET
#define BUDGET   6     /* claims the whole run may issue */
#endif
#define NONE     255

mtype = { NOTYET, PENDING, PROCESSING, COMPLETED, DEAD };

/* inbox_events: the key's events */
mtype st[E];           /* state; NOTYET: not accepted yet */
byte rev[E];           /* revision */
byte tok[E];           /* claim_token, numbered by claim; 0 is NULL */
bool expired[E];       /* lease_expires_at <= now */
bool rep[E];           /* replayed: set by Replay, never cleared (migration 0012) */

/* inbox_ordering_keys: the key's row */
byte holder = NONE;    /* holder: the event that holds the key */
byte applied = 0;      /* applied_revision */

byte seq = 0;          /* claims issued (claim tokens) */

/* what each worker holds; the event its Claim in progress picked in its
 * snapshot (NONE: no Claim in progress), and, for SNAPSHOT_DECIDES only, the
 * key row as that snapshot saw it */
byte held_ev[W];
byte held_tok[W];
bool held_stale[W];
byte cand[W];
#ifdef SNAPSHOT_DECIDES
byte snap_holder[W];
byte snap_applied[W];
#endif

/* ghosts */
bool started[E];       /* claimed at least once since accepted or replayed, not finished */
bool replayed = false;

hidden byte e, key_holder, key_applied;

#define IS_OPEN(s)      ((s) == PENDING || (s) == PROCESSING)
#define DUE(e)          (st[e] == PENDING || (st[e] == PROCESSING && expired[e]))
#ifdef DELIVER
#define IGNORING        false
#else
#define IGNORING        true
#endif
#ifdef NO_STALE_CHECK
#define STALE(r, a)     false
#else
#define STALE(r, a)     ((r) <= (a))
#endif
/* A stale event the Claim completes IGNORED: one not replayed (a Replay is an
 * operator's explicit wish: delivered, flagged stale), when stale events are ignored. */
#ifdef REPLAY_IGNORED
#define TO_IGNORE(e, a) (IGNORING && STALE(rev[e], a))
#else
#define TO_IGNORE(e, a) (IGNORING && STALE(rev[e], a) && !rep[e])
#endif
#define PROCESSING_N    ((st[0] == PROCESSING) + (st[1] == PROCESSING) + (st[2] == PROCESSING))

/* Never two events of the key in flight, and the one in flight holds the key. */
#define IN_FLIGHT_OK \
  (PROCESSING_N <= 1 && (st[0] == PROCESSING -> holder == 0 : true) && \
   (st[1] == PROCESSING -> holder == 1 : true) && (st[2] == PROCESSING -> holder == 2 : true))

/* The key lets go of a finished event (the trigger inboxd_ordering_key_finished). */
inline finish(e) {
  if :: holder == e -> holder = NONE :: else -> skip fi;
  started[e] = false
}

/* Claim, step 1: the statement's snapshot, and the pre-filter in `due` on
 * it. An event is its key's next when it holds the key; when it is stale
 * (and stale events are ignored, and it was not replayed); or, when no
 * event holds the key, when no open event comes before it, stale ones to be
 * ignored aside. The scan may reach any of the snapshot's candidates first. */
#define OPEN(e)  (st[e] == PENDING || st[e] == PROCESSING)
#define BEFORE(f, e) (OPEN(f) && rev[f] < rev[e] && !TO_IGNORE(f, applied))
#define NEXT(e) \
  (DUE(e) && (holder == e || TO_IGNORE(e, applied) || \
              (holder == NONE && !BEFORE(0, e) && !BEFORE(1, e) && !BEFORE(2, e))))

inline look(w) {
  if
  :: NEXT(0) -> cand[w] = 0
  :: NEXT(1) -> cand[w] = 1
  :: NEXT(2) -> cand[w] = 2
  fi;
#ifdef SNAPSHOT_DECIDES
  snap_holder[w] = holder; snap_applied[w] = applied;
#endif
  printf("w%d: Claim's snapshot: event %d is the key's next (holder %d, applied %d)\n", w, cand[w], holder, applied)
}

/* Claim, step 2: lock the candidate's row (EPQ: it must still be due) and the
 * key row, read in its latest version; then ignore, hand out, or skip. */
inline decide(w, e) {
#ifdef SNAPSHOT_DECIDES
  key_holder = snap_holder[w]; key_applied = snap_applied[w];
#else
  key_holder = holder; key_applied = applied;
#endif
  if
  :: !DUE(e) -> printf("w%d: Claim skips event %d (taken or finished since its snapshot)\n", w, e)
  :: DUE(e) && TO_IGNORE(e, key_applied) ->
       /* the finished CTE: COMPLETED IGNORED, never handed out */
       assert(!rep[e]);                                                  /* @inv replay_delivered */
       st[e] = COMPLETED; tok[e] = 0; expired[e] = false; finish(e);
       printf("w%d: Claim completes event %d (revision %d) IGNORED: applied %d\n", w, e, rev[e], key_applied)
  :: DUE(e) && !TO_IGNORE(e, key_applied) && key_holder != NONE && key_holder != e ->
       printf("w%d: Claim skips event %d: event %d holds the key\n", w, e, key_holder)
  :: DUE(e) && !TO_IGNORE(e, key_applied) && (key_holder == NONE || key_holder == e) ->
       /* an event claimed before and not finished (retrying, released, rescued) comes back first */
       assert(!(started[0] && st[0] == PENDING) || e == 0);              /* @inv same_event_back_first */
       assert(!(started[1] && st[1] == PENDING) || e == 1);              /* @inv same_event_back_first */
       assert(!(started[2] && st[2] == PENDING) || e == 2);              /* @inv same_event_back_first */
       seq++;
       st[e] = PROCESSING; tok[e] = seq; expired[e] = false;
       holder = e; started[e] = true;
       assert(IN_FLIGHT_OK);                                             /* @inv one_in_flight */
       held_ev[w] = e; held_tok[w] = seq; held_stale[w] = STALE(rev[e], applied);
       printf("w%d: Claim hands out event %d (revision %d), token %d, applied %d, stale %d\n",
              w, e, rev[e], seq, applied, held_stale[w])
  fi;
  cand[w] = NONE
}

#define HOLDS(w)        (held_ev[w] != NONE)
#define FENCE_OK(w, e)  (tok[e] == held_tok[w] && st[e] == PROCESSING)

inline drop(w) { held_ev[w] = NONE; held_tok[w] = 0; held_stale[w] = false }

/* Complete (complete_events / inboxd_complete_event, then the trigger): the
 * worker applies its event, or ignores it when it came flagged stale. */
inline complete(w, e) {
  if
  :: FENCE_OK(w, e) && !held_stale[w] ->
       assert(!(rev[e] <= applied));                                    /* @inv stale_never_applied */
       applied = rev[e];
       st[e] = COMPLETED; expired[e] = false; finish(e);
       printf("w%d: Complete event %d APPLIED: applied revision %d\n", w, e, applied)
  :: FENCE_OK(w, e) && held_stale[w] ->
       st[e] = COMPLETED; expired[e] = false; finish(e);
       printf("w%d: Complete event %d IGNORED (flagged stale)\n", w, e)
  :: else -> printf("w%d: Complete event %d -> ABORTED\n", w, e)
  fi;
  drop(w)
}

/* Fail (fail_retry, fail_dead_letter); the retry is due whenever the clock says */
inline fail(w, e) {
  if
  :: FENCE_OK(w, e) ->
       tok[e] = 0; expired[e] = false;
       if
       :: st[e] = PENDING;
#ifdef RETRY_FREES_KEY
          if :: holder == e -> holder = NONE :: else -> skip fi;
#endif
          printf("w%d: Fail event %d: retry\n", w, e)
       :: st[e] = DEAD; finish(e); printf("w%d: Fail event %d: DEAD_LETTERED, the key goes on\n", w, e)
       fi
  :: else -> printf("w%d: Fail event %d -> ABORTED\n", w, e)
  fi;
  drop(w)
}

/* Release (release_events) */
inline release(w, e) {
  if
  :: FENCE_OK(w, e) ->
       st[e] = PENDING; tok[e] = 0; expired[e] = false;
#ifdef RETRY_FREES_KEY
       if :: holder == e -> holder = NONE :: else -> skip fi;
#endif
       printf("w%d: Release event %d\n", w, e)
  :: else -> printf("w%d: Release event %d -> ABORTED\n", w, e)
  fi;
  drop(w)
}

proctype worker(byte w) {
end_idle:
  do
  :: atomic { !HOLDS(w) && cand[w] == NONE && seq < BUDGET && (NEXT(0) || NEXT(1) || NEXT(2)) -> look(w) }
  :: atomic { cand[w] != NONE -> e = cand[w]; decide(w, e) }
  :: atomic { HOLDS(w) -> e = held_ev[w]; complete(w, e) }
  :: atomic { HOLDS(w) -> e = held_ev[w]; fail(w, e) }
  :: atomic { HOLDS(w) -> e = held_ev[w]; release(w, e) }
  :: atomic { HOLDS(w) -> printf("w%d: stalls for good, holding event %d\n", w, held_ev[w]); drop(w) }
  od
}

/* Accept: the key's events arrive in any order (the trigger makes sure the
 * key row exists: here it always does). */
proctype edge() {
end:
  do
  :: atomic { st[0] == NOTYET -> st[0] = PENDING; printf("edge: Accept event 0 (revision %d)\n", rev[0]) }
  :: atomic { st[1] == NOTYET -> st[1] = PENDING; printf("edge: Accept event 1 (revision %d)\n", rev[1]) }
  :: atomic { st[2] == NOTYET -> st[2] = PENDING; printf("edge: Accept event 2 (revision %d)\n", rev[2]) }
  od
}

/* Time: a running lease expires at any moment; the rescuer puts an expired
 * one back to PENDING (the holder keeps the key); an operator may replay one
 * finished event. */
proctype world() {
end:
  do
  :: atomic { st[0] == PROCESSING && !expired[0] -> expired[0] = true; printf("clock: lease on event 0 expires\n") }
  :: atomic { st[1] == PROCESSING && !expired[1] -> expired[1] = true; printf("clock: lease on event 1 expires\n") }
  :: atomic { st[2] == PROCESSING && !expired[2] -> expired[2] = true; printf("clock: lease on event 2 expires\n") }
  :: atomic {
       (st[0] == PROCESSING && expired[0]) || (st[1] == PROCESSING && expired[1]) ||
       (st[2] == PROCESSING && expired[2]) ->
       if
       :: st[0] == PROCESSING && expired[0] -> e = 0
       :: st[1] == PROCESSING && expired[1] -> e = 1
       :: st[2] == PROCESSING && expired[2] -> e = 2
       fi;
       st[e] = PENDING; tok[e] = 0; expired[e] = false;
#ifdef RETRY_FREES_KEY
       if :: holder == e -> holder = NONE :: else -> skip fi;
#endif
       printf("rescuer: event %d back to PENDING\n", e)
     }
  :: atomic {
       !replayed && (st[0] == COMPLETED || st[0] == DEAD || st[1] == COMPLETED || st[1] == DEAD ||
                     st[2] == COMPLETED || st[2] == DEAD) ->
       if
       :: st[0] == COMPLETED || st[0] == DEAD -> e = 0
       :: st[1] == COMPLETED || st[1] == DEAD -> e = 1
       :: st[2] == COMPLETED || st[2] == DEAD -> e = 2
       fi;
       st[e] = PENDING; replayed = true; rep[e] = true;
       printf("operator: Replay event %d (revision %d)\n", e, rev[e])
     }
  od
}


active proctype monitor() {
end:
  atomic { !IN_FLIGHT_OK -> assert(IN_FLIGHT_OK) }                     /* @inv one_in_flight */
}

init {
  atomic {
    st[0] = NOTYET; st[1] = NOTYET; st[2] = NOTYET;
    rev[0] = 1; rev[1] = 2; rev[2] = 3;
    held_ev[0] = NONE; held_ev[1] = NONE; cand[0] = NONE; cand[1] = NONE;
#if W > 2
    held_ev[2] = NONE; cand[2] = NONE;
    run worker(2);
#endif
    run edge();
    run world();
    run worker(0);
    run worker(1)
  }
}
