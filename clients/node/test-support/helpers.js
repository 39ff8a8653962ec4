// Shared by the tests (kept outside test/, where node --test would run every file): the live inboxd,
// fresh namespaces, bounded polling.

import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import { InboxClient, Worker } from '../src/index.js';

/** inboxd's host:port, given by the test command (tests/node/test_node_worker.py). */
export const TARGET = process.env.INBOXD_TARGET;
/** Skips a test that needs a live inboxd when none was given. */
export const needsInboxd = TARGET ? {} : { skip: 'INBOXD_TARGET is not set: no live inboxd' };

/**
 * The path the worker tests take (the Worker's `transport`): 'work' or 'claim', from
 * INBOXD_WORKER_TRANSPORT; tests/node runs the worker test files on each.
 */
export const TRANSPORT = process.env.INBOXD_WORKER_TRANSPORT || 'auto';

/** A Worker on the path under test; a test of one path's own behaviour passes `transport` itself. */
export function newWorker(inbox, options) {
  return new Worker(inbox, { transport: TRANSPORT, ...options });
}

export function client(options = {}) {
  return new InboxClient({ target: TARGET, deadlineMs: 10_000, ...options });
}

/** A namespace of the test's own, so tests never see each other's events. */
export function namespace() {
  return `node-test/${randomUUID().slice(0, 12)}`;
}

/** Calls check until it returns something other than undefined; throws after withinMs. */
export async function poll(check, { withinMs = 10_000, intervalMs = 100 } = {}) {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const result = await check();
    if (result !== undefined) return result;
    if (Date.now() > deadline) throw new Error(`condition not met within ${withinMs} ms`);
    await sleep(intervalMs);
  }
}

/** Resolves with the first 'settled' report of the worker for eventKey. */
export function settledOf(worker, eventKey) {
  return new Promise((resolve) => {
    const listener = (report) => {
      if (report.event.eventKey === eventKey) {
        worker.off('settled', listener);
        resolve(report);
      }
    };
    worker.on('settled', listener);
  });
}

/**
 * A client of the live inboxd that notes its completing calls: `batches` (items per CompleteBatch),
 * `singles` (lone Completes) and `carried` (completions per Claim that carried some).
 * `claimHook(request, claim)` may stand in for the real Claim (to lose its answer, say).
 */
export function countingClient({ claimHook } = {}) {
  const counting = client();
  counting.batches = [];
  counting.singles = 0;
  counting.carried = [];
  const completeMany = counting.completeMany.bind(counting);
  counting.completeMany = async (items) => {
    counting.batches.push(items.length);
    return completeMany(items);
  };
  const complete = counting.complete.bind(counting);
  counting.complete = async (item) => {
    counting.singles += 1;
    return complete(item);
  };
  const claim = counting.claim.bind(counting);
  counting.claim = async (request) => {
    if (request.completions?.length > 0) counting.carried.push(request.completions.length);
    return claimHook ? claimHook(request, claim) : claim(request);
  };
  return counting;
}
