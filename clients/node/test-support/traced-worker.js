// A worker in a process of its own whose tracing only the OTEL_* variables set (test/tracing.test.js):
// it handles the one event TRACED_NAMESPACE holds (one action), stops, and exits. Whatever its
// provider exported is on stdout (console exporter) by then, or the process never printed it.

import { InboxClient, Worker } from '../src/index.js';
import { settledOf } from './helpers.js';

const inbox = new InboxClient({ target: process.env.INBOXD_TARGET });
const worker = new Worker(inbox, {
  namespaces: [process.env.TRACED_NAMESPACE],
  waitMs: 200,
  handler: async (job) => {
    await job.action('notify:v1', async () => ({ externalRef: 'sent' }));
  },
});
const settled = settledOf(worker, process.env.TRACED_KEY);
const running = worker.run();
// A run() that rejects (its OTEL_* settings refused) ends the process with its error.
const outcome = await Promise.race([settled.then((report) => report.outcome), running.then(() => 'stopped')]);
await worker.stop();
await running;
inbox.close();
console.error(`traced-worker: ${outcome}`);
