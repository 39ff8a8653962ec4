// A promise-based client for inboxd's InboxService on @grpc/grpc-js.
//
// Requests use the proto's field names in camelCase, with conveniences:
// durations as milliseconds (leaseMs, waitMs, retryAfterMs), payloads as
// Buffers, strings or JSON values, enums with or without their prefix.
// Responses are the messages as @grpc/proto-loader decodes them: int64 as
// decimal strings, enums as names, Timestamps as {seconds, nanos} (see toDate).
// A failed call rejects with grpc-js's ServiceError; compare `err.code` with
// `status` (re-exported from @grpc/grpc-js).
//
// Every call carries the caller's current trace context (`traceparent`, `tracestate` metadata)
// when a valid OpenTelemetry span is current (src/trace_context.js); nothing otherwise.

import grpc from '@grpc/grpc-js';

import { AcceptStream } from './accept_stream.js';
import { duration } from './convert.js';
import { loadInboxd } from './protos.js';
import { addTraceMetadata } from './trace_context.js';
import {
  acceptRequest,
  completeItem,
  CompleteItemError,
  completeRequest,
  failRequest,
  fenced,
  outcomes,
  recordRequest,
  renewRequest,
} from './requests.js';

export const { status } = grpc;
export { CompleteItemError };

const DEFAULT_DEADLINE_MS = 30_000;
// grpc-js refuses answers over 4 MiB by default, and a Claim's answer holds its events' payloads
// (1 MiB each by default): refused, its events would stay leased, their attempt counted, until
// every retry had lapsed and they were dead letters that never ran. The caller's options win.
const DEFAULT_CHANNEL_OPTIONS = { 'grpc.max_receive_message_length': -1 };
// Keepalive pings: a path that goes silent (no FIN, no RST) is noticed within about time + timeout
// (15 s) and its calls end UNAVAILABLE, rather than a Work stream's handlers running on for the hour
// it takes TCP to give up. inboxd permits a ping every 5 s; an older server every 5 minutes, and
// answers more with GOAWAY `too_many_pings` (set channelOptions to change these). Read when a
// client is made.
export const KEEPALIVE = { timeMs: 10_000, timeoutMs: 5_000 };

export class InboxClient {
  /**
   * @param {object} [options]
   * @param {string} [options.target] host:port; defaults to INBOXD_TARGET, then 127.0.0.1:50051.
   * @param {string} [options.token] bearer token, sent as `authorization: Bearer <token>`; defaults to INBOXD_TOKEN.
   * @param {grpc.ChannelCredentials} [options.credentials] TLS credentials; insecure when omitted.
   * @param {string} [options.protosDir] where protos/ is; see loadInboxd.
   * @param {number} [options.deadlineMs] each call's deadline (a Claim's wait comes on top).
   * @param {object} [options.channelOptions] passed to the grpc-js client, over the defaults
   *   (`'grpc.max_receive_message_length': -1`: answers of any size; keepalive pings every 10 s,
   *   each answered within 5 s, or the connection and its calls end UNAVAILABLE).
   */
  constructor(options = {}) {
    const target = options.target || process.env.INBOXD_TARGET || '127.0.0.1:50051';
    const { InboxService } = loadInboxd(options.protosDir);
    this.raw = new InboxService(
      target,
      options.credentials ?? grpc.credentials.createInsecure(),
      {
        ...DEFAULT_CHANNEL_OPTIONS,
        'grpc.keepalive_time_ms': KEEPALIVE.timeMs,
        'grpc.keepalive_timeout_ms': KEEPALIVE.timeoutMs,
        // grpc-js's own reconnect backoff grows to 120 s, and every call fails at once meanwhile: a
        // worker would come back long after its server. A refused connect costs nothing: every second.
        'grpc.initial_reconnect_backoff_ms': 250,
        'grpc.max_reconnect_backoff_ms': 1_000,
        ...options.channelOptions,
      },
    );
    this.token = options.token ?? process.env.INBOXD_TOKEN ?? '';
    this.deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  }

  /** Closes the channel; calls after this fail. */
  close() {
    this.raw.close();
  }

  /** Accept: insert-if-absent; resolves to {outcome, state, acceptedAt}. */
  async accept(event) {
    return this.#call('Accept', acceptRequest(event));
  }

  /** AcceptBatch: up to 500 events in one transaction; resolves to {results}. */
  async acceptBatch(events) {
    return this.#call('AcceptBatch', { events: events.map(acceptRequest) });
  }

