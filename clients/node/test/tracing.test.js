// Tracing in the Node client and runtime, with a real OpenTelemetry SDK against a live inboxd.
//
// First, before any provider is registered, a worker that must make no span and send no context;
// then the application's NodeTracerProvider with an InMemorySpanExporter, registered once, for the
// rest: the process span's child-or-link rule, the action spans, and what each call carries,
// observed on a grpc-js proxy in front of inboxd. The rule and the runtime's own provider are
// test/tracing-setup.test.js.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, test } from 'node:test';

import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';

import { ActionFailed } from '../src/index.js';
import { CHILD_MAX_AGE_MS, eventRef, runtimeTracer } from '../src/worker_tracing.js';
import { client, namespace, needsInboxd, poll, TRANSPORT } from '../test-support/helpers.js';
import {
  clearOtelEnvironment,
  completingTraceparents,
  deliveryContext,
  handle,
  recordingProxy,
  recordTraceparents,
  replay,
} from '../test-support/tracing.js';

clearOtelEnvironment();

const inbox = client();
after(() => inbox.close());

const traceparentOf = (span) => `00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`;

// ---- before any provider is registered ----------------------------------------------------------

test('with no provider registered and no OTEL_* export, the worker makes no span and sends no context', needsInboxd, async () => {
  const ns = namespace();
  const delivery = deliveryContext();
  await inbox.accept({ namespace: ns, eventKey: 'plain', eventType: 't', payload: {}, traceContext: delivery.traceContext });
  const relay = await recordingProxy();
  const through = client({ target: relay.target });
  let during;
  try {
    const [report] = await handle(through, ns, 'plain', async (job) => {
      during = { tracer: runtimeTracer(), span: trace.getActiveSpan() };
      // The event does hand its stored context back; the worker makes nothing of it.
      assert.equal(job.event.traceContext.traceparent, delivery.traceContext.traceparent);
      await job.action('notify:v1', async () => ({}));
    });
    assert.equal(report.outcome, 'completed');
  } finally {
    through.close();
    relay.close();
  }
  assert.deepEqual(during, { tracer: null, span: undefined });
  assert.ok(relay.seen.length > 0);
  assert.deepEqual(
    relay.seen.filter((call) => call.traceparent || call.metadataTraceparent).map((call) => call.method),
    [],
    'no call carried a trace context',
  );
});

// ---- the application's provider ----------------------------------------------------------------------

let memory = null;
/** The application's own provider, registered once for the rest of this file. */
function appSpans() {
  if (memory === null) {
    memory = new InMemorySpanExporter();
    new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] }).register();
  }
  return memory;
}

function spansOf(ns) {
  return appSpans()
    .getFinishedSpans()
    .filter((span) => span.attributes['messaging.destination.name'] === ns);
}

function assertNothingSecret(spans, secrets) {
  const exported = JSON.stringify(spans.map((span) => [span.name, span.attributes, span.events, span.links]));
  for (const secret of secrets) assert.ok(!exported.includes(secret), `a span carries ${secret}`);
}

