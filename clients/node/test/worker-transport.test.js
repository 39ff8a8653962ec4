// Which path the worker takes: the Work stream by default, unary Claims against a server without
// it (found out once, at run time), either when forced; and a Work stream cut under a live worker.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { status, Worker } from '../src/index.js';
import { cutter } from '../test-support/cutter.js';
import { client, countingClient, namespace, needsInboxd, poll, settledOf } from '../test-support/helpers.js';
import { proxy } from '../test-support/proxy.js';

const inbox = client();
after(() => inbox.close());

async function acceptAll(ns, keys) {
  for (const eventKey of keys) await inbox.accept({ namespace: ns, eventKey, eventType: 't', payload: {} });
}

/** A client that counts the streams it opens and the Claims it sends. */
function counted(target) {
  const counting = target ? client({ target }) : countingClient();
  counting.streams = [];
  counting.claims = 0;
  const openStream = counting.openStream.bind(counting);
  counting.openStream = (method) => {
    counting.streams.push(method);
    return openStream(method);
  };
  const claim = counting.claim.bind(counting);
  counting.claim = (request) => {
    counting.claims += 1;
    return claim(request);
  };
  return counting;
}

/** Runs the worker until every key settled completed, then stops it. */
async function completeAll(worker, keys) {
  const outcomes = new Map();
  worker.on('settled', ({ event, outcome }) => outcomes.set(event.eventKey, outcome));
  const running = worker.run();
  try {
    await poll(() => (keys.every((k) => outcomes.get(k) === 'completed') ? true : undefined), { withinMs: 15_000 });
  } finally {
    await worker.stop();
    await running;
  }
}

test('by default the worker takes its events over one Work stream: no Claim, no unary completion', needsInboxd, async () => {
  const ns = namespace();
  const keys = ['k1', 'k2', 'k3', 'k4', 'k5'];
  await acceptAll(ns, keys);
  const counting = counted();
  const worker = new Worker(counting, { namespaces: [ns], concurrency: 2, handler: async () => {} });
  try {
    await completeAll(worker, keys);
  } finally {
    counting.close();
  }
  assert.equal(worker.transportUsed, 'work');
  assert.deepEqual(counting.streams, ['Work']);
  assert.equal(counting.claims, 0);
  assert.deepEqual([counting.batches, counting.singles], [[], 0], 'completions went over the stream');
});

test('against a server without Work the worker finds out once and claims with unary Claims', needsInboxd, async () => {
  const ns = namespace();
  const keys = ['k1', 'k2', 'k3'];
  await acceptAll(ns, keys);
  const older = await proxy(undefined, { streams: false });
  const viaOlder = counted(older.target);
  const worker = new Worker(viaOlder, { namespaces: [ns], waitMs: 200, handler: async () => {} });
  try {
    await completeAll(worker, keys);
  } finally {
    viaOlder.close();
    older.close();
  }
  assert.equal(worker.transportUsed, 'claim');
  assert.deepEqual(viaOlder.streams, ['Work'], 'Work was tried once, not once per Claim');
  assert.ok(viaOlder.claims >= 1);
});

test("transport: 'work' against a server without it fails run() with UNIMPLEMENTED", needsInboxd, async () => {
  const older = await proxy(undefined, { streams: false });
  const viaOlder = client({ target: older.target });
  const worker = new Worker(viaOlder, { namespaces: [namespace()], transport: 'work', handler: async () => {} });
  try {
    await assert.rejects(worker.run(), (err) => err.code === status.UNIMPLEMENTED);
  } finally {
    viaOlder.close();
    older.close();
  }
});

test("transport: 'claim' never opens a stream", needsInboxd, async () => {
  const ns = namespace();
  await acceptAll(ns, ['k']);
  const counting = counted();
  const worker = new Worker(counting, { namespaces: [ns], transport: 'claim', waitMs: 200, handler: async () => {} });
  try {
    await completeAll(worker, ['k']);
  } finally {
    counting.close();
  }
  assert.deepEqual(counting.streams, []);
  assert.equal(worker.transportUsed, 'claim');
});

test('a Work stream cut under a live worker is opened again; the held claim ended with it and comes back', needsInboxd, async () => {
  const ns = namespace();
  await acceptAll(ns, ['held']);
  const relay = await cutter();
  const viaRelay = counted(relay.target);
  let started;
  const firstStarted = new Promise((resolve) => {
    started = resolve;
  });
  let letGo;
  const mayEnd = new Promise((resolve) => {
    letGo = resolve;
  });
  const attempts = [];
  const worker = new Worker(viaRelay, {
    namespaces: [ns],
    leaseMs: 30_000, // far beyond the test: only the stream's end can end the claim
    streamBackoff: { minMs: 10, maxMs: 50 },
    handler: async (job) => {
      attempts.push(job.event.attempt);
      if (job.event.attempt === 1) {
        started();
        await mayEnd;
      }
    },
  });
  const outcomes = [];
  worker.on('settled', ({ outcome }) => outcomes.push(outcome));
  const running = worker.run();
  try {
    await firstStarted;
    relay.cut();
    await poll(() => (viaRelay.streams.length >= 2 ? true : undefined));
    // The first claim's Complete goes over the new stream: the old stream's end ended that claim.
    letGo();
    await poll(() => (outcomes.length >= 2 ? true : undefined), { withinMs: 10_000 });
  } finally {
    letGo();
    await worker.stop();
    await running;
    viaRelay.close();
    relay.close();
  }
  assert.deepEqual(outcomes, ['superseded', 'completed']);
  assert.deepEqual(attempts, [1, 2], 'the attempt cut off counts, as an expired lease would');
});

test('on the Work stream, completions that finish together share one complete_batch; each its own answer', needsInboxd, async () => {
  const ns = namespace();
  const keys = ['k1', 'k2', 'k3', 'stale'];
  await acceptAll(ns, keys);
  const calls = [];
  const watching = await proxy((method, request, forward) => {
    if (method.startsWith('Work.') && method !== 'Work.credit') calls.push(method);
    forward(request);
  });
  const viaProxy = client({ target: watching.target });
  let rival = null;
  let started = 0;
  let releaseAll;
  const together = new Promise((resolve) => {
    releaseAll = resolve;
  });
  const worker = new Worker(viaProxy, {
    namespaces: [ns],
    concurrency: keys.length,
    completeWindowMs: 1_000, // "together" must not depend on how busy the machine is
    handler: async (job) => {
      if (job.event.eventKey === 'stale') {
        // Meanwhile this claim ends and a rival takes the event: its completion must be refused alone.
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
    await poll(() => (outcomes.size === keys.length ? true : undefined), { withinMs: 15_000 });
  } finally {
    await worker.stop();
    await running;
    viaProxy.close();
    watching.close();
  }
  assert.deepEqual(calls, ['Work.subscribe', 'Work.completeBatch']);
  assert.deepEqual(Object.fromEntries(outcomes), { k1: 'completed', k2: 'completed', k3: 'completed', stale: 'superseded' });
  // The rival's claim is untouched by the stale completion.
  await inbox.complete(rival);
});