  /**
   * Claim: resolves to {events, completionOutcomes}; each event has claimToken and fencingToken.
   * Waits up to waitMs for work. `completions` (items as for completeMany) are committed first,
   * so a worker's cycle is one call; completionOutcomes has one entry per item, as completeMany's,
   * or is null when the server answered no results for them: a server older than
   * ClaimRequest.completions ignores them, so none was completed (send them with completeMany).
   */
  async claim({ namespaces = [], eventTypes = [], maxEvents = 1, leaseMs, waitMs = 0, workerId = '', completions = [] } = {}) {
    const request = { namespaces, eventTypes, maxEvents, workerId, wait: duration(waitMs) };
    if (leaseMs !== undefined) request.lease = duration(leaseMs);
    if (completions.length > 0) request.completions = completions.map(completeItem);
    const response = await this.#call('Claim', request, { extraMs: waitMs });
    const results = response.completionResults ?? [];
    const ignored = completions.length > 0 && results.length === 0;
    return { ...response, completionOutcomes: ignored ? null : outcomes('Claim', results, completions.length) };
  }

  /**
   * RenewLease (fenced): resolves to {leaseExpiresAt}. deadlineMs overrides the client's deadline
   * for this call: a renewal that hangs for as long as the lease would lose it.
   */
  async renewLease({ leaseMs, deadlineMs, ...fence }) {
    return this.#call('RenewLease', renewRequest({ leaseMs, ...fence }), { deadlineMs });
  }

  /** Complete (fenced). disposition: 'APPLIED' (default) or 'IGNORED' with a reason. */
  async complete(item) {
    return this.#call('Complete', completeRequest(item));
  }

  /**
   * CompleteBatch: up to 500 completions in one call and one transaction, each judged alone.
   * Items are {namespace, eventKey, claimToken, disposition?, reason?}, sent as they are: the
   * server judges each one (a missing field is that item's INVALID_ARGUMENT).
   * Resolves to one entry per item, in order: null when it completed (or this same claim had
   * completed it), else a CompleteItemError whose `code` is the status Complete would have
   * answered: status.ABORTED for a superseded claim, NOT_FOUND, PERMISSION_DENIED,
   * INVALID_ARGUMENT, UNAVAILABLE (nothing changed: retry it). Rejects only when the call
   * itself fails (UNAUTHENTICATED, UNAVAILABLE, an empty or oversized batch).
   */
  async completeMany(items) {
    const { results } = await this.#call('CompleteBatch', { completions: items.map(completeItem) });
    return outcomes('CompleteBatch', results, items.length);
  }

  /** Fail (fenced): retry later with backoff (or after retryAfterMs), or dead-letter when permanent. */
  async fail(failure) {
    return this.#call('Fail', failRequest(failure));
  }

  /** Release (fenced): give the event back without counting the attempt. */
  async release(fence) {
    return this.#call('Release', fenced(fence));
  }

  /**
   * RecordActionOutcome (fenced): state is INTENDED, SUCCEEDED, FAILED or UNKNOWN.
   * Resolves to the ActionRecord, whose idempotencyKey is stable across retries.
   */
  async recordActionOutcome(outcome) {
    const response = await this.#call('RecordActionOutcome', recordRequest(outcome));
    return response.action;
  }

  /**
   * AcceptStream: many concurrent Accepts over one open stream, each answered by its sequence after
   * its commit (src/accept_stream.js). `await stream.accept(event)` answers as accept(event) does;
   * `await stream.close()` waits for what is outstanding.
   * @param {{window?: number, deadlineMs?: number}} [options] window: items unanswered at once (64).
   */
  acceptStream(options = {}) {
    return new AcceptStream(this, options);
  }

  /** Opens the bidirectional stream `method` ('AcceptStream', 'Work'), authenticated once on its metadata. */
  openStream(method) {
    return this.raw[method](this.#metadata());
  }

  #metadata() {
    const metadata = new grpc.Metadata();
    if (this.token) metadata.set('authorization', `Bearer ${this.token}`);
    // The caller's current span, when one is: the server's span for this call becomes its child.
    addTraceMetadata(metadata);
    return metadata;
  }

  #call(method, request, { extraMs = 0, deadlineMs = this.deadlineMs } = {}) {
    const deadline = new Date(Date.now() + deadlineMs + extraMs);
    return new Promise((resolve, reject) => {
      this.raw[method](request, this.#metadata(), { deadline }, (err, response) => {
        if (err) reject(err);
        else resolve(response);
      });
    });
  }
}
