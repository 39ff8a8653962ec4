// Completions that finish together go out together: one CompleteBatch instead of one Complete each.
//
// complete(item) looks like client.complete(item) to its caller: it resolves once the server has
// committed that item, or rejects with that item's own error (err.code === status.ABORTED for a
// superseded claim). Items that arrive within windowMs of the first, up to maxItems, share one call;
// one item's refusal never reaches another item's caller.

import grpc from '@grpc/grpc-js';

const { status } = grpc;

export const DEFAULT_WINDOW_MS = 2;
export const DEFAULT_MAX_ITEMS = 100;
const MAX_ITEMS = 500; // the server's limit per CompleteBatch

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
    this.pending = [];
    this.timer = null;
    // An older server without CompleteBatch: one Complete per item from then on.
    this.oneByOne = false;
  }

  /** Completes {namespace, eventKey, claimToken, disposition?, reason?} with the next batch. */
  complete(item) {
    if (this.oneByOne) return this.client.complete(item).then(() => undefined);
    return new Promise((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (this.pending.length >= this.maxItems) this.#flush();
      else if (this.timer === null) this.timer = setTimeout(() => this.#flush(), this.windowMs);
    });
  }

  #flush() {
    clearTimeout(this.timer);
    this.timer = null;
    const batch = this.pending;
    this.pending = [];
    if (batch.length > 0) void this.#send(batch);
  }

  async #send(batch) {
    this.calls += 1;
    let outcomes;
    try {
      outcomes = await this.client.completeMany(batch.map((entry) => entry.item));
    } catch (err) {
      if (err?.code === status.UNIMPLEMENTED) {
        this.oneByOne = true;
        await Promise.all(batch.map((entry) => this.#alone(entry)));
      } else {
        for (const entry of batch) entry.reject(err);
      }
      return;
    }
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

  async #alone({ item, resolve, reject }) {
    try {
      await this.client.complete(item);
      resolve();
    } catch (err) {
      reject(err);
    }
  }
}
