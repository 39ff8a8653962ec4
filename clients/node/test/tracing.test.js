// Tracing in the Node client and runtime, with a real OpenTelemetry SDK against a live inboxd.
//
// The on/off rule first (no inboxd needed); then, before any provider is registered, a worker that
// must make no span and send no context; then the application's NodeTracerProvider with an
// InMemorySpanExporter, registered once, for the rest: the process span's child-or-link rule, the
// action spans, and what each call carries, observed on a grpc-js proxy in front of inboxd. A
// worker in a child process shows the runtime installing its own provider from OTEL_* alone.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';

import { ActionFailed, loadInboxd } from '../src/index.js';
import { TracingConfigError, tracingRule } from '../src/tracing_rule.js';
import { CHILD_MAX_AGE_MS, eventRef, runtimeTracer, startTracing, traceRelation } from '../src/worker_tracing.js';
import { client, namespace, needsInboxd, newWorker, poll, settledOf, TARGET, TRANSPORT } from '../test-support/helpers.js';
import { proxy } from '../test-support/proxy.js';

// Whatever the shell exported, these tests set the OTEL_* variables themselves.
for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) delete process.env[name];

const inbox = client();
after(() => inbox.close());

const HERE = path.dirname(fileURLToPath(import.meta.url));

// ---- the on/off rule --------------------------------------------------------------------------

