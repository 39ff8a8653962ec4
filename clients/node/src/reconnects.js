// Whether the worker reaches its server: failures counted from the first, and said once it works again.
//
// A worker whose server was down fails its Claims (or its Work stream) for a while; when one works
// again it says so once ("connected to inboxd again, after N failed attempts over S s"), with the
// worker's 'reconnected' event and its logger, so an operator sees the gap close as well as open.

export class Reconnects {
  constructor(now = Date.now) {
    this.now = now;
    this.failingSince = null;
    this.failures = 0;
  }

  /** A Claim or the stream failed. */
  failed() {
    if (this.failingSince === null) this.failingSince = this.now();
    this.failures += 1;
  }

  /** A Claim or a subscription worked: {failures, afterMs} when it had been failing, else null. */
  connected() {
    if (this.failingSince === null) return null;
    const back = { failures: this.failures, afterMs: this.now() - this.failingSince };
    this.failingSince = null;
    this.failures = 0;
    return back;
  }
}
