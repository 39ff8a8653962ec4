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

test('JSON types are application/json and type/subtype+json as the server judges; none means JSON', () => {
  const json = ['application/json', 'Application/JSON; charset=utf-8', 'application/vnd.api+json', '\tapplication/json ;q=1', '', undefined];
  for (const type of json) assert.equal(isJsonType(type), true, String(type));
  for (const type of ['application/x-www-form-urlencoded', 'text/json', 'application/jsonp', 'text/xml', 'application/octet-stream', 'x+json', '+json', 'application/js on']) {
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

// Every byte value, with what no UTF-8 decoder accepts (0xff, a lone 0x80): nothing may decode it.
const BINARY = Buffer.concat([Buffer.from([...Array(256).keys()]), Buffer.from([0xff, 0x80, 0x00])]);
const ODD_JSON = Buffer.from('{"b": 1,   "a": [2,3],"b2":"\\u00e9", "b": 2}');

/** Runs a worker with `handler` over `ns` until `keys` have settled; resolves to each key's settled report. */
async function settleAll(ns, keys, handler) {
  const worker = newWorker(inbox, { namespaces: [ns], waitMs: 200, handler });
  const reports = Promise.all(keys.map((key) => settledOf(worker, key)));
  const running = worker.run();
  try {
    return Object.fromEntries((await reports).map((report) => [report.event.eventKey, report]));
  } finally {
    await worker.stop();
    await running;
  }
}

test('form, binary and JSON events reach a handler byte-exact with their content types', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'form', eventType: 'sms.received', payload: FORM.toString(), contentType: 'application/x-www-form-urlencoded' });
  await inbox.accept({ namespace: ns, eventKey: 'binary', eventType: 'file.uploaded', payload: BINARY, contentType: 'application/octet-stream' });
  await inbox.accept({ namespace: ns, eventKey: 'json', eventType: 'order.paid', payload: ODD_JSON, contentType: 'application/json; charset=utf-8' });
  const seen = {};
  const reports = await settleAll(ns, ['form', 'binary', 'json'], async (j) => {
    seen[j.event.eventKey] = { body: j.body, contentType: j.contentType, isJson: j.isJson };
    if (j.isJson) assert.deepEqual([j.json(), j.payload], [{ b: 2, a: [2, 3], b2: 'é' }, { b: 2, a: [2, 3], b2: 'é' }]);
    else assert.throws(() => j.payload, NotJsonPayload);
  });
  assert.deepEqual(Object.values(reports).map((r) => r.outcome), ['completed', 'completed', 'completed']);
  assert.ok(seen.form.body.equals(FORM) && seen.binary.body.equals(BINARY) && seen.json.body.equals(ODD_JSON));
  assert.deepEqual(
    [seen.form.contentType, seen.binary.contentType, seen.json.contentType],
    ['application/x-www-form-urlencoded', 'application/octet-stream', 'application/json; charset=utf-8'],
  );
  assert.deepEqual([seen.form.isJson, seen.binary.isJson, seen.json.isJson], [false, false, true]);
});

test('a handler written for JSON fails a form event permanently, naming its type', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'form', eventType: 'sms.received', payload: FORM, contentType: 'application/x-www-form-urlencoded' });
  let body;
  const { form } = await settleAll(ns, ['form'], async (j) => {
    body = j.body;
    return j.payload.email;
  });
  assert.ok(body.equals(FORM));
  assert.equal(form.outcome, 'failed');
  assert.ok(form.error instanceof NotJsonPayload && form.error.permanent);
  // Dead-lettered, not retried: nothing is left to claim.
  const { events } = await inbox.claim({ namespaces: [ns], waitMs: 0 });
  assert.deepEqual(events, []);
});

test('acceptStream sends a form and Claim hands it back byte-exact', needsInboxd, async () => {
  const ns = namespace();
  const stream = inbox.acceptStream();
  try {
    await stream.accept({ namespace: ns, eventKey: 'form', eventType: 'sms.received', payload: FORM, contentType: 'application/x-www-form-urlencoded' });
  } finally {
    await stream.close();
  }
  const [event] = (await inbox.claim({ namespaces: [ns] })).events;
  assert.ok(event.payload.equals(FORM));
  assert.equal(event.contentType, 'application/x-www-form-urlencoded');
});
