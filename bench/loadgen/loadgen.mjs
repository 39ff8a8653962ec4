// The benchmark's load generator: closed-loop gRPC callers in Node, in one or more worker threads,
// over hand-framed HTTP/2 (node:http2) or @grpc/grpc-js (transport.mjs).
//
// Why Node and not grpc.aio: a Python client spends about as much CPU per call
// as the server it measures, on the same cores, so it measured itself. This
// one must cost less per call than the server; it reports its own CPU
// (process.cpuUsage, all threads) so the page can show that it did.
//
// Usage: node loadgen.mjs '<spec as JSON>'. The contract is loaded from
// protos/ at run time, so an RPC added there needs no stub step here.
// Stdout carries one JSON object per line: {"event":"window_start"} and
// {"event":"window_end"} the moment the measured window opens and closes (the
// caller samples the server's and PostgreSQL's CPU then), and last
// {"event":"result", ...}.
//
// Spec fields: target, transport (h2 | grpc-js), workload (health | accept | accept_batch | duplicate |
// claim_complete | claim_complete_batch | claim_carry | probe_complete_batch, and the stream
// workloads of streams.mjs: accept_stream | work | work_hold | work_idle), callers,
// threads, channels (per thread), warmup_s, duration_s, namespace,
// event_type, payload, rows, prefix, max_events, duplicate_keys; for Work: credit,
// lease_s, idle_ms (a worker with nothing pushed that long stops), max_units (a drain's end).

import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

import { endStreams, holdMain, idleMain, streamStep } from './streams.mjs';
import { describe, grpc, loadServices, openChannel } from './transport.mjs';

const now = () => performance.timeOrigin + performance.now();

function event(spec, key) {
  return {
    namespace: spec.namespace,
    event_key: key,
    event_type: spec.event_type,
    payload: Buffer.from(spec.payload),
  };
}

// One caller's next request: resolves to how many units (rows, events) it did, or null when out of work.
function makeStep(spec, channel, thread, caller, dupKeys, counter) {
  const inbox = (method, request) => channel.call('inbox', method, request);
  let n = 0;
  const streamed = streamStep(spec, channel, thread, caller, () => `${spec.prefix}-${thread}-${caller}-${n++}`, event, counter);
  if (streamed) return streamed;
  const claimRequest = { namespaces: [spec.namespace], max_events: spec.max_events || 1, worker_id: `bench-${thread}-${caller}` };
  switch (spec.workload) {
    case 'health': {
      const request = { service: '' };
      return async () => {
        await channel.call('health', 'Check', request);
        return 1;
      };
    }
    case 'accept':
      return async () => {
        await inbox('Accept', event(spec, `${spec.prefix}-${thread}-${caller}-${n++}`));
        return 1;
      };
    case 'accept_batch':
      return async () => {
        const events = [];
        for (let i = 0; i < spec.rows; i++) events.push(event(spec, `${spec.prefix}-${thread}-${caller}-${n++}`));
        await inbox('AcceptBatch', { events });
        return spec.rows;
      };
    case 'duplicate': {
      n = caller * 7;
      return async () => {
        const key = dupKeys[n++ % dupKeys.length];
        const response = await inbox('Accept', event(spec, key));
        if (response.outcome !== 'ACCEPT_OUTCOME_DUPLICATE') throw new Error(`expected a duplicate, got ${response.outcome}`);
        return 1;
      };
    }
    case 'claim_complete':
      return async () => {
        const { events } = await inbox('Claim', claimRequest);
        if (!events.length) return null;
        await Promise.all(
          events.map((e) =>
            inbox('Complete', { namespace: e.namespace, event_key: e.event_key, claim_token: e.claim_token }),
          ),
        );
        return events.length;
      };
    case 'claim_complete_batch':
      return async () => {
        const { events } = await inbox('Claim', claimRequest);
        if (!events.length) return null;
        const completions = events.map((e) => ({ namespace: e.namespace, event_key: e.event_key, claim_token: e.claim_token }));
        const { results } = await inbox('CompleteBatch', { completions });
        const refused = results.find((r) => Number(r.code) !== 0);
        if (refused) throw new Error(`CompleteBatch refused an item: code ${refused.code}: ${refused.message}`);
        return events.length;
      };
    case 'claim_carry': {
      // Each Claim carries the previous batch's completions: one call per cycle.
      let carried = [];
      return async () => {
        const response = await inbox('Claim', { ...claimRequest, completions: carried });
        const results = response.completion_results || [];
        const refused = results.find((r) => Number(r.code) !== 0);
        if (refused || results.length !== carried.length) {
          throw new Error(`a Claim refused a carried completion: ${refused ? `${refused.code}: ${refused.message}` : 'no result'}`);
        }
        carried = response.events.map((e) => ({ namespace: e.namespace, event_key: e.event_key, claim_token: e.claim_token }));
        return response.events.length || null;
      };
    }
    default:
      throw new Error(`unknown workload ${spec.workload}`);
  }
}

