// The worker loop: claim, keep the lease alive, finish fenced, give work back on shutdown.
//
// Each claimed event runs `handler(job)`. While it runs, the lease is renewed
// every third of its length, so two renewals can fail before it lapses; each
// renewal has a deadline of half that interval and a failed one is retried at
// once (src/renewals.js), so one that hangs cannot cost the lease. When
// the handler resolves the event is completed (or IGNORED when it resolves
// to {ignored: 'reason'}); when it throws the event is failed, to be retried
// with backoff (error.retryAfterMs overrides it; error.permanent dead-letters).
// Every one of those calls carries the claim token, so a worker whose claim
// was superseded learns it through ABORTED and leaves the event alone.
//
// A handler still running after handlerTimeoutMs (default 15 minutes) has its
// signal aborted with a HandlerTimeout; the event is then failed, counting the
// attempt, as soon as the handler settles or at most handlerTimeoutGraceMs (10 s)
// later. One that still
// runs then keeps its concurrency slot until it returns (src/handler_timeout.js).
//
// stop() (and SIGTERM, with handleSignals) stops claiming, sends the completions
// that wait for a Claim, aborts each job's signal, and gives a grace period: a
// handler that finishes in it completes normally; one that rejects with the
// signal's reason (WorkerStopping), or is still running when it ends, is
// released: back to PENDING at once, without counting the attempt. Any other error is a failure, stopping or not.
//
// Completions that finish within completeWindowMs (2 ms) of each other, up to completeBatchSize
// (100), go out together; each event still gets its own answer, so a superseded claim is reported
// for that event alone. They ride the worker's next Claim (ClaimRequest.completions, with waitMs 0),
// so a busy worker's cycle is one call; an event settles only once that Claim's answer says the
// server committed it, and keeps its concurrency slot until then. While a long-poll is out (or
// after a failed Claim, or when stopping) they go as a CompleteBatch instead, so none waits for a
// poll; the completions of a failed Claim are sent again (a repeat answers OK); a server that
// ignores a Claim's completions is detected by its answer, and CompleteBatch is used from then on.
//
// How soon and how much it claims is src/claim_backoff.js: a worker with waitMs 0 pauses after an
// empty answer, and a Claim whose answer was too big to receive halves the next Claims' batch.
//
// Events (all optional): 'settled' {event, outcome, error} with outcome one of
// completed, ignored, failed, released, superseded, unfinished; 'renewed'
// {event, leaseExpiresAt}; 'leaseLost' {event, error}; 'claimError',
// 'renewError' and 'finishError' with the grpc error.

import { EventEmitter } from 'node:events';

import { ClaimBackoff } from './claim_backoff.js';
import { CompletionBatcher, DEFAULT_MAX_ITEMS, DEFAULT_WINDOW_MS } from './completions.js';
import { toDate } from './convert.js';
import { finishClaim, releaseClaim, WorkerStopping } from './finishing.js';
import { DEFAULT_HANDLER_TIMEOUT_MS, HANDLER_TIMEOUT_GRACE_MS, Overdue, runLimited } from './handler_timeout.js';
import { Job } from './job.js';
import { LeaseKeeper } from './renewals.js';

// inboxd leases at most 100 events per Claim.
const MAX_EVENTS_PER_CLAIM = 100;

/** The reason a job's signal aborts when its claim was superseded or ended. */
export class LeaseLost extends Error {
  constructor(cause) {
    super('the lease was lost', { cause });
    this.name = 'LeaseLost';
  }
}

