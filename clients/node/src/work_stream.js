// The Work stream: one open stream carries a worker's whole cycle, events pushed within its credit,
// fenced calls sent back and answered by sequence.
//
// The first message subscribes (namespaces, event types, lease, worker id); `credit` says how many
// more events the worker can take, and the server pushes ClaimedEvents while credit remains. The
// fenced calls (complete, completeMany, fail, release, renewLease, recordActionOutcome) look to
// their callers like the client's unary ones: each resolves with the unary call's answer, or
// rejects with an ItemError whose `code` is the status the unary call would have ended with
// (status.ABORTED: the claim is gone), so the job machinery runs on either unchanged.
//
// While the stream is open the server keeps alive the leases of the events it pushed on it. When it
// breaks, the server ends those claims at once (another worker gets them within a second), and this
// stream opens a new call after a pause, subscribes again and sends again every call that was not
// answered: Complete and RecordActionOutcome repeated answer OK when they had committed, and a
// call for a claim the break ended is answered ABORTED, as a unary call would be after a lost lease.
// A server without Work answers UNIMPLEMENTED at once: `unsupported` is called and nothing reopens.
//
// A stopping server says so (`draining`, with the grace it still answers calls for): this call gets
// no more credit (`stop_pushing`), `draining(graceMs, stillOpen)` tells the worker, and once the
// server ends the call the stream opens again, crediting anew, on whichever server the channel
// reaches then.

import grpc from '@grpc/grpc-js';

import { duration } from './convert.js';
import { ItemError } from './item_error.js';
import { ReopeningStream } from './reopening.js';
import { currentTraceContext } from './trace_context.js';
import {
  completeItem,
  completeRequest,
  failRequest,
  fenced,
  outcomes,
  recordRequest,
  renewRequest,
} from './requests.js';

const { status } = grpc;

export class WorkStream {
  /**
   * @param {import('./client.js').InboxClient} client
   * @param {object} options
   * @param {{namespaces: string[], eventTypes: string[], leaseMs: number, workerId: string}} options.subscription
   * @param {() => number} options.free how many events the worker could take now, credit aside.
   * @param {(events: object[]) => void} options.events pushed events, each already claimed.
   * @param {(error: Error) => void} options.broken the stream broke; it is being opened again.
   * @param {(error: Error) => void} options.unsupported the server has no Work (UNIMPLEMENTED).
   * @param {(graceMs: number, stillOpen: () => boolean) => void} [options.draining] the server of the
   *   call open now stops: it answers calls for graceMs more; stillOpen() says whether that call is.
   * @param {() => void} [options.subscribed] the server took the subscription (the stream works).
   * @param {{minMs?: number, maxMs?: number}} [options.backoff] the pause before a reopen.
   */
  constructor(
    client,
    { subscription, free, events, broken, unsupported, draining = () => {}, subscribed = () => {}, backoff },
  ) {
    this.deadlineMs = client.deadlineMs;
    const { namespaces, eventTypes, leaseMs, workerId } = subscription;
    this.subscribe = { namespaces, eventTypes, workerId, lease: duration(leaseMs) };
    this.on = { free, events, broken, unsupported, draining, subscribed };
    // The call whose server said it is draining: it gets no more credit.
    this.drainingCall = null;
    this.nextSequence = 1;
    // Calls sent (or to be sent again) and not answered, by sequence as a decimal string.
    this.unanswered = new Map();
    // Credit given on this call and not yet used by a pushed event.
    this.outstanding = 0;
    this.subscribed = false;
    this.closing = false;
    this.stoppedPushing = false;
    this.closed = new Promise((resolve) => {
      this.resolveClosed = resolve;
    });
    this.stream = new ReopeningStream(
      client,
      'Work',
      {
        opened: (call) => this.#opened(call),
        message: (response) => this.#received(response),
        ended: (end) => this.#ended(end),
      },
      backoff,
    );
  }

  /** How many calls were opened: 1 while the stream never broke. */
  get opened() {
    return this.stream.opened;
  }

  start() {
    this.stream.start();
  }

  /** Gives the server the credit for every free slot it does not already have credit for. */
  topUp() {
    const call = this.stream.call;
    if (!call || this.closing || this.stoppedPushing || call === this.drainingCall) return;
    const more = this.on.free() - this.outstanding;
    if (more <= 0) return;
    this.outstanding += more;
    call.write({ credit: more });
  }

  /**
   * The worker stops: no more credit, and the server drops what it holds (`stop_pushing`), so an
   * event given back from now on is not pushed here again, to end with its attempt counted when the
   * stream closes. A server without the field ignores it.
   */
  stopPushing() {
    if (this.stoppedPushing) return;
    this.stoppedPushing = true;
    const { call } = this.stream;
    if (call && !this.closing) call.write({ stopPushing: true });
  }

