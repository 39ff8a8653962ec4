// The worker loop against a live inboxd: completion, lease renewal, fencing, actions, SIGTERM.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import { ActionFailed, status } from '../src/index.js';
import { client, countingClient, namespace, needsInboxd, newWorker, poll, settledOf, TARGET } from '../test-support/helpers.js';

const inbox = client();
after(() => inbox.close());

const EDGE_NAMESPACE = process.env.INBOXD_EDGE_NAMESPACE;
const EDGE_KEYS = JSON.parse(process.env.INBOXD_EDGE_KEYS ?? '[]');
const needsEdgeEvents =
  TARGET && EDGE_NAMESPACE ? {} : { skip: 'INBOXD_EDGE_NAMESPACE is not set: run through tests/node' };

test('completes the events accepted through the Python edge, recording each action', needsEdgeEvents, async () => {
  const keysSeen = new Map();
  const worker = newWorker(inbox, {
    namespaces: [EDGE_NAMESPACE],
    leaseMs: 10_000,
    waitMs: 500,
    concurrency: 2,
    handler: async (job) => {
      const { performed, record } = await job.action('notify:v1', async ({ idempotencyKey }) => ({
        externalRef: `sent-${idempotencyKey}`,
      }));
      assert.ok(performed);
      keysSeen.set(job.event.eventKey, record.idempotencyKey);
    },
  });
  const outcomes = new Map();
  worker.on('settled', ({ event, outcome }) => outcomes.set(event.eventKey, outcome));
  const running = worker.run();
  await poll(() => (outcomes.size >= EDGE_KEYS.length ? true : undefined), { withinMs: 20_000 });
  await worker.stop();
  await running;
  assert.deepEqual([...outcomes.keys()].sort(), [...EDGE_KEYS].sort());
  assert.ok([...outcomes.values()].every((o) => o === 'completed'), JSON.stringify([...outcomes]));
  const keys = [...keysSeen.values()];
  assert.equal(new Set(keys).size, EDGE_KEYS.length, 'one idempotency key per event');
  assert.ok(keys.every(Boolean));
});

test("renews a slow job's lease, so no one else can claim it while it runs", needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'slow', eventType: 't', payload: {} });
  let renewals = 0;
  let handlerDone = false;
  let started;
  const handlerStarted = new Promise((resolve) => { started = resolve; });
  const worker = newWorker(inbox, {
    namespaces: [ns],
    leaseMs: 2_000,
    waitMs: 200,
    handler: async () => {
      started();
      // The job itself is slower than its lease: 3.5 s of work on a 2 s lease.
      await sleep(3_500);
      handlerDone = true;
    },
  });
  worker.on('renewed', () => renewals++);
  const settled = settledOf(worker, 'slow');
  const running = worker.run();
  // Only once the worker holds the event: before that, a rival's Claim may rightly win it.
  await handlerStarted;
  // A competitor long-polls the namespace the whole time; had the lease lapsed, it would get the event.
  const rival = client();
  const stolen = [];
  try {
    while (!handlerDone) {
      const { events } = await rival.claim({ namespaces: [ns], waitMs: 300, leaseMs: 30_000 });
      stolen.push(...events);
    }
  } finally {
    rival.close();
  }
  const report = await settled;
  await worker.stop();
  await running;
  assert.deepEqual(stolen, [], 'the rival claimed the event while its lease was being renewed');
  assert.equal(report.outcome, 'completed');
  assert.ok(renewals >= 1, `expected renewals, saw ${renewals}`);
});

test('a worker whose claim was superseded ends as superseded and loses its signal', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'taken', eventType: 't', payload: {} });
  const rival = client();
  let rivalToken;
  let abortedBy;
  const worker = newWorker(inbox, {
    namespaces: [ns],
    leaseMs: 3_000,
    waitMs: 200,
    handler: async (job) => {
      // Someone ends this claim (here: a release with its token) and another worker claims the event.
      await rival.release(job.fence);
      const [event] = (await rival.claim({ namespaces: [ns], leaseMs: 30_000 })).events;
      rivalToken = event.claimToken;
      // The next renewal (a third of the lease) is answered ABORTED and aborts the signal.
      await poll(() => (job.signal.aborted ? true : undefined), { withinMs: 5_000, intervalMs: 50 });
      abortedBy = job.signal.reason?.name;
    },
  });
  const settled = settledOf(worker, 'taken');
  const running = worker.run();
  try {
    const report = await settled;
    assert.equal(report.outcome, 'superseded');
    assert.equal(abortedBy, 'LeaseLost');
    // The rival's claim was left alone: it can still complete.
    await rival.complete({ namespace: ns, eventKey: 'taken', claimToken: rivalToken });
  } finally {
    await worker.stop();
    await running;
    rival.close();
  }
});

test('a completion fenced by a superseded token is ABORTED and reported as superseded', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'late', eventType: 't', payload: {} });
  const rival = client();
  const worker = newWorker(inbox, {
    namespaces: [ns],
    leaseMs: 60_000, // no renewal comes before the handler returns
    waitMs: 200,
    handler: async (job) => {
      await rival.release(job.fence);
      await rival.claim({ namespaces: [ns], leaseMs: 30_000 });
    },
  });
  const settled = settledOf(worker, 'late');
  const running = worker.run();
  try {
    assert.equal((await settled).outcome, 'superseded');
  } finally {
    await worker.stop();
    await running;
    rival.close();
  }
});

