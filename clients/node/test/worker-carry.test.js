// The worker's completions ride its next Claim: a busy worker's cycle is one call, and none is lost.
//
// inboxd is live; a counting client notes which call carried each completion, and stands in for
// what only the network does (a Claim's answer lost). An older server (one that ignores
// ClaimRequest.completions) is a grpc-js proxy in front of inboxd that drops them from each Claim.

// Completions riding Claims are the unary path's own: these workers take it (transport: 'claim').
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import grpc from '@grpc/grpc-js';

import { InboxClient, Worker } from '../src/index.js';
import { client, countingClient, namespace, needsInboxd, poll } from '../test-support/helpers.js';
import { proxy } from '../test-support/proxy.js';

const inbox = client();
after(() => inbox.close());

async function acceptAll(ns, keys) {
  for (const eventKey of keys) await inbox.accept({ namespace: ns, eventKey, eventType: 't', payload: {} });
}

/** Runs the worker until `done(outcomes)` holds, then stops it; resolves to the settled outcomes by key. */
async function runUntil(worker, done) {
  const outcomes = new Map();
  worker.on('settled', ({ event, outcome }) => outcomes.set(event.eventKey, outcome));
  const running = worker.run();
  try {
    await poll(() => (done(outcomes) ? true : undefined), { withinMs: 20_000 });
  } finally {
    await worker.stop();
    await running;
  }
  return outcomes;
}

test('a busy worker carries its completions in its Claims instead of CompleteBatch', needsInboxd, async () => {
  const ns = namespace();
  const keys = Array.from({ length: 20 }, (_, i) => `k${i}`);
  const concurrency = 2;
  await acceptAll(ns, keys);
  const counting = countingClient();
  const worker = new Worker(counting, { transport: 'claim', namespaces: [ns], concurrency, waitMs: 500, handler: async () => {} });
  try {
    const outcomes = await runUntil(worker, (o) => o.size === keys.length);
    assert.ok([...outcomes.values()].every((o) => o === 'completed'), JSON.stringify([...outcomes]));
  } finally {
    counting.close();
  }
  const sum = (list) => list.reduce((a, b) => a + b, 0);
  // While work remains every Claim comes back full, so the worker long-polls only once the
  // namespace is empty: at most the last `concurrency` completions finish during that poll.
  assert.ok(sum(counting.carried) >= keys.length - concurrency, JSON.stringify(counting));
  assert.equal(sum(counting.carried) + sum(counting.batches), keys.length);
  assert.equal(counting.singles, 0);
});

test('completions that finish while a Claim long-polls share one CompleteBatch', needsInboxd, async () => {
  const ns = namespace();
  const keys = ['k1', 'k2', 'k3'];
  await acceptAll(ns, keys);
  const counting = countingClient();
  let started = 0;
  let releaseAll;
  const together = new Promise((resolve) => {
    releaseAll = resolve;
  });
  // Slots to spare: the worker long-polls for more while the handlers run, and its completions
  // must not wait for that poll to end.
  const worker = new Worker(counting, {
    transport: 'claim',
    namespaces: [ns],
    concurrency: 2 * keys.length,
    waitMs: 5_000,
    completeWindowMs: 1_000,
    handler: async () => {
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
    assert.deepEqual(counting.batches, [keys.length]);
    assert.deepEqual(counting.carried, []);
  } finally {
    await worker.stop(); // waits out the long-poll
    await running;
    counting.close();
  }
  assert.ok([...outcomes.values()].every((o) => o === 'completed'));
});

test('completions waiting for a Claim are sent when the worker stops', needsInboxd, async () => {
  const ns = namespace();
  await acceptAll(ns, ['k']);
  const counting = countingClient();
  // Its only slot busy, the worker holds the completion for its next Claim, and a window no
  // test waits out means only stopping can send it.
  const worker = new Worker(counting, { transport: 'claim', namespaces: [ns], waitMs: 500, completeWindowMs: 600_000, handler: async () => {} });
  const outcomes = new Map();
  worker.on('settled', ({ event, outcome }) => outcomes.set(event.eventKey, outcome));
  const running = worker.run();
  try {
    await poll(() => (worker.completions.waiting === 1 ? true : undefined));
    await worker.stop();
    await running;
  } finally {
    counting.close();
  }
  assert.equal(outcomes.get('k'), 'completed');
  assert.deepEqual([counting.batches, counting.carried], [[1], []]);
});

for (const committed of [false, true]) {
  test(`completions of a failed Claim are sent again, not dropped (answer lost ${committed ? 'after' : 'before'} the commit)`, needsInboxd, async () => {
    const ns = namespace();
    await acceptAll(ns, ['k']);
    let lost = 0;
    const counting = countingClient({
      claimHook: async (request, claim) => {
        if (request.completions?.length > 0 && lost === 0) {
          lost += 1;
          if (committed) await claim(request);
          throw Object.assign(new Error('the answer was lost on the way back'), { code: grpc.status.UNAVAILABLE });
        }
        return claim(request);
      },
    });
    const worker = new Worker(counting, { transport: 'claim', namespaces: [ns], waitMs: 500, claimRetryMs: 10, handler: async () => {} });
    const errors = [];
    worker.on('finishError', (err) => errors.push(err));
    try {
      const outcomes = await runUntil(worker, (o) => o.size === 1);
      assert.equal(outcomes.get('k'), 'completed');
    } finally {
      counting.close();
    }
    assert.equal(lost, 1);
    // In doubt, it went again as a CompleteBatch; a repeat of a committed one answers OK.
    assert.deepEqual(counting.batches, [1]);
    assert.deepEqual(errors, []);
  });
}

/** inboxd as a server older than ClaimRequest.completions would answer: each Claim's completions dropped. */
async function olderServer() {
  const claims = [];
  const older = await proxy((method, request, forward) => {
    if (method !== 'Claim') return forward(request);
    claims.push(request.completions?.length ?? 0);
    return forward({ ...request, completions: [] });
  });
  return { ...older, claims };
}

test('a worker falls back to CompleteBatch when the server ignores a Claim\'s completions', needsInboxd, async () => {
  const ns = namespace();
  const keys = ['k1', 'k2', 'k3'];
  await acceptAll(ns, keys);
  const older = await olderServer();
  const viaOlder = new InboxClient({ target: older.target, deadlineMs: 10_000 });
  const worker = new Worker(viaOlder, { transport: 'claim', namespaces: [ns], waitMs: 500, handler: async () => {} });
  const released = [];
  worker.on('settled', ({ event, outcome }) => outcome === 'released' && released.push(event.eventKey));
  let outcomes;
  try {
    outcomes = await runUntil(worker, (o) => keys.every((k) => o.get(k) === 'completed'));
  } finally {
    viaOlder.close();
    older.close();
  }
  // One Claim carried a completion; its answer had no results, so CompleteBatch from then on.
  assert.equal(older.claims.filter((n) => n > 0).length, 1);
  assert.equal(worker.completions.calls, keys.length);
  // That Claim leased into the slot of the completion it ignored: given back, not handled twice at once.
  assert.equal(released.length, 1);
  assert.ok(keys.every((k) => outcomes.get(k) === 'completed'));
});
