// The Node peers of `make bench-peers`: pg-boss and graphile-worker, each in its own Node process, driven
// from bench/node_peers.py over the same protocol as bench/loadgen/loadgen.mjs: stdout carries one JSON
// object a line, {"event":"window_start"} and {"event":"window_end"} the moment the measured window opens
// and closes (the caller samples PostgreSQL's CPU then), and last {"event":"result", ...}.
//
// Usage: node peer.mjs '<spec as JSON>'. Spec fields: system (pg-boss | graphile-worker), workload
// (setup | enqueue | fill | drain | latency), url, payload (a JSON text: the jobs' data), callers, rows,
// warmup_s, duration_s (enqueue); jobs (fill, drain); workers, batch (drain); rounds, warm, jitter_ms
// (latency).
//
// Each system is used its own fastest documented way (docs/benchmarks.md says why):
// - pg-boss: `send` (one job) and `insert` (many) from a pool of one connection per caller; the drain is
//   `workers` loops of `fetch` with batchSize `batch`, then one `complete` of the batch's ids; latency is
//   `work` polling at its minimum interval (pg-boss has no LISTEN);
// - graphile-worker: WorkerUtils `addJob` and `addJobs`; the drain and latency are its runner with
//   `workers` concurrent jobs, its local queue (one fetch locks up to workers × batch jobs) and batched
//   completions, woken by LISTEN as it ships.

import { SYSTEMS } from './systems.mjs';

const now = () => performance.now();

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

function percentile(sorted, q) {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

function describe(err) {
  return `${err && err.message ? err.message : String(err)}`.slice(0, 300);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));


// ---- workloads ----

// Closed-loop callers: each sends its next enqueue when the last is answered (bench/loop.py's rule).
async function enqueue(spec, system) {
  const producer = await system.producer(spec, spec.callers);
  const rows = spec.rows || 1;
  const step = rows === 1 ? () => producer.one() : () => producer.many(rows);
  const windowStart = now() + 1000 * spec.warmup_s;
  const windowEnd = windowStart + 1000 * spec.duration_s;
  let ops = 0;
  let errors = 0;
  let firstError = '';
  const latencies = [];
  let cpuAtStart = null;
  const opened = setTimeout(() => {
    cpuAtStart = process.cpuUsage();
    emit({ event: 'window_start' });
  }, Math.max(0, windowStart - now()));
  const caller = async () => {
    for (;;) {
      const began = now();
      if (began >= windowEnd) return;
      try {
        await step();
      } catch (err) {
        errors += 1;
        firstError = firstError || describe(err);
        return;
      }
      const answered = now();
      if (answered >= windowStart && answered <= windowEnd) {
        ops += 1;
        latencies.push(answered - began);
      }
    }
  };
  await Promise.all(Array.from({ length: spec.callers }, caller));
  clearTimeout(opened);
  if (cpuAtStart === null) {
    cpuAtStart = process.cpuUsage();
    emit({ event: 'window_start' });
  }
  const cpu = process.cpuUsage(cpuAtStart);
  emit({ event: 'window_end' });
  await producer.close();
  latencies.sort((a, b) => a - b);
  return {
    ops,
    units: ops * rows,
    seconds: spec.duration_s,
    errors,
    first_error: firstError,
    ...summary(latencies),
    cpu_us: cpu.user + cpu.system,
    cpu_us_per_op: ops ? (cpu.user + cpu.system) / ops : null,
  };
}

// `jobs` jobs enqueued in batches of 1000 (its batch enqueue), one caller: not a measured figure.
async function fill(spec, system) {
  const producer = await system.producer(spec, 2);
  const began = now();
  for (let left = spec.jobs; left > 0; left -= 1000) await producer.many(Math.min(1000, left));
  await producer.close();
  return { ops: 1, units: spec.jobs, seconds: (now() - began) / 1000, errors: 0, first_error: '' };
}

