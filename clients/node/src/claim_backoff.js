// How soon and how much a worker claims: a pause after empty answers, a smaller batch after one too big.
//
// A worker told to claim with waitMs 0 asks the server at once each time; idle, that was a
// Claim (a database statement) every millisecond or so. After an answer with no events it now
// waits before its next Claim that carries nothing: 50 ms, doubling up to 1 s, back to none as
// soon as an answer brings work. A long-poll (waitMs > 0) already waited at the server, so it
// claims again at once. A Claim that carries completions is never held back: handlers wait for it.
//
// A Claim refused RESOURCE_EXHAUSTED had an answer larger than the channel receives (its events
// were leased and their attempt counted all the same): the worker halves the events it asks for,
// down to 1, and says so with a process warning, so that the next answers fit.

import grpc from '@grpc/grpc-js';

const { status } = grpc;

export const IDLE_BACKOFF_MIN_MS = 50;
export const IDLE_BACKOFF_MAX_MS = 1_000;

export class ClaimBackoff {
  /**
   * @param {{waitMs: number, maxEvents: number, minMs?: number, maxMs?: number}} options
   *   maxEvents: the most one Claim asks for until an answer is too big.
   */
  constructor({ waitMs, maxEvents, minMs = IDLE_BACKOFF_MIN_MS, maxMs = IDLE_BACKOFF_MAX_MS }) {
    this.waitMs = waitMs;
    this.maxEvents = maxEvents;
    this.asked = maxEvents;
    this.minMs = minMs;
    this.maxMs = maxMs;
    this.emptyAnswers = 0;
    this.nextAt = 0;
  }

  /** How long to wait, at `now` (ms), before the next Claim that carries nothing: 0 after work or a long-poll. */
  delayMs(now = Date.now()) {
    return Math.max(0, this.nextAt - now);
  }

  /** How many events to ask for, with `free` slots; the last Claim asked for that many. */
  batch(free) {
    this.asked = Math.min(free, this.maxEvents);
    return this.asked;
  }

  /** Notes a Claim's answer at `now` (ms): work ends the pause, each empty answer doubles it. */
  answered(events, now = Date.now()) {
    if (events.length > 0 || this.waitMs > 0) {
      this.emptyAnswers = 0;
      this.nextAt = 0;
      return;
    }
    // Bounded, so that 2 ** n stays a number; the pause reached its cap long before.
    this.emptyAnswers = Math.min(this.emptyAnswers + 1, 32);
    this.nextAt = now + Math.min(this.maxMs, this.minMs * 2 ** (this.emptyAnswers - 1));
  }

  /**
   * Notes the last Claim's failure; true when its answer was too big to receive and the batch was
   * halved (the worker may claim again at once), false for any other error or when it asked for one.
   */
  refused(err) {
    if (err?.code !== status.RESOURCE_EXHAUSTED) return false;
    if (this.asked <= 1) {
      process.emitWarning(
        `a Claim of one event was refused RESOURCE_EXHAUSTED (${err.details}): that event is larger than this ` +
          "client receives; raise channelOptions['grpc.max_receive_message_length']",
        { code: 'INBOXD_CLAIM_TOO_LARGE' },
      );
      return false;
    }
    const before = this.asked;
    this.maxEvents = Math.max(1, Math.floor(before / 2));
    process.emitWarning(
      `a Claim's answer was larger than this client receives (RESOURCE_EXHAUSTED: ${err.details}); ` +
        `claiming at most ${this.maxEvents} at a time instead of ${before}`,
      { code: 'INBOXD_CLAIM_TOO_LARGE' },
    );
    return true;
  }
}
