// A handler's time limit, and the handlers that ran past it and would not stop.
//
// Past handlerTimeoutMs a handler's signal aborts with a HandlerTimeout; the worker fails its event
// once the handler settles, or a grace period later if it ignores the signal. Node cannot stop a
// promise, so such a handler runs on after its event was failed: it keeps its concurrency slot
// (Overdue) until it really returns, or the worker would run more handlers at once than its
// concurrency, and might run the same event again beside it. A process warning says so.

import { logIds } from './worker_tracing.js';

// 15 minutes: far beyond a webhook's work, short of "for ever", and the age at
// which inboxd already counts an INTENDED action as unresolved.
export const DEFAULT_HANDLER_TIMEOUT_MS = 15 * 60_000;
// After a timeout: how long an aborted handler gets to record its action outcomes before the Fail.
export const HANDLER_TIMEOUT_GRACE_MS = 10_000;

/** The reason a job's signal aborts when its handler ran past handlerTimeoutMs; the event is failed. */
export class HandlerTimeout extends Error {
  constructor(ms) {
    super(`the handler ran longer than handlerTimeoutMs=${ms} and was aborted`);
    this.name = 'HandlerTimeout';
  }
}

/**
 * Runs `run()` for one job; `entry.returned` settles once it really returns, whatever the limit did.
 * Resolves or rejects as the handler does, but past timeoutMs aborts `entry.controller` with a
 * HandlerTimeout (kept as `entry.timedOut`) and, graceMs later, rejects with it though the handler
 * runs on. timeoutMs null: no limit.
 */
export function runLimited(entry, run, { timeoutMs, graceMs = HANDLER_TIMEOUT_GRACE_MS }) {
  const running = Promise.resolve().then(run);
  entry.handlerReturned = false;
  const ended = () => {
    entry.handlerReturned = true;
  };
  entry.returned = running.then(ended, ended);
  if (timeoutMs === null) return running;
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => {
      entry.timedOut = new HandlerTimeout(timeoutMs);
      entry.controller.abort(entry.timedOut);
      timer = setTimeout(() => reject(entry.timedOut), graceMs);
    }, timeoutMs);
  });
  return Promise.race([running, expired]).finally(() => clearTimeout(timer));
}

/** Handlers still running after their event was settled: each holds its slot until it returns. */
export class Overdue {
  /** @param {() => void} [returned] told each time an overdue handler returns and frees its slot. */
  constructor(returned = () => {}) {
    this.entries = new Set();
    this.returned = returned;
  }

  get size() {
    return this.entries.size;
  }

  /** Keeps `entry`'s slot until its handler returns, if it has not yet; true when it is overdue. */
  hold(entry, outcome) {
    if (entry.handlerReturned || !entry.returned) return false;
    this.entries.add(entry);
    const { namespace, eventKey } = entry.event;
    // Traced, the warning names the handler's span, so it can be found beside the trace.
    const ids = logIds(entry.span);
    process.emitWarning(
      `the handler of ${namespace} ${eventKey} is still running after ${entry.timedOut?.message ?? 'its event settled'}; ` +
        `its event was ${outcome}, and its concurrency slot stays taken until it returns`,
      { code: 'INBOXD_HANDLER_OVERDUE', detail: ids ? `trace_id=${ids.trace_id} span_id=${ids.span_id}` : undefined },
    );
    entry.returned.then(() => {
      this.entries.delete(entry);
      this.returned();
    });
    return true;
  }

  /** Promises that settle when each overdue handler returns. */
  returns() {
    return [...this.entries].map((entry) => entry.returned);
  }
}