// Keys this thread stores first, so that every Accept in the window is a duplicate.
async function seedDuplicates(spec, channel, thread) {
  const keys = [];
  for (let i = 0; i < spec.duplicate_keys; i++) keys.push(`${spec.prefix}-dup-${thread}-${i}`);
  for (let i = 0; i < keys.length; i += 100) {
    await channel.call('inbox', 'AcceptBatch', { events: keys.slice(i, i + 100).map((k) => event(spec, k)) });
  }
  return keys;
}

async function threadMain() {
  const { spec, thread, callers, counter } = workerData;
  const services = loadServices();
  const channels = Math.max(1, Math.min(spec.channels || 1, callers.length));
  const opened = [];
  for (let c = 0; c < channels; c++) {
    const channel = openChannel(spec, services, `${thread}-${c}`);
    await channel.ready();
    opened.push(channel);
  }
  const dupKeys = spec.workload === 'duplicate' ? await seedDuplicates(spec, opened[0], thread) : [];
  parentPort.postMessage({ type: 'ready' });
  const { windowStart, windowEnd } = await new Promise((resolve) => parentPort.once('message', resolve));

  let ops = 0;
  let units = 0;
  let errors = 0;
  let firstError = '';
  const latencies = [];
  async function run(caller, index) {
    const step = makeStep(spec, opened[index % channels], thread, caller, dupKeys, counter);
    for (;;) {
      const began = now();
      if (began >= windowEnd) return;
      let done;
      try {
        done = await step();
      } catch (err) {
        errors += 1;
        firstError = firstError || describe(err);
        return;
      }
      const answered = now();
      if (done === null) return;
      if (answered >= windowStart && answered <= windowEnd) {
        ops += 1;
        units += done;
        latencies.push(answered - began);
      }
    }
  }
  await Promise.all(callers.map((caller, index) => run(caller, index)));
  const stopped = now();
  parentPort.postMessage({ type: 'done', ops, units, errors, firstError, latencies: Float64Array.from(latencies), stopped });
  for (const channel of opened) {
    endStreams(channel);
    channel.close();
  }
}

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