export class Worker extends EventEmitter {
  /**
   * @param {import('./client.js').InboxClient} client
   * @param {object} options
   * @param {(job: Job) => Promise<void | {ignored: string}>} options.handler
   * @param {string[]} [options.namespaces] claim only from these (empty: all the caller may see).
   * @param {string[]} [options.eventTypes] claim only these types (empty: all).
   * @param {number} [options.leaseMs] lease per claim and per renewal.
   * @param {number} [options.waitMs] each Claim's long-poll; also the longest stop() waits for one.
   * @param {number} [options.concurrency] events handled at once.
   * @param {number} [options.shutdownGraceMs] how long stop() lets running handlers finish.
   * @param {number|null} [options.handlerTimeoutMs] how long one handler may run (null: no limit).
   * @param {number} [options.handlerTimeoutGraceMs] how long a timed-out handler may take to honour its signal.
   * @param {number} [options.claimRetryMs] pause after a failed Claim.
   * @param {string} [options.workerId] recorded in the claim history.
   * @param {number} [options.completeWindowMs] completions finishing within this many ms share one Claim or CompleteBatch.
   * @param {number} [options.completeBatchSize] at most this many completions per CompleteBatch.
   */
  constructor(client, options) {
    super();
    if (typeof options?.handler !== 'function') throw new TypeError('a Worker needs a handler function');
    this.client = client;
    this.handler = options.handler;
    this.namespaces = options.namespaces ?? [];
    this.eventTypes = options.eventTypes ?? [];
    this.leaseMs = options.leaseMs ?? 30_000;
    this.waitMs = options.waitMs ?? 5_000;
    this.concurrency = options.concurrency ?? 1;
    this.shutdownGraceMs = options.shutdownGraceMs ?? 10_000;
    this.handlerTimeoutMs =
      options.handlerTimeoutMs === undefined ? DEFAULT_HANDLER_TIMEOUT_MS : options.handlerTimeoutMs;
    if (this.handlerTimeoutMs !== null && !(this.handlerTimeoutMs > 0)) {
      throw new RangeError(`handlerTimeoutMs=${this.handlerTimeoutMs}: must be positive (null: no limit)`);
    }
    this.handlerTimeoutGraceMs = options.handlerTimeoutGraceMs ?? HANDLER_TIMEOUT_GRACE_MS;
    // Timed-out handlers still running after their event was failed: each keeps its slot.
    this.overdue = new Overdue();
    this.claimRetryMs = options.claimRetryMs ?? 1_000;
    // Pauses an idle worker that does not long-poll, and shrinks a batch too big to receive.
    this.claims = new ClaimBackoff({ waitMs: this.waitMs, maxEvents: MAX_EVENTS_PER_CLAIM });
    this.workerId = options.workerId ?? `node-${process.pid}`;
    // Each handler's event still gets its own answer; only the round trip is shared.
    this.completions = new CompletionBatcher(client, {
      windowMs: options.completeWindowMs ?? DEFAULT_WINDOW_MS,
      maxItems: options.completeBatchSize ?? DEFAULT_MAX_ITEMS,
    });
    this.inflight = new Map();
    this.stopping = false;
    this.started = false;
    this.finished = new Promise((resolve) => {
      this.resolveFinished = resolve;
    });
    this.stopped = new Promise((resolve) => {
      this.resolveStopped = resolve;
    });
    this.wake = () => {};
    // Whether the server commits a Claim's completions: unknown (null) until a Claim carried some.
    this.carries = null;
  }

  /** Claims and handles events until stop(); resolves once every claimed event is settled. */
  async run() {
    if (this.started) throw new Error('a Worker runs once');
    this.started = true;
    while (!this.stopping) {
      const carrying = this.carries !== false;
      this.completions.holdForClaims(carrying);
      let claiming;
      if (carrying && this.completions.waiting > 0) {
        if (!this.completions.due) {
          // At most the completion window: then they ride the Claim below.
          await Promise.race([this.completions.whenDue(), this.stopped]);
          continue;
        }
        claiming = this.#claimCarrying(this.completions.take());
      } else {
        const free = this.concurrency - this.#busy;
        if (free <= 0) {
          const waits = [this.#somethingSettles(), this.stopped];
          if (carrying) waits.push(this.completions.whenDue());
          await Promise.race(waits);
          continue;
        }
        // A long-poll would keep completions waiting: while it is out, they go as a CompleteBatch.
        this.completions.holdForClaims(carrying && this.waitMs === 0);
        const idle = this.claims.delayMs();
        if (idle > 0) {
          // The last answer was empty: pause, unless completions come to be carried (or stop()).
          const waits = [this.#pause(idle), this.stopped];
          if (carrying) waits.push(this.completions.whenDue());
          await Promise.race(waits);
          continue;
        }
        claiming = this.#claim(free, this.waitMs).then(({ events }) => events);
      }
      let events;
      try {
        events = await claiming;
      } catch (err) {
        this.emit('claimError', err);
        this.completions.holdForClaims(false);
        // An answer too big to receive: a smaller batch may claim again at once.
        if (!this.claims.refused(err)) await this.#pause(this.claimRetryMs);
        continue;
      }
      this.claims.answered(events);
      for (const event of events) {
        if (this.stopping) await this.#giveBack(event);
        else this.#start(event);
      }
    }
    this.completions.holdForClaims(false);
    while (this.inflight.size > 0) await this.#somethingSettles();
    clearTimeout(this.graceTimer);
    this.resolveFinished();
  }

  #claim(free, waitMs, completions = []) {
    return this.client.claim({
      namespaces: this.namespaces,
      eventTypes: this.eventTypes,
      maxEvents: this.claims.batch(free),
      leaseMs: this.leaseMs,
      waitMs,
      workerId: this.workerId,
      completions,
    });
  }

  /**
   * A Claim that first commits `carried`: the worker's cycle in one call instead of two.
   *
   * A completion keeps its event in flight (its concurrency slot taken) until the server has
   * answered for it, as a CompleteBatch's would; but the server commits a Claim's completions before
   * it leases anything, so this Claim may ask for their slots too without the worker ever holding
   * more than `concurrency` leased events. It never long-polls: those events' handlers wait for it.
   */
  async #claimCarrying(carried) {
    const free = this.concurrency - this.#busy + carried.length;
    if (free < 1) {
      this.completions.send(carried);
      return [];
    }
    let answer;
    try {
      answer = await this.#claim(free, 0, carried.map((entry) => entry.item));
    } catch (err) {
      // In doubt: the server may have committed them or not. Sent again, a committed one answers OK.
      this.completions.send(carried);
      throw err;
    }
    if (answer.completionOutcomes === null) {
      // A server older than ClaimRequest.completions ignored them: complete them as before, from now on.
      this.carries = false;
      this.completions.send(carried);
      const allowed = Math.max(this.concurrency - this.#busy, 0);
      // It leased into the slots of the completions it ignored: give those events back.
      for (const event of answer.events.slice(allowed)) await this.#giveBack(event);
      return answer.events.slice(0, allowed);
    }
    this.carries = true;
    this.completions.answer(carried, answer.completionOutcomes);
    return answer.events;
  }

  /**
   * Stops claiming and winds down; resolves when run() has returned.
   * @param {{graceMs?: number}} [options]
   */
  stop({ graceMs = this.shutdownGraceMs } = {}) {
    if (!this.stopping) {
      this.stopping = true;
      this.resolveStopped();
      this.wake();
      // No Claim will carry them now: what waits goes out at once, and later ones after their window.
      this.completions.holdForClaims(false);
      this.completions.flush();
      for (const entry of this.inflight.values()) entry.controller.abort(new WorkerStopping());
      this.graceTimer = setTimeout(() => {
        for (const entry of [...this.inflight.values()]) void this.#detach(entry);
      }, graceMs);
      if (!this.started) this.resolveFinished();
    }
    return this.finished;
  }

  /** Calls stop() on the first of these signals; returns a function that removes the handlers. */
  handleSignals(signals = ['SIGTERM', 'SIGINT']) {
    const onSignal = () => void this.stop();
    for (const signal of signals) process.once(signal, onSignal);
    const remove = () => signals.forEach((signal) => process.off(signal, onSignal));
    this.finished.then(remove);
    return remove;
  }

  #start(event) {
    const controller = new AbortController();
    const entry = {
      event,
      controller,
      job: new Job(this.client, event, controller.signal),
      state: 'running',
      lost: false,
    };
    entry.settled = new Promise((resolve) => {
      entry.resolveSettled = resolve;
    });
    // Every third of the lease, each renewal with a deadline of its own (src/renewals.js).
    entry.lease = new LeaseKeeper(this.client, entry.job.fence, {
      leaseMs: this.leaseMs,
      onRenewed: (answer) => this.emit('renewed', { event, leaseExpiresAt: toDate(answer.leaseExpiresAt) }),
      onLost: (err) => {
        entry.lost = true;
        controller.abort(new LeaseLost(err));
        this.emit('leaseLost', { event, error: err });
      },
      onError: (err) => this.emit('renewError', err, event),
    });
    this.inflight.set(event.claimToken, entry);
    void this.#handle(entry);
  }

