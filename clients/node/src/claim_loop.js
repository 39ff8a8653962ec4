// The worker's unary path: Claim (long-polling), with completions riding the next Claim.
//
// Used against a server without the Work stream (found out at run time), or when the worker is
// told `transport: 'claim'`. Completions that finish within completeWindowMs (2 ms) of each other,
// up to completeBatchSize (100), go out together; each event still gets its own answer, so a
// superseded claim is reported for that event alone. They ride the worker's next Claim
// (ClaimRequest.completions, with waitMs 0), so a busy worker's cycle is one call; an event settles
// only once that Claim's answer says the server committed it, and keeps its concurrency slot until
// then. While a long-poll is out (or after a failed Claim, or when stopping) they go as a
// CompleteBatch instead, so none waits for a poll; the completions of a failed Claim are sent again
// (a repeat answers OK); a server that ignores a Claim's completions is detected by its answer, and
// CompleteBatch is used from then on.
//
// How soon and how much it claims is src/claim_backoff.js: a worker with waitMs 0 pauses after an
// empty answer, and a Claim whose answer was too big to receive halves the next Claims' batch.

import { ClaimBackoff } from './claim_backoff.js';

// inboxd leases at most 100 events per Claim.
const MAX_EVENTS_PER_CLAIM = 100;

export class ClaimLoop {
  /** @param {import('./worker.js').Worker} worker */
  constructor(worker) {
    this.worker = worker;
    this.client = worker.client;
    this.completions = worker.completions;
    // Pauses an idle worker that does not long-poll, and shrinks a batch too big to receive.
    this.claims = new ClaimBackoff({ waitMs: worker.waitMs, maxEvents: MAX_EVENTS_PER_CLAIM });
    // Whether the server commits a Claim's completions: unknown (null) until a Claim carried some.
    this.carries = null;
  }

  /** Claims and starts events until the worker stops. */
  async run() {
    const { worker, completions } = this;
    while (!worker.stopping) {
      const carrying = this.carries !== false;
      completions.holdForClaims(carrying);
      let claiming;
      if (carrying && completions.waiting > 0) {
        if (!completions.due) {
          // At most the completion window: then they ride the Claim below.
          await Promise.race([completions.whenDue(), worker.stopped]);
          continue;
        }
        claiming = this.#claimCarrying(completions.take());
      } else {
        const free = worker.concurrency - worker.busy;
        if (free <= 0) {
          const waits = [worker.somethingSettles(), worker.stopped];
          if (carrying) waits.push(completions.whenDue());
          await Promise.race(waits);
          continue;
        }
        // A long-poll would keep completions waiting: while it is out, they go as a CompleteBatch.
        completions.holdForClaims(carrying && worker.waitMs === 0);
        const idle = this.claims.delayMs();
        if (idle > 0) {
          // The last answer was empty: pause, unless completions come to be carried (or stop()).
          const waits = [worker.pause(idle), worker.stopped];
          if (carrying) waits.push(completions.whenDue());
          await Promise.race(waits);
          continue;
        }
        claiming = this.#claim(free, worker.waitMs).then(({ events }) => events);
      }
      let events;
      try {
        events = await claiming;
      } catch (err) {
        worker.emit('claimError', err);
        completions.holdForClaims(false);
        // An answer too big to receive: a smaller batch may claim again at once.
        if (!this.claims.refused(err)) await worker.pause(worker.claimRetryMs);
        continue;
      }
      this.claims.answered(events);
      worker.connected();
      for (const event of events) {
        if (worker.stopping) await worker.giveBack(event);
        else worker.startJob(event);
      }
    }
    completions.holdForClaims(false);
  }

  /** Nothing to close: each Claim was a call of its own. */
  async finish() {}

  #claim(free, waitMs, completions = []) {
    const { worker } = this;
    return this.client.claim({
      namespaces: worker.namespaces,
      eventTypes: worker.eventTypes,
      maxEvents: this.claims.batch(free),
      leaseMs: worker.leaseMs,
      waitMs,
      workerId: worker.workerId,
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
    const { worker, completions } = this;
    const free = worker.concurrency - worker.busy + carried.length;
    if (free < 1) {
      completions.send(carried);
      return [];
    }
    let answer;
    try {
      answer = await this.#claim(free, 0, carried.map((entry) => entry.item));
    } catch (err) {
      // In doubt: the server may have committed them or not. Sent again, a committed one answers OK.
      completions.send(carried);
      throw err;
    }
    if (answer.completionOutcomes === null) {
      // A server older than ClaimRequest.completions ignored them: complete them as before, from now on.
      this.carries = false;
      completions.send(carried);
      const allowed = Math.max(worker.concurrency - worker.busy, 0);
      // It leased into the slots of the completions it ignored: give those events back.
      for (const event of answer.events.slice(allowed)) await worker.giveBack(event);
      return answer.events.slice(0, allowed);
    }
    this.carries = true;
    completions.answer(carried, answer.completionOutcomes);
    return answer.events;
  }
}
