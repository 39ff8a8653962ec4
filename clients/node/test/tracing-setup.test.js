// The tracing rule and set-up of the Node runtime: which OTEL_* settings turn export on and through
// what (no inboxd needed), and workers in child processes (test-support/traced-worker.js) that
// install the SDK's provider from the variables alone, find the SDK missing, or refuse a setting.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { TracingConfigError, tracingRule } from '../src/tracing_rule.js';
import { CHILD_MAX_AGE_MS, eventRef, runtimeTracer, startTracing, traceRelation } from '../src/worker_tracing.js';
import { client, namespace, needsInboxd, TARGET } from '../test-support/helpers.js';
import { clearOtelEnvironment, deliveryContext } from '../test-support/tracing.js';

clearOtelEnvironment();

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
