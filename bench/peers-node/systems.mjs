// The Node peers themselves, for peer.mjs: pg-boss and graphile-worker behind one shape each, used their
// own fastest documented way (peer.mjs's header and bench/node_peers.py's HOW say which and why):
// setup(spec), producer(spec, callers) -> {one, many(n), close}, drain(spec, onJob) -> {run, close},
// waiting(spec, onJob) -> {close}, version().

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const QUEUE = 'bench_noop';

function describe(err) {
  return `${err && err.message ? err.message : String(err)}`.slice(0, 300);
}

// ---- pg-boss ----

async function bossOf(spec, max, extra = {}) {
  const PgBoss = require('pg-boss');
  // Only the setup process migrates and supervises: the others are clients of the same schema, as in
  // pg-boss's docs for several processes (supervise, schedule and migrate off).
  const boss = new PgBoss({
    connectionString: spec.url,
    max,
    supervise: false,
    schedule: false,
    migrate: false,
    ...extra,
  });
  boss.on('error', (err) => process.stderr.write(`pg-boss: ${describe(err)}\n`));
  await boss.start();
  return boss;
}

const pgBoss = {
  version: () => require('pg-boss/package.json').version,
  async setup(spec) {
    const boss = await bossOf(spec, 2, { migrate: true });
    if (!(await boss.getQueue(QUEUE))) await boss.createQueue(QUEUE, { policy: 'standard' });
    await boss.stop({ graceful: false, wait: true });
  },
  async producer(spec, callers) {
    const boss = await bossOf(spec, callers);
    const data = JSON.parse(spec.payload);
    return {
      one: () => boss.send(QUEUE, data),
      many: (n) => boss.insert(Array.from({ length: n }, () => ({ name: QUEUE, data }))),
      close: () => boss.stop({ graceful: false, wait: true }),
    };
  },
  async drain(spec, onJob) {
    const boss = await bossOf(spec, spec.workers);
    let stop = false;
    const loop = async () => {
      while (!stop) {
        const jobs = await boss.fetch(QUEUE, { batchSize: spec.batch });
        if (!jobs.length) return;
        for (const job of jobs) onJob(job);
        await boss.complete(QUEUE, jobs.map((j) => j.id));
      }
    };
    return {
      run: () => Promise.all(Array.from({ length: spec.workers }, loop)),
      close: async () => {
        stop = true;
        await boss.stop({ graceful: false, wait: true });
      },
    };
  },
  async waiting(spec, onJob) {
    const boss = await bossOf(spec, 2);
    // Its shortest polling interval: pg-boss 10 refuses less than 0.5 s.
    await boss.work(QUEUE, { batchSize: 1, pollingIntervalSeconds: 0.5 }, async (jobs) => {
      for (const job of jobs) onJob(job);
    });
    // Graceful: the last job's completion is committed before the process ends.
    return { close: () => boss.stop({ graceful: true, wait: true }) };
  },
};

// ---- graphile-worker ----

function workerPreset(spec, extra = {}) {
  return { worker: { connectionString: spec.url, ...extra } };
}

const graphile = {
  version: () => require('graphile-worker/package.json').version,
  async setup(spec) {
    const { runMigrations } = require('graphile-worker');
    await runMigrations({ preset: workerPreset(spec), logger: quietLogger() });
  },
  async producer(spec, callers) {
    const { makeWorkerUtils } = require('graphile-worker');
    const utils = await makeWorkerUtils({ preset: workerPreset(spec, { maxPoolSize: callers }), logger: quietLogger() });
    const data = JSON.parse(spec.payload);
    return {
      one: () => utils.addJob(QUEUE, data),
      many: (n) => utils.addJobs(Array.from({ length: n }, () => ({ identifier: QUEUE, payload: data }))),
      close: () => utils.release(),
    };
  },
  async runner(spec, onJob, concurrency, localQueue) {
    const { run } = require('graphile-worker');
    let listening;
    const listened = new Promise((resolve) => {
      listening = resolve;
    });
    const { EventEmitter } = await import('node:events');
    const events = new EventEmitter();
    events.on('pool:listen:success', () => listening());
    const runner = await run({
      preset: workerPreset(spec, {
        concurrentJobs: concurrency,
        // The docs' advice: 10 or concurrentJobs + 2, whichever is larger.
        maxPoolSize: Math.max(10, concurrency + 2),
        // The docs' performance settings: a local queue, and completions batched (0: the next tick).
        ...(localQueue > 1 ? { localQueue: { size: localQueue } } : {}),
        completeJobBatchDelay: 0,
        failJobBatchDelay: 0,
      }),
      events,
      logger: quietLogger(),
      noHandleSignals: true,
      taskList: { [QUEUE]: async (payload, helpers) => onJob(helpers.job) },
    });
    await listened;
    return { close: () => runner.stop() };
  },
  async drain(spec, onJob) {
    let runner;
    let finish;
    const finished = new Promise((resolve) => {
      finish = resolve;
    });
    return {
      run: async () => {
        // Its workers stop when the jobs enqueued are done: the caller says how many (spec.jobs).
        let seen = 0;
        runner = await graphile.runner(
          spec,
          (job) => {
            onJob(job);
            seen += 1;
            if (seen >= spec.jobs) finish();
          },
          spec.workers,
          spec.workers * spec.batch,
        );
        await finished;
        // Completions are batched: they are committed once the runner stops.
        await runner.close();
        runner = null;
      },
      close: async () => {
        if (runner) await runner.close();
      },
    };
  },
  async waiting(spec, onJob) {
    // One waiting worker, woken by LISTEN; no local queue (a batch of one).
    return graphile.runner(spec, onJob, 1, 0);
  },
};

function quietLogger() {
  const { Logger } = require('graphile-worker');
  return new Logger(() => (level, message) => {
    if (level === 'error') process.stderr.write(`graphile-worker: ${message}\n`);
  });
}

export const SYSTEMS = { 'pg-boss': pgBoss, 'graphile-worker': graphile };