  async #handle(entry) {
    let result;
    let error = null;
    try {
      result = await runLimited(entry, () => this.handler(entry.job), {
        timeoutMs: this.handlerTimeoutMs,
        graceMs: this.handlerTimeoutGraceMs,
      });
    } catch (err) {
      error = err;
    }
    if (entry.timedOut) error = entry.timedOut; // whatever it did once aborted, its time ran out
    if (entry.state !== 'running') return; // released at the end of the grace period
    entry.state = 'finishing';
    entry.lease.stop();
    const outcome = await this.#finish(entry, result, error);
    this.#settle(entry, outcome, error);
  }

  async #finish(entry, result, error) {
    if (entry.lost) return 'superseded';
    const onError = (err) => this.emit('finishError', err, entry.event);
    return finishClaim(this, entry.job.fence, { result, error, stopping: this.stopping, onError });
  }

  async #detach(entry) {
    if (entry.state !== 'running') return;
    entry.state = 'detached';
    entry.lease.stop();
    const outcome = await releaseClaim(this.client, entry.job.fence, (err) => this.emit('finishError', err, entry.event));
    this.#settle(entry, outcome, null);
  }

  #settle(entry, outcome, error) {
    this.inflight.delete(entry.event.claimToken);
    // A timed-out handler that ignored its signal: its slot stays taken until it returns.
    if (entry.timedOut) this.overdue.hold(entry, outcome);
    entry.resolveSettled();
    this.emit('settled', { event: entry.event, outcome, error });
  }

  async #giveBack(event) {
    const outcome = await releaseClaim(this.client, event, (err) => this.emit('finishError', err, event));
    this.emit('settled', { event, outcome, error: null });
  }

  /** Slots taken: events in flight, and timed-out handlers still running after theirs was failed. */
  get #busy() {
    return this.inflight.size + this.overdue.size;
  }

  /** Resolves when a slot frees: an event settles, or an overdue handler returns. */
  #somethingSettles() {
    return Promise.race([...[...this.inflight.values()].map((entry) => entry.settled), ...this.overdue.returns()]);
  }

  #pause(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
