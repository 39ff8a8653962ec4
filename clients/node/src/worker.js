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
// It takes work over the Work stream (src/work_loop.js): credit for each free slot, events pushed,
// every fenced call on the stream. Against a server without Work (UNIMPLEMENTED, found out once,
// when run() starts) it claims with unary Claims instead (src/claim_loop.js); `transport` forces
// either: 'work' or 'claim' ('auto' by default). Either way completions that finish within
// completeWindowMs (2 ms) of each other, up to completeBatchSize (100), go out together, each
// event with its own answer, and an event keeps its slot until the server has answered for it.
//
// Events (all optional): 'settled' {event, outcome, error} with outcome one of
// completed, ignored, failed, released, superseded, unfinished; 'renewed'
// {event, leaseExpiresAt}; 'leaseLost' {event, error}; 'claimError' (a failed
// Claim, a broken stream), 'renewError' and 'finishError' with the grpc error;
// 'reconnected' {failures, afterMs} once a Claim or the stream works again after failing (also logged).
//
// Tracing (src/worker_tracing.js): with the application's tracer provider, or the SDK's when the
// OTEL_* variables ask for export, each handler run is a `process` span, a child of the event's
// stored trace (or a new root linked to it, for a replay or an old trace), active while the
// handler and every fenced call of its claim run; it ends before the event is reported settled.

import { EventEmitter } from 'node:events';

import { context, trace } from '@opentelemetry/api';

import { ClaimLoop } from './claim_loop.js';
import { CompletionBatcher, DEFAULT_MAX_ITEMS, DEFAULT_WINDOW_MS } from './completions.js';
import { toDate } from './convert.js';
import { finishClaim, releaseClaim, WorkerStopping } from './finishing.js';
import { DEFAULT_HANDLER_TIMEOUT_MS, HANDLER_TIMEOUT_GRACE_MS, Overdue, runLimited } from './handler_timeout.js';
import { Job } from './job.js';
import { Reconnects } from './reconnects.js';
import { LeaseKeeper } from './renewals.js';
import { WorkLoop } from './work_loop.js';
import { endProcessSpan, runtimeTracer, startProcessSpan, startTracing } from './worker_tracing.js';

