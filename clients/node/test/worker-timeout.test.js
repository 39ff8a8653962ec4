// Handlers that hang or crash: a timeout aborts them and Fails the event; a crash while stopping is a Fail.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { client, namespace, needsInboxd, newWorker, poll, settledOf } from '../test-support/helpers.js';

const inbox = client();
after(() => inbox.close());

/** Rejects if `promise` has not settled within ms: a test must end even when the worker hangs. */
function within(promise, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The event back from its backoff: its attempt number and last error say how the claim ended. */
async function reclaim(ns) {
  return poll(
    async () => {
      const { events } = await inbox.claim({ namespaces: [ns], waitMs: 300, leaseMs: 5_000 });
      return events.length ? events[0] : undefined;
    },
    { withinMs: 10_000 },
  );
}

test('a handler that hangs past handlerTimeoutMs is aborted and its event failed, attempt counted', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'hung', eventType: 't', payload: {} });
  let abortedBy;
  const worker = newWorker(inbox, {
    namespaces: [ns],
    leaseMs: 2_000,
    waitMs: 200,
    handlerTimeoutMs: 500,
    handler: (job) =>
      new Promise((_, reject) => {
        // A call that never answers, but that honours the signal.
        job.signal.addEventListener('abort', () => {
          abortedBy = job.signal.reason?.name;
          reject(job.signal.reason);
        });
      }),
  });
  const settled = settledOf(worker, 'hung');
  const running = worker.run();
  try {
    const report = await within(settled, 10_000, 'the hung event settled');
    assert.equal(report.outcome, 'failed');
    assert.equal(report.error?.name, 'HandlerTimeout');
    assert.equal(abortedBy, 'HandlerTimeout');
  } finally {
    await worker.stop({ graceMs: 0 });
    await running;
  }
  const again = await reclaim(ns);
  assert.equal(again.attempt, 2, 'the timed-out attempt counts');
  assert.match(again.lastError, /HandlerTimeout/);
  await inbox.complete({ namespace: ns, eventKey: 'hung', claimToken: again.claimToken });
});

test('a handler that throws while the worker is stopping is failed, not released', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'crash', eventType: 't', payload: {} });
  let started;
  const handling = new Promise((resolve) => {
    started = resolve;
  });
  const worker = newWorker(inbox, {
    namespaces: [ns],
    leaseMs: 30_000,
    waitMs: 200,
    handler: (job) =>
      new Promise((_, reject) => {
        started();
        // It crashes on its own as the stop comes, rather than honouring the signal.
        job.signal.addEventListener('abort', () => reject(new TypeError('crashed while stopping')));
      }),
  });
  const settled = settledOf(worker, 'crash');
  const running = worker.run();
  await within(handling, 10_000, 'the handler started');
  const stopped = worker.stop({ graceMs: 5_000 });
  const report = await within(settled, 10_000, 'the crashed event settled');
  await stopped;
  await running;
  assert.equal(report.outcome, 'failed');
  const again = await reclaim(ns);
  assert.equal(again.attempt, 2, 'a crash uses up its attempt, even while stopping');
  assert.match(again.lastError, /crashed while stopping/);
  await inbox.complete({ namespace: ns, eventKey: 'crash', claimToken: again.claimToken });
});

test('a timed-out handler that ignores its signal keeps its slot until it returns, and is warned about', needsInboxd, async () => {
  const ns = namespace();
  for (const eventKey of ['first', 'second']) await inbox.accept({ namespace: ns, eventKey, eventType: 't', payload: {} });
  const started = [];
  let letGo;
  const stubborn = new Promise((resolve) => {
    letGo = resolve;
  });
  let running = 0;
  let most = 0;
  const worker = newWorker(inbox, {
    namespaces: [ns],
    concurrency: 1,
    leaseMs: 5_000,
    waitMs: 200,
    handlerTimeoutMs: 300,
    handlerTimeoutGraceMs: 200,
    handler: async (job) => {
      started.push(job.event.eventKey);
      running += 1;
      most = Math.max(most, running);
      try {
        // The first handler neither finishes nor looks at its signal: a sync loop, a library without one.
        if (started.length === 1) await stubborn;
      } finally {
        running -= 1;
      }
    },
  });
  const warnings = [];
  const onWarning = (warning) => warning.code === 'INBOXD_HANDLER_OVERDUE' && warnings.push(warning.message);
  process.on('warning', onWarning);
  const outcomes = [];
  worker.on('settled', ({ event, outcome }) => outcomes.push([event.eventKey, outcome]));
  const run = worker.run();
  try {
    // (Within 15 s: before handlerTimeoutGraceMs, the grace was always 10 s.)
    await poll(() => (outcomes.length >= 1 ? true : undefined), { withinMs: 15_000 });
    const [hung] = started;
    // Its event is failed, but its handler runs on. That nothing starts beside it can only be shown
    // over time: five of the worker's Claim cycles (waitMs 200), in which the other event waits.
    await sleep(1_000);
    assert.deepEqual(started, [hung], 'a second handler started beside the overdue one');
    assert.deepEqual(outcomes, [[hung, 'failed']]);
    assert.equal(worker.overdue.size, 1);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], new RegExp(`${hung} is still running .*slot stays taken`));
    letGo();
    await poll(() => (outcomes.some(([key, outcome]) => key !== hung && outcome === 'completed') ? true : undefined));
  } finally {
    letGo();
    process.off('warning', onWarning);
    await worker.stop({ graceMs: 0 });
    await run;
  }
  assert.equal(most, 1, 'more handlers ran at once than the concurrency');
});
