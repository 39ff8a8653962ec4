// The worker's stream path: one Work stream, credit for every free slot, pushed events run as jobs.
//
// The worker subscribes once with its namespaces, event types, lease and id, and gives the server
// credit for each free slot (concurrency less the slots taken); each slot that frees gives one
// credit back, so the server pushes an event the moment it is claimable and a slot is free, with
// no Claim and no poll. Completions, failures, releases, renewals and action outcomes go over the
// same stream (src/work_stream.js), completions batched as on the unary path (complete_batch).
// A broken stream is opened again with backoff; the server ended the claims it held, so those
// jobs' later calls answer ABORTED and they settle as superseded, as after a lost lease.
//
// Stopping: events pushed after stop() are released at once, over the stream; running handlers
// finish (or are released after the grace) over the stream; then it half-closes, and the server
// answers what is outstanding before it ends the stream.
//
// A stopping server (`draining`): the stream gives that server no more credit; the handlers running
// then get the server's grace less a margin (releaseWithinMs), and those still running are released
// (the attempt not counted) while the stream still answers; the server then ends the stream, which
// opens again on whichever server the channel reaches, and the worker goes on.

import { CompletionBatcher } from './completions.js';
import { WorkStream } from './work_stream.js';

/** Of a draining server's grace: released this long before it ends, so the Releases arrive first. */
export const SERVER_GRACE_MARGIN_MS = 1_000;

/** How long, of a draining server's graceMs, running handlers get before their events are released. */
export function releaseWithinMs(graceMs) {
  return Math.max(0, graceMs - Math.min(SERVER_GRACE_MARGIN_MS, graceMs / 4));
}

export class WorkLoop {
  /** @param {import('./worker.js').Worker} worker */
  constructor(worker) {
    this.worker = worker;
    this.unsupported = null;
    this.stream = new WorkStream(worker.client, {
      subscription: {
        namespaces: worker.namespaces,
        eventTypes: worker.eventTypes,
        leaseMs: worker.leaseMs,
        workerId: worker.workerId,
      },
      // A stopping worker takes nothing more: a slot it frees gives no credit back.
      free: () => (worker.stopping ? 0 : worker.concurrency - worker.busy),
      events: (events) => this.#pushed(events),
      broken: (err) => worker.emit('claimError', err),
      unsupported: (err) => {
        this.unsupported = err;
        this.wake();
      },
      draining: (graceMs, stillOpen) => this.#serverDraining(graceMs, stillOpen),
      subscribed: () => worker.connected(),
      backoff: worker.streamBackoff,
    });
    this.wake = () => {};
  }

  /**
   * Runs until the worker stops; resolves false at once when the server has no Work
   * (UNIMPLEMENTED: nothing was claimed), for the worker to fall back to Claim.
   */
  async run() {
    const { worker, stream } = this;
    // The job machinery's fenced calls, and the completions, go over the stream from now on.
    worker.calls = stream;
    worker.completions = new CompletionBatcher(stream, worker.completeOptions);
    worker.slotFreed = () => stream.topUp();
    const unsupported = new Promise((resolve) => {
      this.wake = resolve;
    });
    stream.start();
    await Promise.race([worker.stopped, unsupported]);
    if (!this.unsupported) stream.stopPushing(); // before the settling jobs give anything back
    if (this.unsupported) {
      worker.calls = worker.client;
      worker.completions = new CompletionBatcher(worker.client, worker.completeOptions);
      worker.slotFreed = () => {};
      return false;
    }
    return true;
  }

  /** Half-closes the stream once every job has settled; resolves when the server has ended it. */
  async finish() {
    await this.stream.close();
  }

  #serverDraining(graceMs, stillOpen) {
    const { worker } = this;
    const running = [...worker.inflight.values()];
    const withinMs = releaseWithinMs(graceMs);
    worker.logger.info(
      `inboxd worker ${worker.workerId}: the server is stopping; ${running.length} running handlers get` +
        ` ${withinMs} ms, then their events are released; the Work stream opens again once it ends`,
    );
    if (running.length === 0) return;
    const timer = setTimeout(() => {
      // The stream ended already: the server released what it still held.
      if (stillOpen()) worker.releaseRunning(running);
    }, withinMs);
    timer.unref();
  }

  #pushed(events) {
    for (const event of events) {
      if (this.worker.stopping) void this.worker.giveBack(event);
      else this.worker.startJob(event);
    }
  }
}