test("a handler's span is a child of the stored context; its actions are its children; its calls carry them", needsInboxd, async () => {
  appSpans();
  const ns = namespace();
  const eventKey = `key-${randomUUID()}`;
  const delivery = deliveryContext();
  await inbox.accept({ namespace: ns, eventKey, eventType: 'order.paid', payload: { mark: 'PAYLOAD-MARK' }, traceContext: delivery.traceContext });
  const relay = await recordingProxy();
  const through = client({ target: relay.target });
  let seenInPerform;
  let claimed;
  let record;
  try {
    const handler = async (job) => {
      claimed = job.event;
      ({ record } = await job.action('notify:v1', async () => {
        seenInPerform = trace.getActiveSpan()?.spanContext();
        return { externalRef: 'sent' };
      }));
    };
    // On Claims: a free slot keeps a long-poll out while the handler runs, so its completion goes
    // as a CompleteBatch (one riding the next Claim is in that Claim's context, not the handler's).
    const [report] = await handle(through, ns, eventKey, handler, { concurrency: 2, waitMs: 1_000 });
    assert.equal(report.outcome, 'completed');
  } finally {
    through.close();
    relay.close();
  }

  const spans = spansOf(ns);
  const processSpan = spans.find((span) => span.name === 'process');
  const actionSpan = spans.find((span) => span.name === 'action');
  assert.ok(processSpan && actionSpan, JSON.stringify(spans.map((span) => span.name)));
  assert.equal(processSpan.kind, SpanKind.CONSUMER);
  assert.equal(processSpan.spanContext().traceId, delivery.traceId, 'it joins the delivery trace');
  assert.equal(processSpan.parentSpanContext?.spanId, delivery.spanId);
  assert.deepEqual(processSpan.links, []);
  assert.deepEqual(processSpan.attributes, {
    'messaging.system': 'inboxd',
    'messaging.destination.name': ns,
    'messaging.message.id': eventRef(ns, eventKey),
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'process',
    'inboxd.event_type': 'order.paid',
    'inboxd.attempt': 1,
    'inboxd.replayed': false,
    'inboxd.stale': false,
    'inboxd.fencing_token': Number(claimed.fencingToken),
    'inboxd.trace.parent': 'child',
  });
  assert.equal(processSpan.status.code, SpanStatusCode.UNSET);

  assert.equal(actionSpan.kind, SpanKind.INTERNAL);
  assert.equal(actionSpan.spanContext().traceId, delivery.traceId);
  assert.equal(actionSpan.parentSpanContext?.spanId, processSpan.spanContext().spanId);
  assert.deepEqual(actionSpan.attributes, {
    'messaging.system': 'inboxd',
    'messaging.destination.name': ns,
    'messaging.message.id': eventRef(ns, eventKey),
    'inboxd.action.name': 'notify:v1',
    'inboxd.action.idempotency_key': record.idempotencyKey,
    'inboxd.action.outcome': 'SUCCEEDED',
    'inboxd.action.reused': false,
  });
  assert.equal(seenInPerform?.spanId, actionSpan.spanContext().spanId, 'the action span is current in perform');
  assertNothingSecret(spans, [eventKey, 'PAYLOAD-MARK', claimed.claimToken]);

  // The fenced calls ran in those spans: the server's spans for them are their children.
  assert.deepEqual(
    completingTraceparents(relay.seen, claimed.claimToken),
    [traceparentOf(processSpan)],
    `${TRANSPORT}: the completion carries the handler's span`,
  );
  const records = recordTraceparents(relay.seen, claimed.claimToken);
  assert.deepEqual(records, [traceparentOf(actionSpan), traceparentOf(actionSpan)], 'INTENDED and SUCCEEDED, in the action span');
});

test('a replayed event starts a new root linked to its stored trace, and says it is a replay', needsInboxd, async () => {
  appSpans();
  const ns = namespace();
  const delivery = deliveryContext();
  await inbox.accept({ namespace: ns, eventKey: 'again', eventType: 't', payload: {}, traceContext: delivery.traceContext });
  const reports = await handle(inbox, ns, 'again', async () => {}, {
    count: 2,
    between: () => replay(ns, 'again'),
  });
  assert.deepEqual(reports.map((r) => r.outcome), ['completed', 'completed']);
  const [first, second] = spansOf(ns).filter((span) => span.name === 'process');
  assert.equal(first.attributes['inboxd.trace.parent'], 'child');
  assert.equal(first.spanContext().traceId, delivery.traceId);

  assert.equal(second.attributes['inboxd.replayed'], true);
  assert.equal(second.attributes['inboxd.trace.parent'], 'link');
  assert.equal(second.parentSpanContext, undefined, 'a new root');
  assert.notEqual(second.spanContext().traceId, delivery.traceId);
  assert.deepEqual(
    second.links.map(({ context }) => [context.traceId, context.spanId]),
    [[delivery.traceId, delivery.spanId]],
  );
});

test('an event accepted an hour or more before its handler starts is linked, not extended', needsInboxd, async () => {
  appSpans();
  const ns = namespace();
  const delivery = deliveryContext();
  await inbox.accept({ namespace: ns, eventKey: 'old', eventType: 't', payload: {}, traceContext: delivery.traceContext });
  // The worker's clock says the handler starts an hour and a minute after now.
  await handle(inbox, ns, 'old', async () => {}, { clock: () => Date.now() + CHILD_MAX_AGE_MS + 60_000 });
  const [span] = spansOf(ns);
  assert.equal(span.name, 'process');
  assert.equal(span.attributes['inboxd.replayed'], false);
  assert.equal(span.attributes['inboxd.trace.parent'], 'link');
  assert.equal(span.parentSpanContext, undefined);
  assert.deepEqual(
    span.links.map(({ context }) => [context.traceId, context.spanId]),
    [[delivery.traceId, delivery.spanId]],
  );
});

test('an event that brought no trace context gets a new root span, with no link', needsInboxd, async () => {
  appSpans();
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'bare', eventType: 't', payload: {} });
  await handle(inbox, ns, 'bare', async () => {});
  const [span] = spansOf(ns);
  assert.equal(span.parentSpanContext, undefined);
  assert.deepEqual(span.links, []);
  assert.equal('inboxd.trace.parent' in span.attributes, false);
});

