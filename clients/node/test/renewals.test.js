// Lease renewal when one renewal hangs: the worker's calls go through a proxy (test-support/proxy.js)
// that never answers its first RenewLease, while a rival long-polls inboxd itself for the event.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { client, namespace, needsInboxd, newWorker, settledOf } from '../test-support/helpers.js';
import { proxy } from '../test-support/proxy.js';

const inbox = client();
after(() => inbox.close());

test('a renewal that hangs times out and is retried at once: the lease survives it', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'slow', eventType: 't', payload: {} });
  let held = 0;
  const stalling = await proxy((method, request, forward) => {
    if ((method === 'RenewLease' || method === 'Work.renewLease') && held === 0) {
      held += 1; // no answer, ever: the caller's deadline must end it
      return;
    }
    forward(request);
  });
  // The client's own deadline (10 s here, 30 s by default) is far longer than the lease.
  const viaProxy = client({ target: stalling.target });
  let started;
  const handlerStarted = new Promise((resolve) => {
    started = resolve;
  });
  let release;
  const handlerMayEnd = new Promise((resolve) => {
    release = resolve;
  });
  const worker = newWorker(viaProxy, {
    namespaces: [ns],
    leaseMs: 3_000, // renewed every second; a renewal may take half of that
    waitMs: 200,
    handler: async () => {
      started();
      await handlerMayEnd;
    },
  });
  const renewErrors = [];
  let renewals = 0;
  worker.on('renewError', (err) => renewErrors.push(err.code));
  worker.on('renewed', () => renewals++);
  const settled = settledOf(worker, 'slow');
  const running = worker.run();
  const stolen = [];
  try {
    await handlerStarted;
    const startedAt = Date.now();
    // Until well past the first lease (3 s from the claim), with three renewals after the hung one.
    while (stolen.length === 0 && (renewals < 3 || Date.now() - startedAt < 3_500) && Date.now() - startedAt < 15_000) {
      const { events } = await inbox.claim({ namespaces: [ns], waitMs: 300, leaseMs: 30_000 });
      stolen.push(...events);
    }
    release();
    const report = await settled;
    assert.deepEqual(stolen, [], 'a rival claimed the event: its lease had lapsed');
    assert.equal(report.outcome, 'completed');
    assert.equal(held, 1);
    assert.ok(renewErrors.length >= 1, 'the hung renewal ended in an error');
    assert.ok(renewals >= 3, `${renewals} renewals`);
  } finally {
    release();
    for (const event of stolen) await inbox.release(event);
    await worker.stop();
    await running;
    viaProxy.close();
    stalling.close();
  }
});
