// client.acceptStream() against a live inboxd: answers by sequence, one bad item among good ones,
// the window, close(), and a stream cut mid-flight that loses nothing acknowledged.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { status } from '../src/index.js';
import { client, namespace, needsInboxd } from '../test-support/helpers.js';
import { cutter } from '../test-support/cutter.js';
import { proxy } from '../test-support/proxy.js';

const inbox = client();
after(() => inbox.close());

const event = (ns, eventKey, payload = { key: eventKey }) => ({ namespace: ns, eventKey, eventType: 't', payload });

test('each accept gets its own item\'s answer, matched by sequence', needsInboxd, async () => {
  const ns = namespace();
  const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
  // A third already stored with the same payload (DUPLICATE), a third with another (CONFLICT).
  for (const [i, key] of keys.entries()) {
    if (i % 3 === 1) await inbox.accept(event(ns, key));
    if (i % 3 === 2) await inbox.accept(event(ns, key, { other: true }));
  }
  const stream = inbox.acceptStream();
  try {
    const answers = await Promise.all(keys.map((key) => stream.accept(event(ns, key))));
    const expected = ['ACCEPT_OUTCOME_ACCEPTED', 'ACCEPT_OUTCOME_DUPLICATE', 'ACCEPT_OUTCOME_CONFLICT'];
    assert.deepEqual(
      answers.map((answer) => answer.outcome),
      keys.map((_, i) => expected[i % 3]),
    );
    assert.ok(answers.every((answer) => answer.state === 'EVENT_STATE_PENDING' && answer.acceptedAt));
  } finally {
    await stream.close();
  }
  assert.equal(stream.opened, 1);
});

test('a bad item is refused alone, with its status code and field, and the stream goes on', needsInboxd, async () => {
  const ns = namespace();
  const stream = inbox.acceptStream();
  try {
    const sent = [
      stream.accept(event(ns, 'good-1')),
      stream.accept({ namespace: ns, eventKey: 'bad', eventType: '', payload: {} }),
      stream.accept(event(ns, 'good-2')),
    ];
    const [first, bad, second] = await Promise.allSettled(sent);
    assert.equal(first.value?.outcome, 'ACCEPT_OUTCOME_ACCEPTED');
    assert.equal(second.value?.outcome, 'ACCEPT_OUTCOME_ACCEPTED');
    assert.equal(bad.status, 'rejected');
    assert.equal(bad.reason.code, status.INVALID_ARGUMENT);
    assert.match(bad.reason.details, /event_type/);
    // After the refusal, the same stream still accepts.
    assert.equal((await stream.accept(event(ns, 'good-3'))).outcome, 'ACCEPT_OUTCOME_ACCEPTED');
  } finally {
    await stream.close();
  }
  assert.equal(stream.opened, 1);
});

test('at most a window of items is in flight; the rest wait their turn; close() waits for all', needsInboxd, async () => {
  const ns = namespace();
  const stream = inbox.acceptStream({ window: 4 });
  const sent = Array.from({ length: 20 }, (_, i) => stream.accept(event(ns, `k${i}`)));
  assert.deepEqual([stream.inFlight, stream.waiting], [4, 16]);
  // Closed at once: every item given is still sent and answered before the stream ends.
  await stream.close();
  const answers = await Promise.all(sent);
  assert.ok(answers.every((answer) => answer.outcome === 'ACCEPT_OUTCOME_ACCEPTED'));
  await assert.rejects(stream.accept(event(ns, 'late')), /closed/);
});

test('a stream cut mid-flight is opened again and resends what was unanswered: nothing is lost', needsInboxd, async () => {
  const ns = namespace();
  const relay = await cutter();
  const viaRelay = client({ target: relay.target });
  const stream = viaRelay.acceptStream({ window: 16, backoff: { minMs: 10, maxMs: 50 } });
  const keys = Array.from({ length: 120 }, (_, i) => `k${i}`);
  let answered = 0;
  let cutAt = null;
  try {
    const answers = await Promise.all(
      keys.map((key) =>
        stream.accept(event(ns, key)).then((answer) => {
          answered += 1;
          // A third of the way through, with a window of items in flight: the network fails.
          if (answered === 40) {
            cutAt = stream.inFlight;
            relay.cut();
          }
          return answer;
        }),
      ),
    );
    assert.ok(cutAt > 0, 'items were in flight at the cut');
    assert.ok(stream.opened >= 2, `opened ${stream.opened} times`);
    const outcomes = new Set(answers.map((answer) => answer.outcome));
    assert.ok([...outcomes].every((o) => o === 'ACCEPT_OUTCOME_ACCEPTED' || o === 'ACCEPT_OUTCOME_DUPLICATE'), [...outcomes]);
  } finally {
    await stream.close();
    viaRelay.close();
    relay.close();
  }
  // Every event is stored, once: a unary Accept of each finds it.
  for (const key of keys) assert.equal((await inbox.accept(event(ns, key))).outcome, 'ACCEPT_OUTCOME_DUPLICATE', key);
});

test('against a server without AcceptStream every item, and every later one, rejects UNIMPLEMENTED', needsInboxd, async () => {
  const older = await proxy(undefined, { streams: false });
  const viaOlder = client({ target: older.target });
  const stream = viaOlder.acceptStream();
  try {
    const ns = namespace();
    await assert.rejects(stream.accept(event(ns, 'k1')), (err) => err.code === status.UNIMPLEMENTED);
    await assert.rejects(stream.accept(event(ns, 'k2')), (err) => err.code === status.UNIMPLEMENTED);
    assert.equal(stream.opened, 1, 'not reopened in a loop');
  } finally {
    await stream.close();
    viaOlder.close();
    older.close();
  }
});
