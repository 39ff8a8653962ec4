// Keeps one claimed event's lease alive while its handler runs.
//
// It renews every third of the lease, so two renewals can fail before the lease lapses. A renewal
// may not hang for longer than half of that interval (its own deadline, not the client's 30 s,
// which is as long as a default lease): one that fails or times out is retried at once, so one
// slow call costs half an interval, not the lease. Should the retry fail too, the next ones come a
// tenth of an interval apart, so a server that refuses at once is not called in a loop. Renewals
// never overlap. An answer that says the claim is gone (ABORTED, NOT_FOUND, FAILED_PRECONDITION)
// ends the renewals: renewing again cannot help.

import grpc from '@grpc/grpc-js';

const { status } = grpc;
// Answers that mean the claim token is dead.
const LEASE_GONE = new Set([status.ABORTED, status.NOT_FOUND, status.FAILED_PRECONDITION]);

export class LeaseKeeper {
  /**
   * @param {import('./client.js').InboxClient} client
   * @param {{namespace: string, eventKey: string, claimToken: string}} fence
   * @param {object} options
   * @param {number} options.leaseMs the lease each renewal asks for.
   * @param {(answer: object) => void} options.onRenewed
   * @param {(err: Error) => void} options.onLost the claim is gone; no renewal follows.
   * @param {(err: Error) => void} options.onError a renewal failed; it is retried.
   */
  constructor(client, fence, { leaseMs, onRenewed, onLost, onError }) {
    this.client = client;
    this.fence = fence;
    this.leaseMs = leaseMs;
    this.intervalMs = Math.max(1, Math.floor(leaseMs / 3));
    this.deadlineMs = Math.max(1, Math.floor(this.intervalMs / 2));
    this.retryPauseMs = Math.max(1, Math.floor(this.intervalMs / 10));
    this.onRenewed = onRenewed;
    this.onLost = onLost;
    this.onError = onError;
    this.stopped = false;
    this.timer = null;
    this.wake = () => {};
    void this.#run();
  }

  /** No renewal after this one; an answer still on its way is ignored. */
  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.wake();
  }

  async #run() {
    let delay = this.intervalMs;
    let failures = 0;
    while (!this.stopped) {
      await this.#sleep(delay);
      if (this.stopped) return;
      try {
        const answer = await this.client.renewLease({ ...this.fence, leaseMs: this.leaseMs, deadlineMs: this.deadlineMs });
        failures = 0;
        delay = this.intervalMs;
        if (!this.stopped) this.onRenewed(answer);
      } catch (err) {
        if (this.stopped) return;
        if (LEASE_GONE.has(err?.code)) {
          this.stopped = true;
          this.onLost(err);
          return;
        }
        failures += 1;
        delay = failures === 1 ? 0 : this.retryPauseMs;
        this.onError(err);
      }
    }
  }

  #sleep(ms) {
    return new Promise((resolve) => {
      this.timer = setTimeout(resolve, ms);
      this.wake = resolve;
    });
  }
}
