// A worker process for the server-restart test: says each event it handles, and when it is connected again.

import { InboxClient, Worker } from '../src/index.js';

const client = new InboxClient({ target: process.env.INBOXD_TARGET });
const worker = new Worker(client, {
  namespaces: [process.env.WORKER_NAMESPACE],
  transport: process.env.INBOXD_WORKER_TRANSPORT || 'auto',
  waitMs: 1_000,
  logger: { info: (line) => console.log(`log ${line}`), warn: () => {}, error: () => {} },
  handler: async (job) => {
    console.log(`handled ${job.event.eventKey}`);
  },
});
worker.on('reconnected', ({ failures }) => console.log(`reconnected after ${failures} failures`));
worker.handleSignals();
await worker.run();
client.close();
