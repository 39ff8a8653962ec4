// A Node worker process for the end-to-end trace: one namespace, one action per event, stops after COUNT.
//   node tests/tracing_e2e/node_worker.mjs TARGET NAMESPACE COUNT
// Tracing is the runtime's, turned on by the OTEL_* variables the test sets; nothing here knows of it.
import { InboxClient, Worker } from '../../clients/node/src/index.js';

const [target, namespace, countText] = process.argv.slice(2);
const count = Number(countText);
let handled = 0;
let worker;
worker = new Worker(new InboxClient({ target }), {
  namespaces: [namespace],
  handler: async (job) => {
    await job.action('send-receipt:v1', async ({ idempotencyKey }) => `receipt-${idempotencyKey.slice(0, 8)}`);
    handled += 1;
    if (handled >= count) setImmediate(() => worker.stop());
  },
});
await worker.run();
console.log(`handled ${handled}`);
