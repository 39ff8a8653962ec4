// How long a broken stream waits before it is opened again: 50 ms doubling to 2 s, with full jitter.
//
// A server that restarts refuses connections for a while: without a pause, every stream of every
// worker and edge would reconnect in a loop. An answer on the reopened stream resets the pause.

export const REOPEN_MIN_MS = 50;
export const REOPEN_MAX_MS = 2_000;

export class StreamBackoff {
  constructor({ minMs = REOPEN_MIN_MS, maxMs = REOPEN_MAX_MS } = {}) {
    this.minMs = minMs;
    this.maxMs = maxMs;
    this.failures = 0;
  }

  /** The pause before the next reopen, in ms; each call without a reset() doubles its ceiling. */
  next() {
    const ceiling = Math.min(this.maxMs, this.minMs * 2 ** Math.min(this.failures, 16));
    this.failures += 1;
    return Math.floor(Math.random() * ceiling);
  }

  /** The stream answered: the next break pauses the least again. */
  reset() {
    this.failures = 0;
  }
}
