// CompleteBatch from Node: completeMany judges each item alone, and the Worker batches its completions.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { CompleteItemError, status, Worker } from '../src/index.js';
import { client, namespace, needsInboxd, poll } from '../test-support/helpers.js';

const inbox = client();
after(() => inbox.close());

async function claimAll(ns, keys) {
  for (const eventKey of keys) await inbox.accept({ namespace: ns, eventKey, eventType: 't', payload: { eventKey } });
  const { events } = await inbox.claim({ namespaces: [ns], maxEvents: keys.length, leaseMs: 30_000 });
  assert.equal(events.length, keys.length);
  return Object.fromEntries(events.map((event) => [event.eventKey, event]));
}

test('completeMany answers each item alone: OK, stale, unknown, bad', needsInboxd, async () => {
  const ns = namespace();
  const events = await claimAll(ns, ['done', 'ignored', 'stale']);
  const outcomes = await inbox.completeMany([
    events.done,
    { ...events.ignored, disposition: 'IGNORED', reason: 'not ours' },
    { ...events.stale, claimToken: 'an-old-claim' },
    { namespace: ns, eventKey: 'unknown', claimToken: 't' },
    { namespace: ns, eventKey: '', claimToken: 't' },
    events.done, // a repeat by the claim that completed it: OK
  ]);
  assert.deepEqual(
    outcomes.map((o) => o?.code ?? status.OK),
    [status.OK, status.OK, status.ABORTED, status.NOT_FOUND, status.INVALID_ARGUMENT, status.OK],
  );
  assert.ok(outcomes[2] instanceof CompleteItemError);
  assert.match(outcomes[4].details, /completions\[4\]\.event_key/);
  // The stale item changed nothing: its real claim still completes.
  await inbox.complete(events.stale);
});

test('handlers that finish together share one CompleteBatch; each sees its own result', needsInboxd, async () => {
  const ns = namespace();
  const keys = ['k1', 'k2', 'k3', 'stale'];
  for (const eventKey of keys) await inbox.accept({ namespace: ns, eventKey, eventType: 't', payload: {} });
  const counting = client();
  const batches = [];
  let singles = 0;
  const completeMany = counting.completeMany.bind(counting);
  counting.completeMany = async (items) => {
    batches.push(items.length);
    return completeMany(items);
  };
  const complete = counting.complete.bind(counting);
  counting.complete = async (item) => {
    singles += 1;
    return complete(item);
  };
  let rival = null;
  let releaseAll;
  const together = new Promise((resolve) => {
    releaseAll = resolve;
  });
  let started = 0;
  const worker = new Worker(counting, {
    namespaces: [ns],
    concurrency: keys.length,
    waitMs: 500,
    // A wide window, so "together" does not depend on how busy the machine is.
    completeWindowMs: 1_000,
    handler: async (job) => {
      if (job.event.eventKey === 'stale') {
        // Meanwhile this claim ends and another takes the event: its result must be refused.
        await inbox.release(job.fence);
        [rival] = (await inbox.claim({ namespaces: [ns] })).events;
      }
      started += 1;
      if (started === keys.length) releaseAll();
      await together;
    },
  });
  const outcomes = new Map();
  worker.on('settled', ({ event, outcome }) => outcomes.set(event.eventKey, outcome));
  const running = worker.run();
  try {
    await poll(() => (outcomes.size === keys.length ? true : undefined), { withinMs: 20_000 });
  } finally {
    await worker.stop();
    await running;
    counting.close();
  }
  assert.deepEqual(batches, [keys.length]);
  assert.equal(singles, 0);
  assert.deepEqual(Object.fromEntries(outcomes), {
    k1: 'completed',
    k2: 'completed',
    k3: 'completed',
    stale: 'superseded',
  });
  // The rival's claim is untouched by the stale completion.
  assert.ok(rival);
  await inbox.complete(rival);
});