test("a failed handler's span is ERROR with the exception; action spans say FAILED, and reused on the retry", needsInboxd, async () => {
  appSpans();
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'retry', eventType: 't', payload: {}, traceContext: deliveryContext().traceContext });
  const reports = await handle(
    inbox,
    ns,
    'retry',
    async (job) => {
      await job.action('notify:v1', async () => ({}));
      await job.action('charge:v1', async () => {
        if (job.event.attempt === 1) throw Object.assign(new ActionFailed('card declined'), { retryAfterMs: 0 });
        return { externalRef: 'ch_1' };
      });
    },
    { count: 2 },
  );
  assert.deepEqual(reports.map((r) => r.outcome), ['failed', 'completed']);
  const spans = spansOf(ns);
  const [first, second] = spans.filter((span) => span.name === 'process');
  assert.equal(first.status.code, SpanStatusCode.ERROR);
  assert.equal(first.status.message, 'ActionFailed: card declined');
  const exception = first.events.find((event) => event.name === 'exception');
  assert.equal(exception?.attributes['exception.message'], 'card declined');
  assert.equal(second.status.code, SpanStatusCode.UNSET);
  assert.equal(second.attributes['inboxd.attempt'], 2);

  const actionsOf = (parent) =>
    spans
      .filter((span) => span.name === 'action' && span.parentSpanContext?.spanId === parent.spanContext().spanId)
      .map((span) => [
        span.attributes['inboxd.action.name'],
        span.attributes['inboxd.action.outcome'],
        span.attributes['inboxd.action.reused'] ?? null,
        span.status.code,
      ]);
  assert.deepEqual(actionsOf(first), [
    ['notify:v1', 'SUCCEEDED', false, SpanStatusCode.UNSET],
    ['charge:v1', 'FAILED', null, SpanStatusCode.ERROR],
  ]);
  assert.deepEqual(actionsOf(second), [
    ['notify:v1', 'SUCCEEDED', true, SpanStatusCode.UNSET], // the ledger held it: not performed again
    ['charge:v1', 'SUCCEEDED', false, SpanStatusCode.UNSET],
  ]);
});

test("the warning about an overdue handler names its span", needsInboxd, async () => {
  appSpans();
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'slow', eventType: 't', payload: {} });
  const warnings = [];
  const onWarning = (warning) => {
    if (warning.code === 'INBOXD_HANDLER_OVERDUE') warnings.push(warning);
  };
  process.on('warning', onWarning);
  let release;
  const returned = new Promise((resolve) => {
    release = resolve;
  });
  try {
    // It ignores its signal: its event is failed after the grace, while it still runs.
    const [report] = await handle(inbox, ns, 'slow', () => returned, { handlerTimeoutMs: 50, handlerTimeoutGraceMs: 50 });
    assert.equal(report.outcome, 'failed');
    // A process warning is emitted on a later tick.
    await poll(() => (warnings.length > 0 ? true : undefined), { withinMs: 5_000, intervalMs: 10 });
  } finally {
    release();
    process.off('warning', onWarning);
  }
  const [span] = spansOf(ns);
  assert.equal(span.status.code, SpanStatusCode.ERROR);
  assert.match(span.status.message, /^HandlerTimeout: /);
  assert.equal(warnings.length, 1);
  assert.equal(warnings[0].detail, `trace_id=${span.spanContext().traceId} span_id=${span.spanContext().spanId}`);
});

test("the client puts the caller's span on each call: Accept's metadata, each AcceptStream item", needsInboxd, async () => {
  appSpans();
  const ns = namespace();
  const relay = await recordingProxy();
  const through = client({ target: relay.target });
  const given = deliveryContext();
  let edgeSpan;
  try {
    await through.accept({ namespace: ns, eventKey: 'untraced', eventType: 't', payload: {} });
    await trace.getTracer('test').startActiveSpan('edge-request', async (span) => {
      edgeSpan = span;
      await through.accept({ namespace: ns, eventKey: 'unary', eventType: 't', payload: {} });
      const stream = through.acceptStream();
      await stream.accept({ namespace: ns, eventKey: 'streamed', eventType: 't', payload: {} });
      // A context the caller gives (an edge forwarding its provider's) stands.
      await stream.accept({ namespace: ns, eventKey: 'forwarded', eventType: 't', payload: {}, traceContext: given.traceContext });
      await stream.close();
      span.end();
    });
  } finally {
    through.close();
    relay.close();
  }
  const expected = traceparentOf(edgeSpan);
  const byKey = (key) => relay.seen.find((call) => (call.request.accept ?? call.request).eventKey === key);
  assert.equal(byKey('untraced').traceparent, null, 'no span current: nothing');
  assert.equal(byKey('unary').traceparent, expected);
  assert.equal(byKey('streamed').traceparent, expected);
  assert.equal(byKey('forwarded').traceparent, given.traceContext.traceparent);

  // inboxd stored each item's own context, and hands it back.
  const { events } = await inbox.claim({ namespaces: [ns], maxEvents: 10, leaseMs: 5_000 });
  const stored = Object.fromEntries(events.map((event) => [event.eventKey, event.traceContext?.traceparent ?? null]));
  assert.equal(stored.streamed, expected);
  assert.equal(stored.forwarded, given.traceContext.traceparent);
});
