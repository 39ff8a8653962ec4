// AcceptStream for Node: many concurrent Accepts over one open gRPC stream, matched by sequence.
//
// A message on an open stream costs the server about a quarter of a unary call, so an edge that
// accepts all day keeps one stream open and lets any number of callers share it:
//
//   const stream = client.acceptStream();
//   const answer = await stream.accept({ namespace, eventKey, eventType, payload });
//   await stream.close();
//
// accept() resolves after its item's commit with the AcceptResponse a unary Accept would answer,
// or rejects with an ItemError whose `code` is the status that Accept would have ended with; one
// item's refusal never touches another. At most `window` items are unanswered at once: later ones
// wait their turn, so one stream never asks the server to hold more than its window. When the
// stream breaks (UNAVAILABLE: a reset connection, a server restarting) it is opened again after a
// pause and every unanswered item is sent again, same sequence: Accept is idempotent, so one that
// had committed answers DUPLICATE. Nothing answered is lost, and every caller gets an answer or an
// error (DEADLINE_EXCEEDED after deadlineMs at the latest, resends included). A stream refused for
// good (UNAUTHENTICATED, PERMISSION_DENIED, UNIMPLEMENTED) fails its items and every later accept().
// Each item carries the caller's current trace context as its AcceptRequest.trace_context.

import grpc from '@grpc/grpc-js';

import { ItemError } from './item_error.js';
import { ReopeningStream } from './reopening.js';
import { acceptRequest } from './requests.js';
import { currentTraceContext } from './trace_context.js';

const { status } = grpc;

export const DEFAULT_WINDOW = 64; // the server's own window (INBOXD_ACCEPT_STREAM_WINDOW) by default
// Ends that break the stream, not its items: it is opened again and the unanswered sent again.
const REOPEN_ON = new Set([status.UNAVAILABLE]);

export class AcceptStream {
  /**
   * @param {import('./client.js').InboxClient} client
   * @param {{window?: number, deadlineMs?: number, backoff?: {minMs?: number, maxMs?: number}}} [options]
   */
  constructor(client, { window = DEFAULT_WINDOW, deadlineMs = client.deadlineMs, backoff } = {}) {
    if (!(Number.isInteger(window) && window >= 1)) throw new RangeError(`window=${window}: must be a positive integer`);
    this.window = window;
    this.deadlineMs = deadlineMs;
    this.nextSequence = 1;
    // Sent (or to be resent) and not answered yet, by sequence as a decimal string.
    this.unanswered = new Map();
    // Waiting for room in the window, in order.
    this.queue = [];
    this.closing = false;
    this.broken = null;
    this.stream = new ReopeningStream(
      client,
      'AcceptStream',
      {
        opened: (call) => this.#opened(call),
        message: (response) => this.#answer(response),
        ended: (end) => this.#ended(end),
      },
      backoff,
    );
    this.closed = new Promise((resolve) => {
      this.resolveClosed = resolve;
    });
    this.stream.start();
  }

  /** How many calls were opened: 1 while the stream never broke. */
  get opened() {
    return this.stream.opened;
  }

  /** Items sent and not answered yet (at most `window`). */
  get inFlight() {
    return this.unanswered.size;
  }

  /** Items waiting for room in the window. */
  get waiting() {
    return this.queue.length;
  }

  /**
   * Accepts one event (as client.accept takes it) over the stream; resolves to {outcome, state,
   * acceptedAt} after its commit.
   * @param {{deadlineMs?: number}} [options] this item's deadline, from now, resends included.
   */
  accept(event, { deadlineMs = this.deadlineMs } = {}) {
    if (this.broken) return Promise.reject(this.broken);
    if (this.closing) return Promise.reject(new Error('the AcceptStream is closed'));
    const sequence = String(this.nextSequence++);
    const item = { sequence, accept: acceptRequest(event) };
    // Each item is a delivery of its own trace (the stream's metadata is once per stream); one the
    // caller gave (an edge forwarding its provider's context) stands.
    if (!item.accept.traceContext) {
      const traceContext = currentTraceContext();
      if (traceContext !== null) item.accept.traceContext = traceContext;
    }
    return new Promise((resolve, reject) => {
      const entry = { item, resolve, reject, timer: null };
      entry.timer = setTimeout(() => this.#expire(entry), deadlineMs);
      if (this.unanswered.size < this.window) this.#send(entry);
      else this.queue.push(entry);
    });
  }

  /** Half-closes the stream once every item given is sent; resolves when all are answered (or failed). */
  close() {
    if (!this.closing) {
      this.closing = true;
      this.#endIfDrained();
    }
    return this.closed;
  }

  #send(entry) {
    this.unanswered.set(entry.item.sequence, entry);
    this.stream.call?.write(entry.item); // between calls, the next call's opened() sends it
  }

  #opened(call) {
    // A fresh call: what was not answered on the last one goes first, in order.
    for (const entry of this.unanswered.values()) call.write(entry.item);
    this.#endIfDrained();
  }

  #answer(response) {
    const entry = this.unanswered.get(String(response.sequence));
    if (!entry) return; // its caller gave up
    this.#forget(entry);
    if (response.result === 'accepted') entry.resolve(response.accepted);
    else entry.reject(new ItemError(response.error?.code ?? status.UNKNOWN, response.error?.message ?? 'no result'));
  }

  #ended(end) {
    if (REOPEN_ON.has(end.code) || (end.code === status.OK && !this.closing)) {
      return true; // resent on the next call
    }
    const error =
      end.code === status.OK
        ? new ItemError(status.UNAVAILABLE, 'the stream ended before this item was answered')
        : Object.assign(new Error(`AcceptStream ended: ${end.code} ${end.details}`), { code: end.code, details: end.details });
    if (end.code !== status.OK) this.broken = error;
    for (const entry of [...this.unanswered.values(), ...this.queue]) {
      this.#forget(entry);
      entry.reject(error);
    }
    this.resolveClosed();
    return false;
  }

  #expire(entry) {
    this.#forget(entry);
    entry.reject(
      Object.assign(new Error('no answer within the deadline: the event may or may not be stored'), {
        code: status.DEADLINE_EXCEEDED,
      }),
    );
  }

  /** Given up or answered: never sent again; its room in the window goes to the next item. */
  #forget(entry) {
    clearTimeout(entry.timer);
    const queued = this.queue.indexOf(entry);
    if (queued >= 0) this.queue.splice(queued, 1);
    if (this.unanswered.delete(entry.item.sequence)) {
      while (this.queue.length > 0 && this.unanswered.size < this.window) this.#send(this.queue.shift());
    }
    this.#endIfDrained();
  }

  #endIfDrained() {
    // Half-closed only once nothing waits for the window (what waits must still be sent), once per call.
    const { call } = this.stream;
    if (this.closing && this.queue.length === 0 && call && this.halfClosed !== call) {
      this.halfClosed = call;
      call.end();
    }
  }
}
