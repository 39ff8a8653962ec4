// One claimed event as a handler sees it, with the action ledger helper.
//
// job.action(name, perform) records INTENDED (which mints or returns the
// action's idempotency key), runs perform({idempotencyKey, signal}), then
// records SUCCEEDED, FAILED (perform threw ActionFailed: certainly no effect)
// or UNKNOWN (anything else: the effect may or may not have happened). The
// key is the same on every retry of the event, so pass it downstream.
//
// Before acting it looks at the ledger: SUCCEEDED is skipped; FAILED is acted
// on again; UNKNOWN, and INTENDED with no outcome after it (its worker died,
// or its outcome never reached the server), may have happened: that INTENDED
// is recorded UNKNOWN, and without a reconcile function that settles it the
// action throws ActionUnresolved instead of calling perform() again.

import { DEFAULT_CONTENT_TYPE, isJsonType, parseJson } from './payloads.js';
import { runtimeTracer, traceAction } from './worker_tracing.js';

/** Thrown by a perform function when the outside world certainly did not act: recorded as FAILED. */
export class ActionFailed extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'ActionFailed';
  }
}

/**
 * An action is UNKNOWN and no reconcile function settled it: the event must wait for reconciliation.
 * The message says "pass reconcile" only when none was given (asked false), and otherwise what it answered.
 */
export class ActionUnresolved extends Error {
  constructor(action, { idempotencyKey = '', asked = false, answer = undefined } = {}) {
    const head = `action ${action}${idempotencyKey ? ` (idempotency key ${idempotencyKey})` : ''} may have happened`;
    const why = asked
      ? `its reconcile could not tell (it answered ${JSON.stringify(answer) ?? 'undefined'}): the event is retried later`
      : 'nothing settled it: pass reconcile in the options to look its outcome up before acting again';
    super(`${head}, and ${why}; an operator who knows can settle it (inboxd settle)`);
    this.name = 'ActionUnresolved';
    this.action = action;
    this.idempotencyKey = idempotencyKey;
    this.asked = asked;
  }
}

const SUCCEEDED = 'ACTION_STATE_SUCCEEDED';
const FAILED = 'ACTION_STATE_FAILED';
const UNKNOWN = 'ACTION_STATE_UNKNOWN';
const INTENDED = 'ACTION_STATE_INTENDED';
// The detail column is for people reading the ledger; keep it short.
const MAX_DETAIL = 1024;

export class Job {
  constructor(client, event, signal) {
    this.client = client;
    /** The ClaimedEvent as received: namespace, eventKey, eventType, payload (Buffer), attempt, actions... */
    this.event = event;
    /** Aborted when the lease is lost or the worker is stopping. */
    this.signal = signal;
    this.actions = new Map((event.actions ?? []).map((record) => [record.action, record]));
    this._payload = undefined;
  }

  /** The payload's bytes exactly as accepted (a Buffer), whatever its type: what a signature is checked against. */
  get body() {
    return this.event.payload ?? Buffer.alloc(0);
  }

  /** The payload's media type as accepted, parameters kept ('application/json' from a server that sends none). */
  get contentType() {
    return this.event.contentType || DEFAULT_CONTENT_TYPE;
  }

  /** The content type is application/json or +json: json() parses the payload. */
  get isJson() {
    return isJsonType(this.contentType);
  }

  /** The payload parsed as JSON; throws NotJsonPayload (permanent), naming the type, for any other type. */
  json() {
    if (this._payload === undefined) this._payload = parseJson(this.body, this.contentType);
    return this._payload;
  }

  /** What the Accept stored beside the payload (the edge's kept headers, a delivery id): strings by key. */
  get metadata() {
    return this.event.metadata ?? {};
  }

  /** The payload parsed as JSON, as json() (so it throws NotJsonPayload for a form, XML, text or binary event). */
  get payload() {
    return this.json();
  }

  /** The event's ordering key ('' for none): one event of a key is in flight at a time, by revision. */
  get orderingKey() {
    return this.event.orderingKey;
  }

  /** The business revision the event carries, as a BigInt (0n: none). */
  get revision() {
    return BigInt(this.event.revision ?? 0);
  }

  /**
   * The highest revision of the ordering key completed as APPLIED, as a BigInt (0n: none yet).
   * Apply the event only if it is newer: `if (job.stale) return ignore(...)`. By default the server
   * completes stale events IGNORED itself; with INBOXD_STALE_REVISIONS=deliver they arrive flagged.
   */
  get appliedRevision() {
    return BigInt(this.event.appliedRevision ?? 0);
  }