// The workers start with the window; it closes when the last job is done and its completion committed.
async function drain(spec, system) {
  let done = 0;
  const drainer = await system.drain(spec, () => {
    done += 1;
  });
  emit({ event: 'window_start' });
  const cpuAtStart = process.cpuUsage();
  const began = now();
  try {
    await drainer.run();
  } finally {
    await drainer.close();
  }
  const seconds = (now() - began) / 1000;
  const cpu = process.cpuUsage(cpuAtStart);
  emit({ event: 'window_end' });
  return { ops: done, units: done, seconds, errors: 0, first_error: '', cpu_us: cpu.user + cpu.system };
}

// Rounds of: an idle queue, one job enqueued, the time from the enqueue call until a waiting worker's
// handler starts it.
async function latency(spec, system) {
  const started = [];
  let wake = null;
  const waiter = await system.waiting(spec, () => {
    started.push(now());
    if (wake) wake();
  });
  const producer = await system.producer(spec, 1);
  const fromAnswer = [];
  const fromCall = [];
  emit({ event: 'window_start' });
  try {
    // The first `warm` rounds are not measured: they pay for connections and plans.
    for (let round = 0; round < (spec.warm || 0) + spec.rounds; round++) {
      // A varying pause, so that a polling worker is caught at every phase of its interval.
      await sleep(20 + Math.random() * (spec.jitter_ms || 20));
      started.length = 0;
      const arrived = new Promise((resolve) => {
        wake = resolve;
      });
      const began = now();
      await producer.one();
      const answered = now();
      await Promise.race([arrived, sleep(10_000).then(() => Promise.reject(new Error('no worker started the job in 10 s')))]);
      if (round < (spec.warm || 0)) continue;
      fromAnswer.push(started[0] - answered);
      fromCall.push(started[0] - began);
    }
  } finally {
    emit({ event: 'window_end' });
    await producer.close();
    await waiter.close();
  }
  fromAnswer.sort((a, b) => a - b);
  fromCall.sort((a, b) => a - b);
  // From the enqueue call: a worker of the same process can start the job before the call's answer is read.
  return {
    ops: fromCall.length,
    units: fromCall.length,
    seconds: 0,
    errors: 0,
    first_error: '',
    ...summary(fromCall),
    answer_p50_ms: percentile(fromAnswer, 0.5),
    answer_p99_ms: percentile(fromAnswer, 0.99),
  };
}

function summary(sorted) {
  return {
    p50_ms: percentile(sorted, 0.5),
    p90_ms: percentile(sorted, 0.9),
    p99_ms: percentile(sorted, 0.99),
    max_ms: sorted.length ? sorted[sorted.length - 1] : 0,
  };
}

// The benchmark's cluster names its password file in the URL (libpq's `passfile`); node-postgres reads the
// file named by PGPASSFILE instead, so the parameter moves there.
function withoutPassfile(url) {
  const found = /[?&]passfile=([^&]*)/.exec(url);
  if (!found) return { url, passfile: null };
  const after = url.slice(found.index + found[0].length);
  // The first parameter's `?` stays for the next one.
  const rest = found[0][0] === '?' && after.startsWith('&') ? `?${after.slice(1)}` : after;
  return { url: url.slice(0, found.index) + rest, passfile: decodeURIComponent(found[1]) };
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const { url, passfile } = withoutPassfile(spec.url);
  spec.url = url;
  if (passfile) process.env.PGPASSFILE = passfile;
  const system = SYSTEMS[spec.system];
  if (!system) throw new Error(`unknown system ${spec.system}`);
  const workloads = { setup: async () => (await system.setup(spec), { ops: 0, units: 0, seconds: 0, errors: 0 }), enqueue, fill, drain, latency };
  const workload = workloads[spec.workload];
  if (!workload) throw new Error(`unknown workload ${spec.workload}`);
  const found = await workload(spec, system);
  emit({
    event: 'result',
    workload: spec.workload,
    system: spec.system,
    version: system.version(),
    callers: spec.callers || 1,
    threads: 1,
    channels_per_thread: spec.callers || 1,
    transport: spec.system,
    first_error: '',
    p50_ms: 0,
    p90_ms: 0,
    p99_ms: 0,
    ...found,
    node: process.version,
  });
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  },
);