const TRANSPORTS = new Set(['auto', 'work', 'claim']);

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
   * @param {'auto'|'work'|'claim'} [options.transport] the Work stream, falling back to Claim
   *   against a server without it ('auto'), or either alone.
   * @param {{minMs?: number, maxMs?: number}} [options.streamBackoff] the pause before a broken
   *   Work stream is opened again (50 ms doubling to 2 s, jittered).
   * @param {() => number} [options.clock] now, in ms since the epoch: when a handler starts, for the
   *   tracing rule (a trace accepted an hour ago or more is linked, not extended).
   * @param {{info: (line: string) => void}} [options.logger] where the runtime's rare notices go (console).
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
    this.overdue = new Overdue(() => this.slotFreed());
    this.claimRetryMs = options.claimRetryMs ?? 1_000;
    this.workerId = options.workerId ?? `node-${process.pid}`;
    this.transport = options.transport ?? 'auto';
    this.streamBackoff = options.streamBackoff;
    this.clock = options.clock ?? Date.now;
    this.logger = options.logger ?? console;
    this.reconnects = new Reconnects();
    this.on('claimError', () => this.reconnects.failed());
    if (!TRANSPORTS.has(this.transport)) throw new RangeError(`transport=${this.transport}: 'auto', 'work' or 'claim'`);
    // Each handler's event still gets its own answer; only the round trip is shared.
    this.completeOptions = {
      windowMs: options.completeWindowMs ?? DEFAULT_WINDOW_MS,
      maxItems: options.completeBatchSize ?? DEFAULT_MAX_ITEMS,
    };
    this.completions = new CompletionBatcher(client, this.completeOptions);
    // Where the fenced calls go: the client, or the Work stream once it is open (src/work_loop.js).
    this.calls = client;
    // Told each time a slot frees (the Work stream gives its credit back).
    this.slotFreed = () => {};
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
  }

  /** Claims and handles events until stop(); resolves once every claimed event is settled. */
  /** A Claim or the stream worked: after failures, said once (the 'reconnected' event and the logger). */
  connected() {
    const back = this.reconnects.connected();
    if (back === null) return;
    this.logger.info?.(
      `inboxd worker ${this.workerId}: connected to inboxd again, after ${back.failures} failed attempts` +
        ` over ${(back.afterMs / 1000).toFixed(1)} s`,
    );
    this.emit('reconnected', back);
  }

  async run() {
    if (this.started) throw new Error('a Worker runs once');
    this.started = true;
    let stopTracing = null;
    try {
      // A misconfigured OTEL_* variable rejects here, naming it, before anything is claimed.
      stopTracing = await startTracing({ logger: this.logger });
      await this.#work();
    } finally {
      // The spans are exported (when this runtime installed the provider) before stop() resolves.
      await stopTracing?.();
      this.resolveFinished();
    }
  }

  async #work() {
    this.loop = null;
    if (this.transport !== 'claim') {
      const work = new WorkLoop(this);
      if (await work.run()) this.loop = work;
      else if (this.transport === 'work') throw work.unsupported;
    }
    if (this.loop === null) {
      // A server without Work: unary Claims, decided once for this run.
      this.loop = new ClaimLoop(this);
      await this.loop.run();
    }
    while (this.inflight.size > 0) await this.somethingSettles();
    clearTimeout(this.graceTimer);
    await this.loop.finish();
  }

  /** The path this run took: 'work' or 'claim' (null before run() decided). */
  get transportUsed() {
    return this.loop instanceof WorkLoop ? 'work' : this.loop ? 'claim' : null;
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

  /** Runs a claimed event's handler in a slot of its own (by the loops: src/claim_loop.js, src/work_loop.js). */
  startJob(event) {
    if (runtimeTracer() === null) {
      this.#start(event, null, null);
      return;
    }
    // Its span is current for the handler, its renewals and its end: each call says it made them.
    const span = startProcessSpan(event, this.clock());
    const traced = trace.setSpan(context.active(), span);
    context.with(traced, () => this.#start(event, span, traced));
  }

  #start(event, span, traced) {
    const controller = new AbortController();
    const entry = {
      event,
      controller,
      job: new Job(this.calls, event, controller.signal),
      state: 'running',
      lost: false,
      span,
      traced,
    };
    entry.settled = new Promise((resolve) => {
      entry.resolveSettled = resolve;
    });
    // Every third of the lease, each renewal with a deadline of its own (src/renewals.js).
    entry.lease = new LeaseKeeper(this.calls, entry.job.fence, {
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
    return finishClaim({ client: this.calls, completions: this.completions }, entry.job.fence, {
      result,
      error,
      stopping: this.stopping,
      onError,
    });
  }

  async #detach(entry) {
    if (entry.state !== 'running') return;
    entry.state = 'detached';
    entry.lease.stop();
    const release = () => releaseClaim(this.calls, entry.job.fence, (err) => this.emit('finishError', err, entry.event));
    // Called from stop()'s timer: the Release still belongs to the handler's span.
    const outcome = await (entry.traced ? context.with(entry.traced, release) : release());
    this.#settle(entry, outcome, null);
  }

  #settle(entry, outcome, error) {
    this.inflight.delete(entry.event.claimToken);
    // A timed-out handler that ignored its signal: its slot stays taken until it returns.
    if (entry.timedOut) this.overdue.hold(entry, outcome);
    if (entry.span) endProcessSpan(entry.span, error);
    entry.resolveSettled();
    this.slotFreed();
    this.emit('settled', { event: entry.event, outcome, error });
  }

  /**
   * Releases these running entries' events (a draining server's grace is ending): each handler's signal
   * aborts with WorkerStopping and its event goes back uncounted, as at the end of stop()'s grace.
   */
  releaseRunning(entries) {
    for (const entry of entries) {
      if (entry.state !== 'running') continue;
      entry.controller.abort(new WorkerStopping());
      void this.#detach(entry);
    }
  }

  /** Releases an event that will not run (it came as the worker stops), over the path it came by. */
  async giveBack(event) {
    const outcome = await releaseClaim(this.calls, event, (err) => this.emit('finishError', err, event));
    this.emit('settled', { event, outcome, error: null });
  }

  /** Slots taken: events in flight, and timed-out handlers still running after theirs was failed. */
  get busy() {
    return this.inflight.size + this.overdue.size;
  }

  /** Resolves when a slot frees: an event settles, or an overdue handler returns. */
  somethingSettles() {
    return Promise.race([...[...this.inflight.values()].map((entry) => entry.settled), ...this.overdue.returns()]);
  }

  /** Resolves after ms, or at once when stop() wakes it. */
  pause(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
