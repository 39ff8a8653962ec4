// A handler's payload: its bytes as accepted (job.body), its content type, and json() only where the
// type is JSON. The first tests build jobs from ClaimedEvents; the worker tests accept through the
// client and read what a real handler got back from the live inboxd.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { isJsonType, Job, NotJsonPayload } from '../src/index.js';
import { acceptRequest } from '../src/requests.js';
import { client, namespace, needsInboxd, newWorker, settledOf } from '../test-support/helpers.js';

const inbox = client();
after(() => inbox.close());

const FORM = Buffer.from('Body=caf%C3%A9+%26+cr%C3%A8me&From=%2B15551234567&To=%2B15557654321');

function job(payload, contentType) {
  return new Job(null, { namespace: 'ns', eventKey: 'k', claimToken: 't', payload, contentType });
}

test('JSON types are application/json and +json, parameters ignored; none means JSON', () => {
  for (const type of ['application/json', 'Application/JSON; charset=utf-8', 'application/vnd.api+json', '', undefined]) {
    assert.equal(isJsonType(type), true, String(type));
  }
  for (const type of ['application/x-www-form-urlencoded', 'text/json', 'application/jsonp', 'text/xml', 'application/octet-stream']) {
    assert.equal(isJsonType(type), false, type);
  }
});

test('an event from a server that sends no content type is JSON', () => {
  const j = job(Buffer.from('{"a": 1}'), '');
  assert.deepEqual([j.contentType, j.isJson, j.json(), j.payload], ['application/json', true, { a: 1 }, { a: 1 }]);
});

test('json() parses a JSON type with parameters, and job.body stays the bytes as accepted', () => {
  const body = Buffer.from('{"b": 1,   "a": [2,3],"b2":"\\u00e9"}');
  const j = job(body, 'application/vnd.api+json; charset=utf-8');
  assert.deepEqual(j.json(), { b: 1, a: [2, 3], b2: 'é' });
  assert.ok(Buffer.isBuffer(j.body) && j.body.equals(body));
  assert.equal(j.contentType, 'application/vnd.api+json; charset=utf-8');
});

test('json() and payload refuse a form, naming its content type, as a permanent error', () => {
  const j = job(FORM, 'application/x-www-form-urlencoded');
  for (const read of [() => j.json(), () => j.payload]) {
    assert.throws(read, (err) => {
      assert.ok(err instanceof NotJsonPayload);
      assert.match(err.message, /'application\/x-www-form-urlencoded', not JSON/);
      assert.equal(err.contentType, 'application/x-www-form-urlencoded');
      assert.equal(err.permanent, true);
      return true;
    });
  }
  assert.ok(j.body.equals(FORM));
  assert.equal(j.isJson, false);
});

test('accept requests carry the content type and send Buffers and strings as they are', () => {
  const form = acceptRequest({ namespace: 'ns', eventKey: 'k', eventType: 't', payload: FORM.toString(), contentType: 'application/x-www-form-urlencoded' });
  assert.ok(form.payload.equals(FORM));
  assert.equal(form.contentType, 'application/x-www-form-urlencoded');
  const json = acceptRequest({ namespace: 'ns', eventKey: 'k', eventType: 't', payload: { a: 'é' } });
  assert.equal(json.payload.toString(), '{"a":"é"}');
  assert.equal(json.contentType, '');
  assert.throws(
    () => acceptRequest({ namespace: 'ns', eventKey: 'k', eventType: 't', payload: { a: 1 }, contentType: 'text/xml' }),
    /content type 'text\/xml' must be a Buffer, Uint8Array or string, not object/,
  );
});

test('a JSON handler gets its bytes, content type and value', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'k', eventType: 't', payload: { n: 1 }, contentType: 'application/json' });
  const seen = [];
  const worker = newWorker(inbox, {
    namespaces: [ns],
    waitMs: 200,
    handler: async (j) => {
      seen.push([j.body, j.contentType, j.json(), j.payload]);
    },
  });
  const settled = settledOf(worker, 'k');
  const running = worker.run();
  try {
    assert.equal((await settled).outcome, 'completed');
  } finally {
    await worker.stop();
    await running;
  }
  const [[body, contentType, value, payload]] = seen;
  assert.ok(Buffer.isBuffer(body));
  assert.equal(body.toString().replace(/ /g, ''), '{"n":1}');
  assert.deepEqual([contentType, value, payload], ['application/json', { n: 1 }, { n: 1 }]);
});