  /** The revision is at or below the key's applied revision: older than the state already applied. */
  get stale() {
    return Boolean(this.event.stale);
  }

  get fence() {
    const { namespace, eventKey, claimToken } = this.event;
    return { namespace, eventKey, claimToken };
  }

  /**
   * Runs an external action at most once in effect, recording it in the event's ledger.
   * @param {string} name the action's name within the event, e.g. 'send-welcome:v1'.
   * @param {(ctx: {idempotencyKey: string, signal: AbortSignal}) => Promise<{externalRef?: string, detail?: string} | string | void>} perform
   *   its result: `{externalRef, detail}`, or a plain string (or number) kept as the externalRef, as in Python.
   * @param {{reconcile?: (ctx: {idempotencyKey: string, record: object}) => Promise<'succeeded'|'failed'|'unknown'>}} [options]
   *   reconcile asks the outside world what became of an earlier, uncertain attempt.
   * @returns {Promise<{performed: boolean, record: object, result?: unknown}>}
   */
  async action(name, perform, options = {}) {
    // Traced, it runs in an `action` span of its own, a child of the handler's (src/worker_tracing.js).
    if (runtimeTracer() === null) return this.#act(name, perform, options);
    return traceAction(this, name, () => this.#act(name, perform, options));
  }

  async #act(name, perform, { reconcile }) {
    const prior = this.actions.get(name);
    if (prior?.state === SUCCEEDED) return { performed: false, record: prior };
    if (prior?.state === UNKNOWN || prior?.state === INTENDED) {
      const done = await this.#reconcile(name, reconcile);
      if (done) return { performed: false, record: done };
    }
    const intended = await this.#record(name, INTENDED);
    let result;
    try {
      result = await perform({ idempotencyKey: intended.idempotencyKey, signal: this.signal });
    } catch (err) {
      const state = err instanceof ActionFailed ? FAILED : UNKNOWN;
      await this.#record(name, state, { detail: String(err?.message ?? err) });
      throw err;
    }
    const record = await this.#record(name, SUCCEEDED, outcomeOf(result));
    return { performed: true, record, result };
  }

  /**
   * Settles an action that may have happened (UNKNOWN, or INTENDED with no outcome after it) before
   * acting again: resolves to its SUCCEEDED record when it happened, to null when it certainly did
   * not (recorded FAILED: act again, same key), and throws ActionUnresolved when nobody can tell.
   * The Python runtime's rule (ActionLedger), case by case in tests/shared/action_cases.json, which
   * both runtimes' tests run.
   */
  async #reconcile(name, reconcile) {
    let record = this.actions.get(name);
    if (record.state === INTENDED) {
      // Its claim (an earlier one, or this one whose outcome never reached the ledger) stopped
      // somewhere around the call: as uncertain as UNKNOWN, so the ledger says so first.
      record = await this.#record(name, UNKNOWN, {
        detail: `INTENDED by the claim with fencing token ${record.fencingToken}, which recorded no outcome`,
      });
    }
    const verdict = reconcile ? await reconcile({ idempotencyKey: record.idempotencyKey, record }) : undefined;
    if (verdict === 'succeeded') return this.#record(name, SUCCEEDED, { detail: 'reconciled: the effect happened' });
    if (verdict !== 'failed') {
      throw new ActionUnresolved(name, { idempotencyKey: record.idempotencyKey, asked: Boolean(reconcile), answer: verdict });
    }
    await this.#record(name, FAILED, { detail: 'reconciled: no effect downstream' });
    return null;
  }

  async #record(action, state, { externalRef = '', detail = '' } = {}) {
    const record = await this.client.recordActionOutcome({
      ...this.fence,
      action,
      state,
      externalRef,
      detail: detail.slice(0, MAX_DETAIL),
    });
    this.actions.set(action, record);
    return record;
  }
}

// What perform's result says of the effect: a plain string (a message id, say) is its externalRef, as the
// Python runtime keeps a plain return; an object may name externalRef and detail; anything else, nothing.
function outcomeOf(result) {
  if (typeof result === 'string' || typeof result === 'number' || typeof result === 'bigint') {
    return { externalRef: String(result), detail: '' };
  }
  return { externalRef: result?.externalRef ?? '', detail: result?.detail ?? '' };
}