test('an UNKNOWN action is reconciled on the next attempt under the same idempotency key', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'charge', eventType: 't', payload: {} });
  const performedWith = [];
  const reconciledWith = [];
  let secondAttemptSaw;
  const worker = newWorker(inbox, {
    namespaces: [ns],
    leaseMs: 10_000,
    waitMs: 200,
    handler: async (job) => {
      if (job.event.attempt === 1) {
        const timeout = Object.assign(new Error('gateway timeout'), { retryAfterMs: 0 });
        await job.action('charge:v1', async ({ idempotencyKey }) => {
          performedWith.push(idempotencyKey);
          throw timeout; // the charge may or may not have happened
        });
        return;
      }
      secondAttemptSaw = job.event.actions.map((a) => [a.action, a.state, a.idempotencyKey]);
      const { performed } = await job.action(
        'charge:v1',
        async () => assert.fail('an UNKNOWN action must not be performed again unreconciled'),
        {
          reconcile: async ({ idempotencyKey }) => {
            reconciledWith.push(idempotencyKey);
            return 'succeeded';
          },
        },
      );
      assert.equal(performed, false);
    },
  });
  const outcomes = [];
  worker.on('settled', ({ outcome }) => outcomes.push(outcome));
  const running = worker.run();
  try {
    await poll(() => (outcomes.length >= 2 ? true : undefined), { withinMs: 15_000 });
  } finally {
    await worker.stop();
    await running;
  }
  assert.deepEqual(outcomes, ['failed', 'completed']);
  assert.equal(performedWith.length, 1);
  assert.deepEqual(secondAttemptSaw, [['charge:v1', 'ACTION_STATE_UNKNOWN', performedWith[0]]]);
  assert.deepEqual(reconciledWith, performedWith);
});

test('a FAILED action is intended again with the same key and then succeeds', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'send', eventType: 't', payload: {} });
  const keys = [];
  const worker = newWorker(inbox, {
    namespaces: [ns],
    leaseMs: 10_000,
    waitMs: 200,
    handler: async (job) => {
      const attempt = job.event.attempt;
      await job.action('send:v1', async ({ idempotencyKey }) => {
        keys.push(idempotencyKey);
        if (attempt === 1) throw Object.assign(new ActionFailed('rejected: mailbox full'), { retryAfterMs: 0 });
        return { externalRef: 'msg-1' };
      });
    },
  });
  const outcomes = [];
  worker.on('settled', ({ outcome }) => outcomes.push(outcome));
  const running = worker.run();
  try {
    await poll(() => (outcomes.length >= 2 ? true : undefined), { withinMs: 15_000 });
  } finally {
    await worker.stop();
    await running;
  }
  assert.deepEqual(outcomes, ['failed', 'completed']);
  assert.equal(keys.length, 2);
  assert.equal(keys[0], keys[1], 'the retry reuses the idempotency key');
});

test("an action's plain return value is kept as its externalRef, as in Python", needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'plain', eventType: 't', payload: {} });
  const records = [];
  const worker = newWorker(inbox, {
    namespaces: [ns],
    leaseMs: 10_000,
    waitMs: 200,
    handler: async (job) => {
      const { record } = await job.action('send:v1', async () => 'msg-7');
      records.push(record);
    },
  });
  const outcomes = [];
  worker.on('settled', ({ outcome }) => outcomes.push(outcome));
  const running = worker.run();
  try {
    await poll(() => (outcomes.length >= 1 ? true : undefined), { withinMs: 15_000 });
  } finally {
    await worker.stop();
    await running;
  }
  assert.deepEqual(outcomes, ['completed']);
  assert.equal(records[0].externalRef, 'msg-7', 'the server recorded the returned message id');
});

test('SIGTERM releases the running event: it is claimable at once, its attempt not counted', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'held', eventType: 't', payload: {} });
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'test-support', 'sigterm-worker.js');
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, WORKER_NAMESPACE: ns },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const seen = [];
  const exited = once(child, 'exit');
  try {
    for await (const line of lines) {
      seen.push(line);
      if (line === 'handling held') break;
    }
    child.kill('SIGTERM');
    const [code] = await exited;
    assert.equal(code, 0);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
  // The lease was 30 s: only a Release makes the event claimable now.
  const { events } = await inbox.claim({ namespaces: [ns], leaseMs: 5_000 });
  assert.equal(events.length, 1, `the event was not released; worker said ${JSON.stringify(seen)}`);
  assert.equal(events[0].attempt, 1, 'a released attempt is given back');
  await inbox.complete({ namespace: ns, eventKey: 'held', claimToken: events[0].claimToken });
});

test('a fenced call without a claim token is refused before it is sent', async () => {
  await assert.rejects(inbox.complete({ namespace: 'n', eventKey: 'k' }), TypeError);
  assert.equal(status.ABORTED, 10);
});

test('handlers that finish together ride one Claim; each sees its own result', needsInboxd, async () => {
  const ns = namespace();
  const keys = ['k1', 'k2', 'k3', 'stale'];
  for (const eventKey of keys) await inbox.accept({ namespace: ns, eventKey, eventType: 't', payload: {} });
  const counting = countingClient();
  let rival = null;
  let releaseAll;
  const together = new Promise((resolve) => {
    releaseAll = resolve;
  });
  let started = 0;
  const worker = newWorker(counting, {
    transport: 'claim', // what rides a Claim: the unary path's own
    namespaces: [ns],
    concurrency: keys.length,
    waitMs: 500,
    // A wide window, so "together" does not depend on how busy the machine is. Every slot is
    // busy, so the worker waits for them and carries them in its next Claim.
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
  assert.deepEqual(counting.carried, [keys.length]);
  assert.deepEqual(counting.batches, []);
  assert.equal(counting.singles, 0);
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
