// A rolling restart under a Node worker's Work stream loses no attempt. Run by
// tests/node/test_node_server_drain.py: INBOXD_TARGET names two `inboxd serve` on one database
// (`ipv4:A,B`, pick_first: A while it serves), INBOXD_DRAINING_PID is A's process. SIGTERM to A:
// it says it is draining; the short handlers complete over the draining stream, the long ones are
// released before the grace ends (attempt not counted), and the stream opens again on B, which
// hands them back at attempt 1.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Worker } from '../src/index.js';
import { client, namespace, poll } from '../test-support/helpers.js';

const DRAINING_PID = Number(process.env.INBOXD_DRAINING_PID || 0);
const NAMESPACE = process.env.INBOXD_DRAIN_NAMESPACE || namespace();
const needsTwoServers = DRAINING_PID ? {} : { skip: 'INBOXD_DRAINING_PID is not set: no server to stop' };

test('a server that drains under held Work streams costs the Node worker no attempt', needsTwoServers, async () => {
  const inbox = client();
  after(() => inbox.close());
  const ns = NAMESPACE;
  const keys = ['quick-0', 'quick-1', 'quick-2', 'slow-0', 'slow-1', 'slow-2'];
  for (const eventKey of keys) await inbox.accept({ namespace: ns, eventKey, eventType: 't', payload: {} });
  const calls = [];
  let signalled;
  const afterSignal = new Promise((resolve) => {
    signalled = resolve;
  });
  const slowSeen = new Set();
  const worker = new Worker(inbox, {
    namespaces: [ns],
    concurrency: 10,
    transport: 'work',
    logger: { info: () => {} },
    handler: async (job) => {
      const key = job.event.eventKey;
      calls.push([key, job.event.attempt]);
      if (key.startsWith('slow') && !slowSeen.has(key)) {
        slowSeen.add(key);
        // Outlives the grace: waits for its signal (the release), as a long job would be cut off.
        await new Promise((_, reject) => job.signal.addEventListener('abort', () => reject(job.signal.reason)));
      } else if (key.startsWith('quick')) {
        await afterSignal;
        await sleep(200); // finishes within the grace, over the draining stream
      }
    },
  });
  const outcomes = new Map();
  const released = [];
  worker.on('settled', ({ event, outcome }) => {
    if (outcome === 'released') released.push(event.eventKey);
    else outcomes.set(event.eventKey, outcome);
  });
  const running = worker.run();
  try {
    await poll(() => (calls.length >= keys.length ? true : undefined), { withinMs: 20_000 });
    process.kill(DRAINING_PID, 'SIGTERM');
    signalled();
    await poll(() => (keys.every((k) => outcomes.get(k) === 'completed') ? true : undefined), { withinMs: 30_000 });
  } finally {
    await worker.stop();
    await running;
  }
  const seen = calls.map(([key, attempt]) => `${key}@${attempt}`).sort();
  const expected = [...keys.map((k) => `${k}@1`), 'slow-0@1', 'slow-1@1', 'slow-2@1'].sort();
  assert.deepEqual(seen, expected);
  assert.deepEqual(released.sort(), ['slow-0', 'slow-1', 'slow-2']);
});
