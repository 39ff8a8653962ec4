// A worker whose path goes silent (no FIN, no RST) notices it by its own keepalive pings: its Work
// stream breaks, and it subscribes again once the path is back. Run by tests/node/test_node_silent_path.py
// against a server that pings too slowly to notice first; the client's defaults are made quick here.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import * as clientModule from '../src/client.js';
import { status, Worker } from '../src/index.js';
import { cutter } from '../test-support/cutter.js';
import { client, namespace, needsInboxd, poll } from '../test-support/helpers.js';

// The runtime's own defaults (a client without them pinged not at all: its stream never ended).
const KEEPALIVE = clientModule.KEEPALIVE ?? {};

// Generous for a loaded machine: a ping a second, answered within a second, says it within about 2 s.
const NOTICED_WITHIN_MS = 30_000;

test('a worker whose path goes silent has its stream end by its own pings, and subscribes again', needsInboxd, async () => {
  const defaults = { ...KEEPALIVE };
  Object.assign(KEEPALIVE, { timeMs: 1_000, timeoutMs: 1_000 });
  const inbox = client();
  const relay = await cutter();
  const far = client({ target: relay.target });
  Object.assign(KEEPALIVE, defaults);
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'held', eventType: 't', payload: {} });
  let opened = 0;
  const openStream = far.openStream.bind(far);
  far.openStream = (method) => {
    if (method === 'Work') opened += 1;
    return openStream(method);
  };
  let started;
  const firstStarted = new Promise((resolve) => {
    started = resolve;
  });
  let letGo;
  const mayEnd = new Promise((resolve) => {
    letGo = resolve;
  });
  const broken = [];
  const worker = new Worker(far, {
    namespaces: [ns],
    transport: 'work',
    leaseMs: 30_000,
    streamBackoff: { minMs: 10, maxMs: 50 },
    handler: async (job) => {
      if (job.event.attempt === 1) {
        started();
        await mayEnd;
      }
    },
  });
  worker.on('claimError', (err) => broken.push(err));
  const running = worker.run();
  let noticedMs;
  try {
    await firstStarted;
    assert.equal(opened, 1);
    relay.silence();
    const silentSince = Date.now();
    await poll(() => (broken.length > 0 ? true : undefined), { withinMs: NOTICED_WITHIN_MS });
    noticedMs = Date.now() - silentSince;
    relay.mend();
    await poll(() => (opened >= 2 ? true : undefined), { withinMs: 20_000 });
  } finally {
    letGo();
    if (noticedMs === undefined) {
      // Else stopping waits for answers on a stream that never ends.
      relay.cut();
      relay.mend();
    }
    await worker.stop();
    await running;
    far.close();
    inbox.close();
    relay.close();
  }
  assert.equal(broken[0].code, status.UNAVAILABLE, String(broken[0]));
  assert.ok(noticedMs < NOTICED_WITHIN_MS, `noticed ${noticedMs} ms after the path went silent`);
  console.log(`# noticed ${noticedMs} ms after the path went silent`);
});
