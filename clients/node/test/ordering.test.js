// Ordering keys as a handler sees them: the key, the event's revision and the key's applied revision.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { client, namespace, needsInboxd, newWorker, poll } from '../test-support/helpers.js';

const inbox = client();
after(() => inbox.close());

test('a job carries its ordering key, revision and the applied revision; revisions come out in order', needsInboxd, async () => {
  const ns = namespace();
  // Accepted out of order: handed out one at a time, by revision.
  for (const revision of [2, 1]) {
    await inbox.accept({ namespace: ns, eventKey: `v${revision}`, eventType: 't', payload: {}, orderingKey: 'customer-7', revision });
  }
  const seen = [];
  const worker = newWorker(inbox, {
    namespaces: [ns],
    waitMs: 200,
    concurrency: 2,
    handler: async (job) => {
      // The rule a worker applies: never let an older revision overwrite a newer one.
      if (job.stale) return { ignored: `revision ${job.revision} is at or below applied ${job.appliedRevision}` };
      seen.push([job.event.eventKey, job.orderingKey, job.revision, job.appliedRevision, job.stale]);
    },
  });
  const running = worker.run();
  await poll(() => (seen.length >= 2 ? true : undefined), { withinMs: 10_000 });
  await worker.stop();
  await running;
  assert.deepEqual(seen, [
    ['v1', 'customer-7', 1n, 0n, false],
    ['v2', 'customer-7', 2n, 1n, false],
  ]);
});