  /** Half-closes once the calls given are sent; resolves when the server has answered them and ended. */
  close() {
    if (!this.closing) {
      this.closing = true;
      const { call } = this.stream;
      if (call) {
        this.endedCall = call;
        call.end();
      } else {
        // Broken and not open again: the server ended this stream's claims already; nothing to wait for.
        this.stream.stop();
        this.#finish();
      }
    }
    return this.closed;
  }

  renewLease({ deadlineMs, ...request }) {
    return this.#send('renewLease', renewRequest(request), deadlineMs);
  }

  complete(item) {
    return this.#send('complete', completeRequest(item));
  }

  async completeMany(items) {
    const { results } = await this.#send('completeBatch', { completions: items.map(completeItem) });
    return outcomes('CompleteBatch', results, items.length);
  }

  fail(failure) {
    return this.#send('fail', failRequest(failure));
  }

  release(fence) {
    return this.#send('release', fenced(fence));
  }

  async recordActionOutcome(outcome) {
    return (await this.#send('recordActionOutcome', recordRequest(outcome))).action;
  }

  #send(kind, request, deadlineMs = this.deadlineMs) {
    const sequence = String(this.nextSequence++);
    const message = { sequence, [kind]: request };
    // The stream's metadata is once per stream; each call says which span made it (sent again with it).
    const traceContext = currentTraceContext();
    if (traceContext !== null) message.traceContext = traceContext;
    return new Promise((resolve, reject) => {
      const entry = { kind, message, resolve, reject };
      entry.timer = setTimeout(() => {
        this.unanswered.delete(sequence);
        reject(Object.assign(new Error(`no answer to ${kind} within ${deadlineMs} ms`), { code: status.DEADLINE_EXCEEDED }));
      }, deadlineMs);
      this.unanswered.set(sequence, entry);
      // Between calls the next call's opened() sends it; after the half-close, the end fails it.
      const { call } = this.stream;
      if (call && this.subscribedOn === call && this.endedCall !== call) call.write(message);
    });
  }

  #opened(call) {
    // Credit is per call: the server of a new call has been given none.
    this.outstanding = 0;
    this.subscribedOn = call;
    const stopped = this.closing || this.stoppedPushing;
    const credit = stopped ? 0 : Math.max(0, this.on.free());
    this.outstanding = credit;
    call.write({ credit, subscribe: this.subscribe, stopPushing: Boolean(this.stoppedPushing) });
    for (const entry of this.unanswered.values()) call.write(entry.message);
  }

  #received(response) {
    if (response.response === 'subscribed') {
      this.subscribed = true;
      this.on.subscribed();
    } else if (response.response === 'events') {
      const events = response.events.events ?? [];
      this.outstanding = Math.max(0, this.outstanding - events.length);
      this.on.events(events);
    } else if (response.response === 'result') {
      this.#answer(response.result);
    } else if (response.response === 'draining') {
      this.#serverDraining(response.draining);
    }
  }

  #serverDraining({ grace }) {
    const { call } = this.stream;
    if (!call || call === this.drainingCall) return;
    this.drainingCall = call;
    if (!this.closing && !this.stoppedPushing) call.write({ stopPushing: true });
    const graceMs = Number(grace?.seconds ?? 0) * 1000 + Math.floor((grace?.nanos ?? 0) / 1e6);
    this.on.draining(graceMs, () => this.stream.call === call);
  }

  #answer(result) {
    const sequence = String(result.sequence);
    const entry = this.unanswered.get(sequence);
    if (!entry) return; // its caller gave up
    this.unanswered.delete(sequence);
    clearTimeout(entry.timer);
    if (result.result === 'error') entry.reject(new ItemError(result.error.code, result.error.message));
    else entry.resolve(result[result.result]);
  }

  #ended(end) {
    if (end.code === status.UNIMPLEMENTED && !this.subscribed) {
      this.#failAll(end);
      this.resolveClosed();
      this.on.unsupported(streamError(end));
      return false;
    }
    if (this.closing) {
      this.#finish();
      return false;
    }
    // A break (or a refusal that may pass: a server restarting, a token being rotated): again, later.
    this.on.broken(streamError(end));
    return true;
  }

  #finish() {
    this.#failAll({ code: status.UNAVAILABLE, details: 'the Work stream ended before this call was answered' });
    this.resolveClosed();
  }

  #failAll(end) {
    for (const entry of this.unanswered.values()) {
      clearTimeout(entry.timer);
      entry.reject(streamError(end));
    }
    this.unanswered.clear();
  }
}

function streamError({ code, details }) {
  return Object.assign(new Error(`the Work stream ended: ${code} ${details}`), { code, details });
}