function percentile(sorted, q) {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

// Whether this server serves CompleteBatch: an empty batch is refused (INVALID_ARGUMENT) by a
// server that has it, and answered UNIMPLEMENTED by one that does not.
async function probeCompleteBatch(spec) {
  const services = loadServices();
  if (!services.Inbox.service.CompleteBatch) {
    emit({ event: 'result', supported: false, reason: 'protos/ has no InboxService.CompleteBatch' });
    return;
  }
  const channel = openChannel({ ...spec, transport: 'grpc-js' }, services, 'probe');
  try {
    await channel.ready();
    await channel.call('inbox', 'CompleteBatch', { completions: [] });
    emit({ event: 'result', supported: true, reason: 'the server answers CompleteBatch' });
  } catch (err) {
    const unimplemented = err.code === grpc.status.UNIMPLEMENTED;
    emit({
      event: 'result',
      supported: !unimplemented,
      reason: unimplemented
        ? 'the server answers CompleteBatch with UNIMPLEMENTED'
        : `the server answers CompleteBatch (an empty batch: ${describe(err)})`,
    });
  } finally {
    channel.close();
  }
}

async function main() {
  const spec = JSON.parse(process.argv[2]);
  if (spec.workload === 'probe_complete_batch') {
    await probeCompleteBatch(spec);
    return;
  }
  if (spec.workload === 'work_hold' || spec.workload === 'work_idle') {
    const services = loadServices();
    const channels = [];
    for (let c = 0; c < Math.max(1, spec.channels || 1); c++) channels.push(openChannel(spec, services, `${spec.workload}-${c}`));
    await Promise.all(channels.map((channel) => channel.ready()));
    await (spec.workload === 'work_hold' ? holdMain(spec, channels[0]) : idleMain(spec, channels));
    return;
  }
  const threads = Math.max(1, Math.min(spec.threads || os.availableParallelism(), spec.callers));
  const workers = [];
  // Units done by every thread: a drain (max_units) stops when the queue it filled is done.
  const counter = new Int32Array(new SharedArrayBuffer(4));
  for (let t = 0; t < threads; t++) {
    const callers = [];
    for (let c = t; c < spec.callers; c += threads) callers.push(c);
    workers.push(new Worker(fileURLToPath(import.meta.url), { workerData: { spec, thread: t, callers, counter } }));
  }
  const failed = new Promise((_, reject) => workers.forEach((w) => w.on('error', reject)));
  const ready = workers.map((w) => new Promise((resolve) => w.once('message', resolve)));
  await Promise.race([Promise.all(ready), failed]);

  const windowStart = now() + 1000 * spec.warmup_s;
  const windowEnd = windowStart + 1000 * spec.duration_s;
  const done = workers.map((w) => new Promise((resolve) => w.on('message', (m) => m.type === 'done' && resolve(m))));
  for (const w of workers) w.postMessage({ windowStart, windowEnd });

  let cpuAtStart = null;
  let cpuUsed = null;
  let closedAt = null;
  const open = () => {
    cpuAtStart = process.cpuUsage();
    emit({ event: 'window_start' });
  };
  const close = (at) => {
    if (closedAt !== null) return;
    if (cpuAtStart === null) open();
    closedAt = at;
    cpuUsed = process.cpuUsage(cpuAtStart);
    emit({ event: 'window_end' });
  };
  const openTimer = setTimeout(open, Math.max(0, windowStart - now()));
  const closeTimer = setTimeout(() => close(windowEnd), Math.max(0, windowEnd - now()));
  // Callers that ran out of work (a drained queue) close the window early.
  const results = await Promise.race([Promise.all(done), failed]);
  const lastStop = Math.max(...results.map((r) => r.stopped));
  if (closedAt === null && lastStop < windowEnd) {
    clearTimeout(closeTimer);
    if (cpuAtStart === null) {
      clearTimeout(openTimer);
      open();
    }
    close(Math.max(windowStart, lastStop));
  }
  await new Promise((resolve) => {
    const wait = () => (closedAt !== null ? resolve() : setTimeout(wait, 5));
    wait();
  });

  const latencies = Float64Array.from(results.flatMap((r) => Array.from(r.latencies))).sort();
  const ops = results.reduce((a, r) => a + r.ops, 0);
  const cpuUs = cpuUsed.user + cpuUsed.system;
  emit({
    event: 'result',
    workload: spec.workload,
    callers: spec.callers,
    threads,
    channels_per_thread: spec.channels || 1,
    transport: spec.transport || 'h2',
    ops,
    units: results.reduce((a, r) => a + r.units, 0),
    seconds: Math.max(0, (closedAt - windowStart) / 1000),
    errors: results.reduce((a, r) => a + r.errors, 0),
    first_error: results.map((r) => r.firstError).find((e) => e) || '',
    p50_ms: percentile(latencies, 0.5),
    p90_ms: percentile(latencies, 0.9),
    p99_ms: percentile(latencies, 0.99),
    max_ms: latencies.length ? latencies[latencies.length - 1] : 0,
    cpu_us: cpuUs,
    cpu_us_per_op: ops ? cpuUs / ops : null,
    node: process.version,
  });
  await Promise.all(workers.map((w) => w.terminate()));
}

if (isMainThread) {
  main().catch((err) => {
    process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  });
} else {
  // A failure surfaces as the Worker's 'error' event in the main thread.
  threadMain();
}
