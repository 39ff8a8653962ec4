// job.action against a live inboxd, one test per case of the table both runtimes run
// (tests/shared/action_cases.json; the Python runtime's twin is tests/client/test_action_cases.py).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, test } from 'node:test';

import { ActionFailed, ActionUnresolved, Job } from '../src/index.js';
import { client, namespace, needsInboxd } from '../test-support/helpers.js';

const TABLE = JSON.parse(readFileSync(new URL('../../../tests/shared/action_cases.json', import.meta.url), 'utf8'));
const ACTION = 'charge:v1';
const VERDICTS = { succeeded: 'succeeded', failed: 'failed', unknown: 'unknown' };

const inbox = client();
after(() => inbox.close());

const bare = (state) => state.replace(/^ACTION_STATE_/, '');

async function claimOne(ns) {
  const { events } = await inbox.claim({ namespaces: [ns], waitMs: 2_000, leaseMs: 30_000 });
  assert.equal(events.length, 1, `expected one event in ${ns}`);
  return events[0];
}

const fenceOf = ({ namespace: ns, eventKey, claimToken }) => ({ namespace: ns, eventKey, claimToken });

/** The event as the runtime gets it, with `prior` recorded by an earlier claim or by its own. */
async function eventWith(ns, prior, by) {
  await inbox.accept({ namespace: ns, eventKey: 'e', eventType: 't', payload: {} });
  const first = await claimOne(ns);
  let last;
  for (const state of prior) last = await inbox.recordActionOutcome({ ...fenceOf(first), action: ACTION, state });
  if (by !== 'earlier_claim') return { event: { ...first, actions: last ? [last] : [] }, prior: last };
  await inbox.fail({ ...fenceOf(first), error: 'an earlier attempt', retryAfterMs: 0 });
  const event = await claimOne(ns);
  assert.deepEqual(
    event.actions.map((a) => bare(a.state)),
    [prior.at(-1)],
  );
  return { event, prior: event.actions[0] };
}

/** The action's state on the server: the next claim's view of it. */
async function finalState(event) {
  await inbox.fail({ ...fenceOf(event), error: 'case done', retryAfterMs: 0 });
  const next = await claimOne(event.namespace);
  await inbox.complete(fenceOf(next));
  return bare(next.actions.find((a) => a.action === ACTION).state);
}

for (const c of TABLE.cases) {
  test(`action case: ${c.name}`, needsInboxd, async () => {
    const ns = namespace();
    const { event, prior } = await eventWith(ns, c.prior, c.by);
    const recorded = [];
    // The runtime's client, noting each outcome it records (every call still goes to the server).
    const spy = Object.create(inbox);
    spy.recordActionOutcome = (request) => {
      recorded.push(bare(request.state));
      return inbox.recordActionOutcome(request);
    };
    const keys = [];
    let performed = 0;
    let reconciled = 0;
    const bodyError = c.perform === 'fails_certainly' ? new ActionFailed('declined') : new Error('connection reset');
    const perform = async ({ idempotencyKey }) => {
      performed += 1;
      keys.push(idempotencyKey);
      if (c.perform !== 'returns') throw bodyError;
      return { externalRef: 'ch_1' };
    };
    const options = {};
    if (c.reconcile !== null) {
      options.reconcile = async ({ idempotencyKey }) => {
        reconciled += 1;
        keys.push(idempotencyKey);
        return VERDICTS[c.reconcile];
      };
    }
    const job = new Job(spy, event, new AbortController().signal);
    let raised = null;
    try {
      await job.action(ACTION, perform, options);
    } catch (err) {
      raised = err;
    }
    const { expect } = c;
    if (expect.raises === null) assert.equal(raised, null);
    else if (expect.raises === 'unresolved') {
      assert.ok(raised instanceof ActionUnresolved, `threw ${raised}`);
      assert.ok(raised.message.includes(expect.says), raised.message);
      // "pass reconcile" is advice only for a caller who gave none.
      assert.equal(raised.message.includes('pass reconcile'), c.reconcile === null, raised.message);
    }
    else assert.equal(raised, bodyError);
    assert.equal(performed, expect.performed, 'times perform ran');
    assert.equal(reconciled, expect.reconciled, 'times reconcile was asked');
    assert.deepEqual(recorded, expect.recorded, 'the outcomes recorded, in order');
    if (prior) assert.ok(keys.every((key) => key === prior.idempotencyKey), 'one idempotency key throughout');
    assert.equal(await finalState(event), expect.final, 'the state on the server');
  });
}