test('tracing is off unless an exporter or an OTLP endpoint is configured', () => {
  assert.deepEqual(tracingRule({}), { on: false });
  assert.deepEqual(tracingRule({ OTEL_TRACES_EXPORTER: 'none' }), { on: false });
  assert.deepEqual(tracingRule({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4317' }), {
    on: false,
  });
  assert.deepEqual(tracingRule({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'console' }), { on: false });
  assert.deepEqual(tracingRule({ OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4317' }), {
    on: false,
  });
  // Set to something other than true, the SDK is not disabled.
  assert.equal(tracingRule({ OTEL_SDK_DISABLED: 'false', OTEL_TRACES_EXPORTER: 'console' }).on, true);
});

test('an endpoint alone turns OTLP over grpc on; OTEL_TRACES_EXPORTER names the exporters', () => {
  for (const endpoint of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']) {
    const rule = tracingRule({ [endpoint]: 'http://127.0.0.1:4317' });
    assert.deepEqual([rule.on, rule.exporters, rule.protocol], [true, ['otlp'], 'grpc'], endpoint);
  }
  assert.deepEqual(tracingRule({ OTEL_TRACES_EXPORTER: 'console' }).exporters, ['console']);
  assert.deepEqual(tracingRule({ OTEL_TRACES_EXPORTER: 'otlp, console' }).exporters, ['otlp', 'console']);
  const http = tracingRule({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' });
  assert.deepEqual([http.protocol, http.protocolVariable], ['http/protobuf', 'OTEL_EXPORTER_OTLP_PROTOCOL']);
  // The traces-only variable wins over the general one.
  const traces = tracingRule({
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4317',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc',
  });
  assert.equal(traces.protocol, 'grpc');
});

test('an unknown exporter or protocol is refused, naming its variable', () => {
  assert.throws(() => tracingRule({ OTEL_TRACES_EXPORTER: 'zipkin' }), (err) => {
    assert.ok(err instanceof TracingConfigError);
    assert.match(err.message, /^OTEL_TRACES_EXPORTER=zipkin: unknown exporter "zipkin"/);
    return true;
  });
  assert.throws(
    () => tracingRule({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x:4318', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }),
    /^TracingConfigError: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http\/json/,
  );
});

test('http/protobuf without its exporter package: the worker refuses to start, naming the variable', async () => {
  // @opentelemetry/exporter-trace-otlp-proto is not among this package's dependencies.
  const env = { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' };
  await assert.rejects(startTracing({ env }), (err) => {
    assert.ok(err instanceof TracingConfigError);
    assert.match(err.message, /^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http\/protobuf: @opentelemetry\/exporter-trace-otlp-proto is not installed/);
    return true;
  });
  assert.equal(runtimeTracer(), null, 'nothing was turned on');
});

test('the child-or-link rule: a child under an hour after the Accept, else (or replayed) a link', () => {
  const acceptedMs = Date.UTC(2026, 0, 1, 12, 0, 0);
  const event = { replayed: false, acceptedAt: { seconds: String(acceptedMs / 1000), nanos: 0 } };
  const stored = { traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: 1 };
  assert.equal(traceRelation(event, stored, acceptedMs + CHILD_MAX_AGE_MS - 1), 'child');
  assert.equal(traceRelation(event, stored, acceptedMs + CHILD_MAX_AGE_MS), 'link');
  assert.equal(traceRelation({ ...event, replayed: true }, stored, acceptedMs + 1), 'link');
  assert.equal(traceRelation(event, null, acceptedMs + 1), null);
});

test('the event reference is the server event_ref: 12 hex digits of sha256(namespace NUL key)', () => {
  // hashlib.sha256(b"shop/acme\0order-1").hexdigest()[:12], as the server's observability.logs.event_ref.
  assert.equal(eventRef('shop/acme', 'order-1'), '2929a57b621f');
});

// ---- helpers for the traced tests -----------------------------------------------------------------

function randomHex(bytes) {
  return randomBytes(bytes).toString('hex');
}

/** A W3C context the "provider" sent: what the edge's Accept stores with the event. */
function deliveryContext() {
  const traceId = randomHex(16);
  const spanId = randomHex(8);
  return { traceId, spanId, traceContext: { traceparent: `00-${traceId}-${spanId}-01`, tracestate: 'vendor=delivery' } };
}

/** A proxy in front of inboxd that notes every call and stream message with the traceparent it came with. */
async function recordingProxy() {
  const seen = [];
  const relay = await proxy((method, request, forward, metadata) => {
    // A stream's message says it itself: a Work call in its trace_context, an AcceptStream item in its accept's.
    const traceparent = method.includes('.') ? (request.accept ?? request).traceContext?.traceparent : metadata.get('traceparent')[0];
    seen.push({ method, request, traceparent: traceparent || null, metadataTraceparent: metadata.get('traceparent')[0] ?? null });
    forward(request);
  });
  return { ...relay, seen };
}

/** The traceparents of the calls that completed the claim `claimToken` (Complete, CompleteBatch, a Claim that carried it). */
function completingTraceparents(seen, claimToken) {
  const items = ({ method, request }) => {
    if (method === 'Work.complete') return [request.complete];
    if (method === 'Work.completeBatch') return request.completeBatch.completions;
    if (method === 'Complete') return [request];
    if (method === 'CompleteBatch' || method === 'Claim') return request.completions ?? [];
    return [];
  };
  return seen.filter((call) => items(call).some((item) => item.claimToken === claimToken)).map((call) => call.traceparent);
}

function recordTraceparents(seen, claimToken) {
  return seen
    .filter(({ method, request }) => {
      const record = method === 'Work.recordActionOutcome' ? request.recordActionOutcome : method === 'RecordActionOutcome' ? request : null;
      return record?.claimToken === claimToken;
    })
    .map((call) => call.traceparent);
}

/** Runs a worker on `ns` until `count` handler runs of `eventKey` settled; resolves to their reports and events. */
async function handle(inboxClient, ns, eventKey, handler, { count = 1, between, ...options } = {}) {
  const reports = [];
  const worker = newWorker(inboxClient, { namespaces: [ns], waitMs: 200, leaseMs: 10_000, handler, ...options });
  const running = worker.run();
  try {
    for (let i = 0; i < count; i++) {
      reports.push(await settledOf(worker, eventKey));
      if (i + 1 < count) await between?.(reports[i]);
    }
  } finally {
    await worker.stop();
    await running;
  }
  return reports;
}

function replay(ns, eventKey) {
  const admin = new (loadInboxd().InboxAdminService)(TARGET, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    admin.Replay({ namespace: ns, eventKey, reason: 'tracing test' }, (err, answer) => {
      admin.close();
      if (err) reject(err);
      else resolve(answer);
    });
  });
}

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

// ---- the runtime's own provider, from OTEL_* alone -------------------------------------------------

/** Runs test-support/traced-worker.js in a child process with `env` over this one's; resolves to {code, stdout, stderr}. */
async function tracedWorker(env, nodeOptions = []) {
  const script = path.join(HERE, '..', 'test-support', 'traced-worker.js');
  const child = spawn(process.execPath, [...nodeOptions, script], {
    env: { ...process.env, INBOXD_TARGET: TARGET, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const [code] = await once(child, 'exit');
  return { code, stdout, stderr };
}

test('with OTEL_TRACES_EXPORTER=console and no provider of its own, the worker installs the SDK and flushes on stop', needsInboxd, async () => {
  const ns = namespace();
  const delivery = deliveryContext();
  await inbox.accept({ namespace: ns, eventKey: 'child-process', eventType: 't', payload: {}, traceContext: delivery.traceContext });
  const { code, stdout, stderr } = await tracedWorker({
    TRACED_NAMESPACE: ns,
    TRACED_KEY: 'child-process',
    OTEL_TRACES_EXPORTER: 'console',
    OTEL_SERVICE_NAME: 'inboxd-node-test',
  });
  assert.equal(code, 0, stderr);
  assert.match(stderr, /traced-worker: completed/);
  // The batch processor would still hold them had stop() not flushed its provider: the process exits right after.
  assert.match(stdout, /name: 'process'/);
  assert.match(stdout, /name: 'action'/);
  assert.match(stdout, new RegExp(`traceId: '${delivery.traceId}'`));
  assert.match(stdout, /'service\.name': 'inboxd-node-test'/);
  assert.match(stdout, /'inboxd\.trace\.parent': 'child'/);
});

test('without the SDK packages, a worker the OTEL_* settings turn on says so once and runs untraced', needsInboxd, async () => {
  const ns = namespace();
  await inbox.accept({ namespace: ns, eventKey: 'no-sdk', eventType: 't', payload: {}, traceContext: deliveryContext().traceContext });
  const hide = path.join(HERE, '..', 'test-support', 'hide-otel-sdk.js');
  const { code, stdout, stderr } = await tracedWorker(
    { TRACED_NAMESPACE: ns, TRACED_KEY: 'no-sdk', OTEL_TRACES_EXPORTER: 'console' },
    ['--import', hide],
  );
  assert.equal(code, 0, stderr);
  assert.match(stderr, /traced-worker: completed/);
  const notices = stdout.split('\n').filter((line) => line.startsWith('inboxd: tracing is off'));
  assert.equal(notices.length, 1, stdout);
  assert.match(notices[0], /^inboxd: tracing is off: the OTEL_\* settings ask for traces \(console\), but @opentelemetry\/sdk-trace-node is not installed/);
  assert.doesNotMatch(stdout, /name: 'process'/);
});

test('a worker that cannot follow its OTEL_* settings refuses to start, naming the variable', needsInboxd, async () => {
  const { code, stderr } = await tracedWorker({ TRACED_NAMESPACE: namespace(), TRACED_KEY: 'none', OTEL_TRACES_EXPORTER: 'jaeger' });
  assert.notEqual(code, 0);
  assert.match(stderr, /OTEL_TRACES_EXPORTER=jaeger: unknown exporter "jaeger"/);
});
