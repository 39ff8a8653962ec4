// The promise-based client against a live inboxd, and its bearer token against a fake server.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import grpc from '@grpc/grpc-js';

import { CompleteItemError, compareInt64, InboxClient, loadInboxd, status } from '../src/index.js';
import { client, namespace, needsInboxd, poll } from '../test-support/helpers.js';

const inbox = client();
after(() => inbox.close());

test('accept answers ACCEPTED, then DUPLICATE for an equal payload and CONFLICT for another', needsInboxd, async () => {
  const ns = namespace();
  const event = { namespace: ns, eventKey: 'order-1', eventType: 'order.paid', payload: { id: 1, total: 5 } };
  assert.equal((await inbox.accept(event)).outcome, 'ACCEPT_OUTCOME_ACCEPTED');
  // Key order does not count: inboxd compares JSON values.
  const reordered = { ...event, payload: '{"total": 5, "id": 1}', metadata: { delivery_id: 'second' } };
  assert.equal((await inbox.accept(reordered)).outcome, 'ACCEPT_OUTCOME_DUPLICATE');
  assert.equal((await inbox.accept({ ...event, payload: { id: 1, total: 6 } })).outcome, 'ACCEPT_OUTCOME_CONFLICT');
});

test('claim hands out the payload, a claim token and an int64 fencing token as a string', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'k', eventType: 't', payload: { hello: 'world' } });
  const { events } = await inbox.claim({ namespaces: [ns], leaseMs: 5_000 });
  assert.equal(events.length, 1);
  const [event] = events;
  assert.deepEqual(JSON.parse(event.payload.toString()), { hello: 'world' });
  assert.equal(event.attempt, 1);
  assert.ok(event.claimToken);
  assert.match(event.fencingToken, /^[1-9]\d*$/);
  await inbox.complete({ namespace: ns, eventKey: 'k', claimToken: event.claimToken });
});

test('a superseded claim gets ABORTED on Complete and RenewLease', needsInboxd, async () => {
  const ns = namespace();
  const other = client();
  try {
    await inbox.accept({ namespace: ns, eventKey: 'slow', eventType: 't', payload: {} });
    const [first] = (await inbox.claim({ namespaces: [ns], leaseMs: 1_000 })).events;
    // Bounded polling until the 1 s lease lapses and the second client takes the event over.
    const second = await poll(
      async () => (await other.claim({ namespaces: [ns], leaseMs: 30_000, waitMs: 500 })).events[0],
      { withinMs: 15_000 },
    );
    assert.equal(second.eventKey, 'slow');
    assert.equal(compareInt64(second.fencingToken, first.fencingToken), 1, 'the takeover has a higher fence');
    const stale = { namespace: ns, eventKey: 'slow', claimToken: first.claimToken };
    await assert.rejects(inbox.complete(stale), (err) => err.code === status.ABORTED);
    await assert.rejects(inbox.renewLease({ ...stale, leaseMs: 5_000 }), (err) => err.code === status.ABORTED);
    await other.complete({ namespace: ns, eventKey: 'slow', claimToken: second.claimToken });
  } finally {
    other.close();
  }
});

test('the bearer token travels as authorization metadata on every call', async () => {
  const seen = [];
  const server = new grpc.Server();
  server.addService(loadInboxd().InboxService.service, {
    Accept(call, callback) {
      seen.push(call.metadata.get('authorization'));
      callback(null, { outcome: 'ACCEPT_OUTCOME_ACCEPTED' });
    },
  });
  const port = await new Promise((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    );
  });
  const withToken = new InboxClient({ target: `127.0.0.1:${port}`, token: 's3cret' });
  const without = new InboxClient({ target: `127.0.0.1:${port}`, token: '' });
  try {
    const event = { namespace: 'n', eventKey: 'k', eventType: 't' };
    assert.equal((await withToken.accept(event)).outcome, 'ACCEPT_OUTCOME_ACCEPTED');
    await without.accept(event);
    assert.deepEqual(seen, [['Bearer s3cret'], []]);
  } finally {
    withToken.close();
    without.close();
    server.forceShutdown();
  }
});

// CompleteBatch: each item judged alone.

async function claimAll(ns, keys) {
  for (const eventKey of keys) await inbox.accept({ namespace: ns, eventKey, eventType: 't', payload: { eventKey } });
  const { events } = await inbox.claim({ namespaces: [ns], maxEvents: keys.length, leaseMs: 30_000 });
  assert.equal(events.length, keys.length);
  return Object.fromEntries(events.map((event) => [event.eventKey, event]));
}

test('a claim carries completions: committed first, one outcome each', needsInboxd, async () => {
  const ns = namespace();
  const events = await claimAll(ns, ['done', 'stale']);
  await inbox.accept({ namespace: ns, eventKey: 'next', eventType: 'test.event', payload: {} });
  const answer = await inbox.claim({
    namespaces: [ns],
    completions: [events.done, { ...events.stale, claimToken: 'an-old-claim' }],
  });
  assert.deepEqual(
    answer.completionOutcomes.map((o) => o?.code ?? status.OK),
    [status.OK, status.ABORTED],
  );
  assert.deepEqual(answer.events.map((e) => e.eventKey), ['next']);
  const again = await inbox.claim({ namespaces: [ns], completions: [events.stale, ...answer.events] });
  assert.deepEqual(again.completionOutcomes, [null, null]);
  assert.deepEqual(again.events, []);
});

test('completeMany answers each item alone: OK, stale, unknown, bad', needsInboxd, async () => {
  const ns = namespace();
  const events = await claimAll(ns, ['done', 'ignored', 'stale']);
  const outcomes = await inbox.completeMany([
    events.done,
    { ...events.ignored, disposition: 'IGNORED', reason: 'not ours' },
    { ...events.stale, claimToken: 'an-old-claim' },
    { namespace: ns, eventKey: 'unknown', claimToken: 't' },
    { namespace: ns, eventKey: '', claimToken: 't' },
    events.done, // a repeat by the claim that completed it: OK
  ]);
  assert.deepEqual(
    outcomes.map((o) => o?.code ?? status.OK),
    [status.OK, status.OK, status.ABORTED, status.NOT_FOUND, status.INVALID_ARGUMENT, status.OK],
  );
  assert.ok(outcomes[2] instanceof CompleteItemError);
  assert.match(outcomes[4].details, /completions\[4\]\.event_key/);
  // The stale item changed nothing: its real claim still completes.
  await inbox.complete(events.stale);
});
