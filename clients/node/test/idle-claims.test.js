// An idle worker that does not long-poll (waitMs 0) claims a few times a second, not in a loop.
//
// tests/node/test_node_idle_claims.py runs this file alone and counts the Claims at the server too.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Worker } from '../src/index.js';
import { countingClient, namespace, needsInboxd, settledOf } from '../test-support/helpers.js';

/** How long the worker stays idle: the Claims it sends in it are counted. */
const IDLE_MS = 2_000;

test('an idle worker with waitMs 0 backs off between empty Claims, and still takes work at once', needsInboxd, async () => {
  const ns = namespace();
  const counting = countingClient();
  let claims = 0;
  const claim = counting.claim;
  counting.claim = (request) => {
    claims += 1;
    return claim(request);
  };
  const worker = new Worker(counting, { transport: 'claim', namespaces: [ns], waitMs: 0, handler: async () => {} });
  const running = worker.run();
  try {
    await sleep(IDLE_MS);
    // 50 ms doubling to a 1 s cap: 6 Claims in 2 s. Without a pause it was over a thousand.
    assert.ok(claims <= 10, `${claims} Claims in ${IDLE_MS} ms of idling`);
    const settled = settledOf(worker, 'k');
    const acceptedAt = Date.now();
    await counting.accept({ namespace: ns, eventKey: 'k', eventType: 't', payload: {} });
    const report = await settled;
    assert.equal(report.outcome, 'completed');
    // It waits out at most one capped pause (1 s) before its next Claim finds the event.
    assert.ok(Date.now() - acceptedAt < 2_500, `the event waited ${Date.now() - acceptedAt} ms`);
  } finally {
    await worker.stop();
    await running;
    counting.close();
  }
});
