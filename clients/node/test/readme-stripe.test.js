// clients/node/README.md's Stripe handler, run as written: it verifies the signature again from a
// claimed event. The event is accepted as the edge forwards a Stripe delivery (the body's bytes,
// the Stripe-Signature header in metadata, as the edge names it) and signed by the `stripe` library itself.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

import Stripe from 'stripe';

import { client, namespace, needsInboxd, newWorker, poll } from '../test-support/helpers.js';

const README = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'README.md');
const SECRET = 'whsec_readme_test_secret';
const SIGNATURE_KEY = 'inboxd.signature.stripe-signature';

const inbox = client();
after(() => inbox.close());

/** The README's handleStripe, from the one js block that calls constructEvent, imported as a module. */
async function readmeHandler() {
  const blocks = [...(await readFile(README, 'utf8')).matchAll(/```js\n(.*?)```/gs)].map((m) => m[1]);
  const [block] = blocks.filter((b) => b.includes('constructEvent'));
  assert.ok(block, 'the README has no Stripe block');
  process.env.STRIPE_API_KEY = 'sk_test_unused';
  process.env.STRIPE_WEBHOOK_SECRET = SECRET;
  // The block imports 'stripe' by name: resolved here, since the module is written outside this package.
  const source = block.replace("from 'stripe'", `from '${import.meta.resolve('stripe')}'`);
  const dir = await mkdtemp(path.join(tmpdir(), 'inboxd-readme-'));
  try {
    const file = path.join(dir, 'stripe-handler.mjs');
    await writeFile(file, `${source}\nexport { handleStripe };\n`);
    return (await import(pathToFileURL(file).href)).handleStripe;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function stripeBody(eventId) {
  // Stripe's own layout (two-space indents, a newline at the end), which a re-encoding would not keep.
  return Buffer.from(
    `{\n  "id": "${eventId}",\n  "object": "event",\n  "type": "payment_intent.succeeded",\n  "data": {"object": {"id": "pi_1", "amount": 1999}}\n}\n`,
  );
}

function signature(body) {
  return Stripe.webhooks.generateTestHeaderString({ payload: body.toString(), secret: SECRET });
}

test("the README's Stripe handler verifies a delivery from its claimed bytes", needsInboxd, async () => {
  const handleStripe = await readmeHandler();
  const ns = namespace();
  const signed = stripeBody('evt_signed');
  // Accepted around the edge with another body's signature: its bytes are not what Stripe signed.
  const forged = stripeBody('evt_forged');
  const eventType = 'payment_intent.succeeded';
  await inbox.accept({ namespace: ns, eventKey: 'evt_signed', eventType, payload: signed, metadata: { [SIGNATURE_KEY]: signature(signed) } });
  await inbox.accept({ namespace: ns, eventKey: 'evt_forged', eventType, payload: forged, metadata: { [SIGNATURE_KEY]: signature(signed) } });
  const verified = [];
  const settled = new Map();
  const worker = newWorker(inbox, {
    namespaces: [ns],
    waitMs: 200,
    handler: async (job) => {
      await handleStripe(job);
      verified.push(job.event.eventKey);
    },
  });
  worker.on('settled', ({ event, outcome, error }) => settled.set(event.eventKey, { outcome, error }));
  const running = worker.run();
  try {
    await poll(() => (settled.size === 2 ? true : undefined));
  } finally {
    await worker.stop();
    await running;
  }
  assert.deepEqual(verified, ['evt_signed']);
  assert.equal(settled.get('evt_signed').outcome, 'completed');
  const { outcome, error } = settled.get('evt_forged');
  assert.equal(outcome, 'failed');
  assert.equal(error.permanent, true);
  assert.match(error.message, /^not signed by Stripe: No signatures found matching the expected signature/);
});
