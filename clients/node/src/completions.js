// Completions that finish together go out together: in the worker's next Claim, or one CompleteBatch.
//
// complete(item) looks like client.complete(item) to its caller: it resolves once the server has
// committed that item, or rejects with that item's own error (err.code === status.ABORTED for a
// superseded claim). Items that arrive within windowMs of the first, up to maxItems, share one call;
// one item's refusal never reaches another item's caller.
//
// The shared call is the worker's next Claim while its loop is ready to send one at once
// (holdForClaims(true)): the loop take()s the due items, carries them, and hands their outcomes to
// answer(). Otherwise (the loop is long-polling, pausing after a failed Claim, or stopping) they go
// out as a CompleteBatch when the window closes, since a long-poll would keep them waiting.
// A CompleteBatch goes in the trace context of its first item (the handler span that finished
// first), whatever timer or loop happens to send it; a Claim that carries completions stays the
// claim loop's own, since the events it hands out are not that handler's work.

import grpc from '@grpc/grpc-js';
import { context } from '@opentelemetry/api';

const { status } = grpc;

export const DEFAULT_WINDOW_MS = 2;
export const DEFAULT_MAX_ITEMS = 100;
const MAX_ITEMS = 500; // the server's limit per CompleteBatch, and per Claim's completions

export class CompletionBatcher {
  /**
   * @param {import('./client.js').InboxClient} client
   * @param {{windowMs?: number, maxItems?: number}} [options]
   */
  constructor(client, { windowMs = DEFAULT_WINDOW_MS, maxItems = DEFAULT_MAX_ITEMS } = {}) {
    if (!(windowMs >= 0)) throw new RangeError(`windowMs=${windowMs}: cannot be negative`);
    if (!(maxItems >= 1 && maxItems <= MAX_ITEMS)) {
      throw new RangeError(`maxItems=${maxItems}: the server takes 1 to ${MAX_ITEMS} per CompleteBatch`);
    }
    this.client = client;
    this.windowMs = windowMs;
    this.maxItems = maxItems;
    /** CompleteBatch calls sent, for tests and logs. */
    this.calls = 0;
    /** Completions taken to ride a Claim, for tests and logs. */
    this.carried = 0;
    this.pending = [];
    this.timer = null;
    // True while due items wait for the claim loop to take them.
    this.due = false;
    this.dueSignal = null;
    this.held = false;
    // An older server without CompleteBatch: one Complete per item from then on.
    this.oneByOne = false;
  }

  /** How many completions wait for their batch to be sent. */
  get waiting() {
    return this.pending.length;
  }

  /** Completes {namespace, eventKey, claimToken, disposition?, reason?} with the next batch. */
  complete(item) {
    if (this.oneByOne) return this.client.complete(item).then(() => undefined);
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject, context: context.active() });
      if (this.pending.length >= this.maxItems) this.#windowClosed();
      else if (this.timer === null && !this.due) this.timer = setTimeout(() => this.#windowClosed(), this.windowMs);
    });
  }

  /** Whether due items wait for the claim loop (take) rather than go out as a CompleteBatch. */
  holdForClaims(held) {
    this.held = held;
    if (!held && this.due) this.flush();
  }

  /** Resolves once items are due for the claim loop (at once if they are). */
  whenDue() {
    if (this.due) return Promise.resolve();
    if (this.dueSignal === null) {
      let resolve;
      const promise = new Promise((r) => {
        resolve = r;
      });
      this.dueSignal = { promise, resolve };
    }
    return this.dueSignal.promise;
  }

  /** Up to maxItems waiting completions (due or not), for a Claim to carry; answer() settles them. */
  take() {
    const taken = this.pending.slice(0, this.maxItems);
    this.pending = this.pending.slice(this.maxItems);
    if (this.pending.length === 0) {
      this.#cancelTimer();
      this.due = false;
    }
    this.carried += taken.length;
    return taken;
  }

  /** Sends every waiting completion now, as CompleteBatch calls of maxItems at most. */
  flush() {
    this.#cancelTimer();
    this.due = false;
    const batch = this.pending;
    this.pending = [];
    for (let start = 0; start < batch.length; start += this.maxItems) {
      this.send(batch.slice(start, start + this.maxItems));
    }
  }

  /** Sends these (taken) completions as one CompleteBatch: ones a Claim could not settle, say. */
  send(batch) {
    if (batch.length > 0) void this.#send(batch);
  }

  /** Settles each carried completion with its outcome from the Claim's answer. */
  answer(batch, outcomes) {
    void this.#answer(batch, outcomes);
  }

  #windowClosed() {
    this.#cancelTimer();
    if (!this.held) {
      this.flush();
      return;
    }
    this.due = true; // the claim loop takes them into its next Claim
    const signal = this.dueSignal;
    this.dueSignal = null;
    signal?.resolve();
  }

  #cancelTimer() {
    clearTimeout(this.timer);
    this.timer = null;
  }

  async #send(batch) {
    this.calls += 1;
    let outcomes;
    try {
      const items = batch.map((entry) => entry.item);
      outcomes = await context.with(batch[0].context, () => this.client.completeMany(items));
    } catch (err) {
      if (err?.code === status.UNIMPLEMENTED) {
        this.oneByOne = true;
        await Promise.all(batch.map((entry) => this.#alone(entry)));
      } else {
        for (const entry of batch) entry.reject(err);
      }
      return;
    }
    await this.#answer(batch, outcomes);
  }

  async #answer(batch, outcomes) {
    const retries = [];
    batch.forEach((entry, i) => {
      const outcome = outcomes[i];
      // Nothing changed for that item (its row was held, say): try it once more on its own.
      if (outcome?.code === status.UNAVAILABLE) retries.push(this.#alone(entry));
      else if (outcome) entry.reject(outcome);
      else entry.resolve();
    });
    await Promise.all(retries);
  }

  async #alone({ item, resolve, reject, context: itemContext }) {
    try {
      await context.with(itemContext, () => this.client.complete(item));
      resolve();
    } catch (err) {
      reject(err);
    }
  }
}
