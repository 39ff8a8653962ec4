// A bidirectional stream kept open: opened again, after a pause, each time it breaks.
//
// AcceptStream and Work share this: each says what to send on a fresh call (what was unanswered,
// the subscription), what to do with each message, and whether an end is a break to reopen after.

import grpc from '@grpc/grpc-js';

import { StreamBackoff } from './stream_backoff.js';

const { status } = grpc;

export class ReopeningStream {
  /**
   * @param {import('./client.js').InboxClient} client
   * @param {string} method 'AcceptStream' or 'Work'
   * @param {object} handlers
   * @param {(call: object) => void} handlers.opened a fresh call is open: write what it must carry first.
   * @param {(message: object) => void} handlers.message one message from the server.
   * @param {(status: {code: number, details: string}) => boolean} handlers.ended the call ended
   *   (after its last message); true opens another after a pause.
   * @param {{minMs?: number, maxMs?: number}} [backoff]
   */
  constructor(client, method, { opened, message, ended }, backoff = {}) {
    this.client = client;
    this.method = method;
    this.handlers = { opened, message, ended };
    this.backoff = new StreamBackoff(backoff);
    /** The call open now, or null between calls. */
    this.call = null;
    /** How many calls were opened: 1 while the stream never broke. */
    this.opened = 0;
    this.stopped = false;
    this.timer = null;
  }

  start() {
    if (this.stopped) return;
    let call;
    try {
      call = this.client.openStream(this.method);
    } catch (err) {
      // The client was closed under the stream: it cannot open again, ever.
      this.stopped = true;
      this.handlers.ended({ code: status.CANCELLED, details: String(err?.message ?? err) });
      return;
    }
    this.call = call;
    this.opened += 1;
    call.on('data', (message) => {
      this.backoff.reset();
      this.handlers.message(message);
    });
    call.on('error', () => {}); // the status below says it all
    call.on('status', (status) => {
      // Messages still buffered are delivered first (on the next tick); the end comes after them.
      setImmediate(() => this.#ended(call, status));
    });
    this.handlers.opened(call);
  }

  /** Opens no call again; `cancel` also ends the one open now (its server sees CANCELLED). */
  stop({ cancel = false } = {}) {
    this.stopped = true;
    clearTimeout(this.timer);
    if (cancel) this.call?.cancel();
  }

  #ended(call, status) {
    if (this.call !== call) return;
    this.call = null;
    const again = this.handlers.ended(status);
    if (again && !this.stopped) this.timer = setTimeout(() => this.start(), this.backoff.next());
  }
}
