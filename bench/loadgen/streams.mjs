// The load generator's stream workloads (issue 27): AcceptStream and Work, over a channel's `stream()`.
//
// accept_stream: the callers of one connection share one AcceptStream, each
//   item answered by its sequence (one stream per connection, as edges hold them).
// work: each caller is a worker with its own Work stream: it subscribes with
//   `credit`, and each step completes what was pushed in one complete_batch
//   on the stream, the same message giving that much credit back.
// work_hold and work_idle (modes of their own, not closed loops): a worker
//   that takes events and never finishes them (the recovery figure SIGKILLs
//   it), and thousands of subscribed streams with nothing to claim.

import { describe } from './transport.mjs';

class ItemError extends Error {
  constructor(status) {
    super(`${status.message} (code ${status.code})`);
    this.code = status.code;
    this.details = status.message;
  }
}

function completionOf(e) {
  return { namespace: e.namespace, event_key: e.event_key, claim_token: e.claim_token };
}

// Calls answered by sequence on one stream: `call(fields)` resolves to the answer with its sequence.
// `answerOf(message)` is the answer a message carries, or undefined for one the server pushed.
class Sequenced {
  constructor(channel, method, answerOf, onPushed) {
    this.next = 1;
    this.waiting = new Map();
    this.ended = null;
    this.onEnd = null;
    this.stream = channel.stream(
      'inbox',
      method,
      (m) => {
        const answer = answerOf(m);
        const found = answer && this.waiting.get(String(answer.sequence));
        if (found) {
          this.waiting.delete(String(answer.sequence));
          found.resolve(answer);
        } else if (!answer && onPushed) {
          onPushed(m);
        }
      },
      (err) => this.end(err || new Error('the stream ended OK')),
    );
    (channel.streams ||= []).push(this.stream);
  }

  end(err) {
    this.ended = err;
    for (const { reject } of this.waiting.values()) reject(err);
    this.waiting.clear();
    if (this.onEnd) this.onEnd(err);
  }

  // `fields` is the rest of the request: the call's oneof field, credit.
  call(fields) {
    if (this.ended) return Promise.reject(this.ended);
    const sequence = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(String(sequence), { resolve, reject });
      this.stream.write({ sequence, ...fields });
    });
  }
}

function acceptStep(spec, channel, key, event) {
  channel.acceptStream ||= new Sequenced(channel, 'AcceptStream', (m) => m);
  const stream = channel.acceptStream;
  return async () => {
    const answer = await stream.call({ accept: event(spec, key()) });
    if (answer.result === 'error') throw new ItemError(answer.error);
    return 1;
  };
}

// A Work stream's pushed events, queued until a step takes them all.
class Worker {
  constructor(spec, channel, id) {
    this.queue = [];
    this.pushedOnce = false;
    this.wake = null;
    this.subscribed = new Promise((resolve, reject) => {
      const answerOf = (m) => (m.response === 'result' ? m.result : undefined);
      this.stream = new Sequenced(channel, 'Work', answerOf, (m) => {
        if (m.response === 'subscribed') resolve();
        else if (m.response === 'events') this.push(m.events.events);
      });
      this.stream.onEnd = (err) => {
        reject(err);
        this.push([]);
      };
    });
    this.stream.stream.write({
      credit: spec.credit ?? 10,
      subscribe: { namespaces: [spec.namespace], worker_id: id, lease: { seconds: spec.lease_s || 30 } },
    });
  }

  push(events) {
    if (events.length) this.pushedOnce = true;
    this.queue.push(...events);
    if (this.wake) this.wake();
  }

  // Everything pushed so far; [] after `idleMs` with nothing pushed (or when the stream ended).
  async take(idleMs) {
    if (!this.queue.length && !this.stream.ended) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, idleMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
    if (this.stream.ended && !this.queue.length) throw this.stream.ended;
    return this.queue.splice(0);
  }
}

// How long a worker waits for its first push before it stops: far longer than any window.
const FIRST_PUSH_MS = 60_000;

// Units done by every thread, for a drain that stops at `max_units` (see workStep).
let shared = null;
const idleWorkers = new Set();

function workStep(spec, channel, id) {
  const worker = new Worker(spec, channel, id);
  const total = () => (shared ? Atomics.load(shared, 0) : 0);
  return async () => {
    await worker.subscribed;
    if (spec.max_units && total() >= spec.max_units) return null;
    idleWorkers.add(worker);
    // Idle means "the work ran out" only once some came: a cold server's first pushes (16 streams'
    // first claims at once, each statement planned on a fresh connection) took over 500 ms, and
    // 15 of 16 workers stopped before their first event; the Work figure measured one worker.
    const events = await worker.take(worker.pushedOnce ? spec.idle_ms || 1000 : FIRST_PUSH_MS);
    idleWorkers.delete(worker);
    if (!events.length) return null;
    const answer = await worker.stream.call({
      credit: events.length,
      complete_batch: { completions: events.map(completionOf) },
    });
    if (answer.result === 'error') throw new ItemError(answer.error);
    const refused = answer.complete_batch.results.find((r) => Number(r.code) !== 0);
    if (refused) throw new Error(`complete_batch on the stream refused an item: code ${refused.code}: ${refused.message}`);
    // Only a drain has an end (max_units): in a closed loop (max_units 0) this woke every idle
    // worker at the first completion, and each stopped: the Work figure measured one worker of 16.
    if (spec.max_units && shared && Atomics.add(shared, 0, events.length) + events.length >= spec.max_units) {
      // The drain is done: the workers waiting for more stop now, not after their idle wait.
      for (const w of idleWorkers) w.wake && w.wake();
    }
    return events.length;
  };
}

// The stream workloads' steps, or undefined for a workload that is not one of them.
export function streamStep(spec, channel, thread, caller, key, event, counter) {
  shared = counter || null;
  if (spec.workload === 'accept_stream') return acceptStep(spec, channel, key, event);
  if (spec.workload === 'work') return workStep(spec, channel, `bench-${thread}-${caller}`);
  return undefined;
}

// Ends a channel's streams before the channel closes (a session waits for its open streams).
export function endStreams(channel) {
  for (const stream of channel.streams || []) stream.end();
}

function emit(obj) {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

// work_hold: takes `credit` events, says which, then holds them until killed.
export async function holdMain(spec, channel) {
  const worker = new Worker(spec, channel, 'bench-holder');
  await worker.subscribed;
  const held = [];
  while (held.length < (spec.credit ?? 10)) held.push(...(await worker.take(60_000)));
  emit({ event: 'held', keys: held.map((e) => e.event_key) });
  setInterval(() => {}, 60_000);
}

// work_idle: `callers` Work streams over the channels, credit given, nothing to claim; ends when stdin closes.
export async function idleMain(spec, channels) {
  let pushed = 0;
  let ended = 0;
  let firstError = '';
  const workers = [];
  for (let i = 0; i < spec.callers; i++) {
    const worker = new Worker(spec, channels[i % channels.length], `bench-idle-${i}`);
    worker.push = (events) => {
      pushed += events.length;
    };
    const onEnd = worker.stream.onEnd;
    worker.stream.onEnd = (err) => {
      onEnd(err);
      ended += 1;
      firstError = firstError || describe(err);
    };
    workers.push(worker.subscribed);
  }
  const answered = await Promise.allSettled(workers);
  emit({ event: 'subscribed', streams: answered.filter((a) => a.status === 'fulfilled').length });
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.on('end', resolve));
  emit({ event: 'result', pushed, ended, first_error: firstError });
  process.exit(0);
}
