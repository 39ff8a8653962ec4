// A worker process for the SIGTERM test: handles one namespace, reports when a
// handler is running, and never finishes a job by itself (it waits for its signal).

import { InboxClient, Worker } from '../src/index.js';

const client = new InboxClient({ target: process.env.INBOXD_TARGET });
const worker = new Worker(client, {
  namespaces: [process.env.WORKER_NAMESPACE],
  transport: process.env.INBOXD_WORKER_TRANSPORT || 'auto',
  leaseMs: 30_000,
  waitMs: 500,
  shutdownGraceMs: 5_000,
  handler: (job) =>
    new Promise((_, reject) => {
      job.signal.addEventListener('abort', () => reject(job.signal.reason));
      console.log(`handling ${job.event.eventKey}`);
    }),
});
worker.on('settled', ({ event, outcome }) => console.log(`settled ${event.eventKey} ${outcome}`));
worker.handleSignals();
await worker.run();
client.close();
