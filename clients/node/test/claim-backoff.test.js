// How soon and how much a worker claims (src/claim_backoff.js): the pause of an idle worker that
// does not long-poll, with the clock passed in; and the smaller batch after a Claim's answer was
// too big to receive, against a live inboxd.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import grpc from '@grpc/grpc-js';

import { ClaimBackoff, IDLE_BACKOFF_MAX_MS, IDLE_BACKOFF_MIN_MS } from '../src/claim_backoff.js';
import { Worker } from '../src/index.js';
import { client, namespace, needsInboxd, poll } from '../test-support/helpers.js';

const inbox = client();
after(() => inbox.close());

test('an empty answer to a Claim that does not wait pauses the next one, doubling up to a cap', () => {
  const backoff = new ClaimBackoff({ waitMs: 0, maxEvents: 100 });
  assert.equal(backoff.delayMs(0), 0, 'the first Claim goes at once');
  const pauses = [];
  let now = 0;
  for (let i = 0; i < 8; i++) {
    backoff.answered([], now);
    pauses.push(backoff.delayMs(now));
    now += backoff.delayMs(now);
  }
  assert.equal(pauses[0], IDLE_BACKOFF_MIN_MS);
  assert.deepEqual(pauses.slice(0, 3), [IDLE_BACKOFF_MIN_MS, 2 * IDLE_BACKOFF_MIN_MS, 4 * IDLE_BACKOFF_MIN_MS]);
  assert.equal(pauses.at(-1), IDLE_BACKOFF_MAX_MS);
  assert.ok(pauses.every((ms) => ms <= IDLE_BACKOFF_MAX_MS));
  assert.equal(backoff.delayMs(now + 10), 0, 'once the pause has passed, the Claim goes');
});

test('work ends the pause: the next empty answer starts again from the shortest', () => {
  const backoff = new ClaimBackoff({ waitMs: 0, maxEvents: 100 });
  for (let i = 0; i < 6; i++) backoff.answered([], 0);
  backoff.answered([{ eventKey: 'k' }], 0);
  assert.equal(backoff.delayMs(0), 0);
  backoff.answered([], 0);
  assert.equal(backoff.delayMs(0), IDLE_BACKOFF_MIN_MS);
});

test('a long-poll already waited at the server: it claims again at once', () => {
  const backoff = new ClaimBackoff({ waitMs: 5_000, maxEvents: 100 });
  for (let i = 0; i < 6; i++) backoff.answered([], 0);
  assert.equal(backoff.delayMs(0), 0);
});

test('RESOURCE_EXHAUSTED halves the batch, down to one; other errors leave it', async () => {
  const backoff = new ClaimBackoff({ waitMs: 0, maxEvents: 6 });
  const tooBig = { code: grpc.status.RESOURCE_EXHAUSTED, details: 'Received message larger than max' };
  const warned = [];
  const onWarning = (warning) => warned.push(warning.code);
  process.on('warning', onWarning);
  try {
    assert.equal(backoff.refused({ code: grpc.status.UNAVAILABLE }), false);
    assert.equal(backoff.batch(10), 6);
    assert.equal(backoff.refused(tooBig), true);
    assert.equal(backoff.batch(10), 3);
    assert.equal(backoff.batch(2), 2, 'never more than the free slots');
    assert.equal(backoff.refused(tooBig), true, 'halves what it asked for');
    assert.equal(backoff.batch(10), 1);
    assert.equal(backoff.refused(tooBig), false, 'one event cannot be split');
    assert.equal(backoff.batch(10), 1);
  } finally {
    await new Promise((resolve) => setImmediate(resolve));
    process.off('warning', onWarning);
  }
  assert.deepEqual(warned, ['INBOXD_CLAIM_TOO_LARGE', 'INBOXD_CLAIM_TOO_LARGE', 'INBOXD_CLAIM_TOO_LARGE']);
});

test('a Claim answer over 4 MiB reaches a client whose channel options set no receive limit', needsInboxd, async () => {
  const ns = namespace();
  const big = { data: 'x'.repeat(900 * 1024) };
  const keys = ['b1', 'b2', 'b3', 'b4', 'b5'];
  for (const eventKey of keys) await inbox.accept({ namespace: ns, eventKey, eventType: 't', payload: big });
  // grpc-js alone refuses anything over 4 MiB; options of the caller's own must not bring that back.
  const plain = client({ channelOptions: { 'grpc.primary_user_agent': 'inboxd-node-test' } });
  const seen = [];
  try {
    while (seen.length < keys.length) {
      const { events } = await plain.claim({ namespaces: [ns], maxEvents: keys.length, waitMs: 1_000 });
      assert.ok(events.length > 0, `got ${seen.length} of ${keys.length} events, then nothing`);
      for (const event of events) {
        assert.ok(event.payload.length > 900 * 1024);
        seen.push(event);
      }
    }
  } finally {
    for (const event of seen) await inbox.complete(event);
    plain.close();
  }
  assert.deepEqual(seen.map((e) => e.eventKey).sort(), keys);
});

test('a worker whose Claim answer is too big to receive halves its batch and runs every event', needsInboxd, async () => {
  const ns = namespace();
  const keys = ['k1', 'k2', 'k3', 'k4', 'k5', 'k6'];
  // Six events of 24 KiB through a channel that receives 64 KiB: six refused, three refused, one fits.
  const payload = { data: 'y'.repeat(24 * 1024) };
  for (const eventKey of keys) await inbox.accept({ namespace: ns, eventKey, eventType: 't', payload });
  const small = client({ channelOptions: { 'grpc.max_receive_message_length': 64 * 1024 } });
  const ran = new Set();
  const worker = new Worker(small, {
    transport: 'claim',
    namespaces: [ns],
    concurrency: 6,
    // The refused Claims leased their events all the same: they come back when these leases end.
    leaseMs: 1_000,
    waitMs: 300,
    claimRetryMs: 50,
    handler: async (job) => {
      ran.add(job.event.eventKey);
    },
  });
  const warned = [];
  const onWarning = (warning) => warning.code === 'INBOXD_CLAIM_TOO_LARGE' && warned.push(warning.message);
  process.on('warning', onWarning);
  const completed = new Set();
  worker.on('settled', ({ event, outcome }) => outcome === 'completed' && completed.add(event.eventKey));
  const running = worker.run();
  try {
    await poll(() => (completed.size === keys.length ? true : undefined), { withinMs: 30_000 });
  } finally {
    await worker.stop();
    await running;
    small.close();
    process.off('warning', onWarning);
  }
  assert.deepEqual([...ran].sort(), keys);
  assert.equal(worker.loop.claims.maxEvents, 1);
  assert.ok(warned.length >= 2, `warnings: ${JSON.stringify(warned)}`);
  assert.match(warned[0], /claiming at most 3 at a time instead of 6/);
});
