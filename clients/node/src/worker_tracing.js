// The runtime's spans: one `process` span per handler run, one `action` span per job.action.
//
// Tracing is on for a worker when the application registered a tracer provider (it is used and
// nothing is installed), or else when the OTEL_* rule says so (src/tracing_rule.js): then the SDK's
// provider is installed once per process, with a batch span processor and the exporter the rule
// names, and flushed and shut down after the last worker stops. Off, `tracer` stays null and the
// worker makes no span, no attribute object and no SDK object: every path checks that one binding.
//
// The process span joins the delivery's trace, by one rule: it is a child of the event's stored
// context when the event was not replayed and was accepted less than an hour before the handler
// starts; otherwise (a replay, or a trace too old to extend) it is a new root with a link to the
// stored context. An event that brought no context starts a new root. Attributes name the event by
// its reference (12 hex digits of sha256(namespace NUL key), the server's event_ref), never by its
// key, and carry no payload, metadata, token or claim token.

import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';

import { context, ProxyTracerProvider, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';

import { toDate } from './convert.js';
import { storedSpanContext } from './trace_context.js';
import { TracingConfigError, tracingRule } from './tracing_rule.js';

const TRACER_NAME = '@inboxd/node';
const TRACER_VERSION = createRequire(import.meta.url)('../package.json').version;

/** A process span is a child of the stored context only for an event accepted less than this long ago. */
export const CHILD_MAX_AGE_MS = 60 * 60_000;

// What the API's global provider delegates to while nobody registered one: anything else is the application's.
const NOTHING_REGISTERED = new ProxyTracerProvider().getDelegate();

/** The runtime's tracer; null while tracing is off. */
let tracer = null;
// The choice the running workers share (a promise of {tracer, provider}), and how many share it.
let chosen = null;
let users = 0;

/** The tracer the runtime's spans come from, or null when tracing is off. */
export function runtimeTracer() {
  return tracer;
}

/** The application registered a tracer provider of its own (the global one is not the API's default). */
export function applicationProviderRegistered() {
  const global = trace.getTracerProvider();
  const delegate = typeof global.getDelegate === 'function' ? global.getDelegate() : global;
  return delegate !== NOTHING_REGISTERED;
}

/**
 * Turns tracing on, or leaves it off, for a worker that starts; resolves to the function its stop
 * calls (after the last worker, the provider this runtime installed is flushed and shut down).
 * Rejects with a TracingConfigError naming the variable when the OTEL_* settings cannot be followed.
 * @param {{env?: Record<string, string | undefined>, logger?: {info: (line: string) => void}}} [options]
 */
export async function startTracing({ env = process.env, logger = console } = {}) {
  users += 1;
  chosen ??= choose(env, logger);
  try {
    ({ tracer } = await chosen);
  } catch (err) {
    users -= 1;
    chosen = null;
    throw err;
  }
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    users -= 1;
    if (users > 0) return;
    const { provider } = await chosen;
    chosen = null;
    tracer = null;
    if (provider !== null) {
      await provider.shutdown(); // flushes what the batch processor holds first
      trace.disable();
      context.disable();
      propagation.disable();
    }
  };
}

async function choose(env, logger) {
  if (applicationProviderRegistered()) return { tracer: trace.getTracer(TRACER_NAME, TRACER_VERSION), provider: null };
  const rule = tracingRule(env);
  if (!rule.on) return { tracer: null, provider: null };
  let sdk;
  let resources;
  let exporters;
  try {
    [sdk, resources] = await Promise.all([load('@opentelemetry/sdk-trace-node'), load('@opentelemetry/resources')]);
    exporters = await Promise.all(rule.exporters.map((name) => exporterFor(name, rule, sdk)));
  } catch (err) {
    if (!(err instanceof MissingPackage)) throw err;
    logger.info(
      `inboxd: tracing is off: the OTEL_* settings ask for traces (${rule.exporters.join(', ')}), but ${err.message} ` +
        'is not installed (it is among @inboxd/node\'s optional dependencies)',
    );
    return { tracer: null, provider: null };
  }
  const provider = new sdk.NodeTracerProvider({
    // The SDK's defaults (service.name unknown_service:node unless the application names one) under OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    resource: resources.defaultResource().merge(resources.detectResources({ detectors: [resources.envDetector] })),
    spanProcessors: exporters.map((exporter) => new sdk.BatchSpanProcessor(exporter)),
  });
  provider.register();
  return { tracer: provider.getTracer(TRACER_NAME, TRACER_VERSION), provider };
}

class MissingPackage extends Error {}

async function load(name) {
  try {
    return await import(name);
  } catch (err) {
    if (err?.code === 'ERR_MODULE_NOT_FOUND' || err?.code === 'MODULE_NOT_FOUND') throw new MissingPackage(name);
    throw err;
  }
}

/** The span exporter `name` ('otlp' or 'console') as the rule configures it; the SDK reads its OTEL_EXPORTER_OTLP_* itself. */
export async function exporterFor(name, rule, sdk) {
  if (name === 'console') return new sdk.ConsoleSpanExporter();
  if (rule.protocol === 'grpc') return new (await load('@opentelemetry/exporter-trace-otlp-grpc')).OTLPTraceExporter();
  let http;
  try {
    http = await load('@opentelemetry/exporter-trace-otlp-proto');
  } catch (err) {
    if (!(err instanceof MissingPackage)) throw err;
    throw new TracingConfigError(
      `${rule.protocolVariable}=http/protobuf: @opentelemetry/exporter-trace-otlp-proto is not installed ` +
        '(npm install it beside @inboxd/node, or export over grpc, the default)',
    );
  }
  return new http.OTLPTraceExporter();
}

/** The server's event_ref: names an event without revealing its key. */
export function eventRef(namespace, eventKey) {
  return createHash('sha256').update(namespace, 'utf8').update('\0').update(eventKey, 'utf8').digest('hex').slice(0, 12);
}

/**
 * How a handler's span relates to the event's stored trace: 'child', 'link', or null when the
 * event brought no (valid) context. `nowMs` is when the handler starts.
 */
export function traceRelation(event, storedContext, nowMs) {
  if (storedContext === null) return null;
  if (event.replayed) return 'link';
  const acceptedAt = event.acceptedAt ? toDate(event.acceptedAt).getTime() : Number.NaN;
  return nowMs - acceptedAt < CHILD_MAX_AGE_MS ? 'child' : 'link';
}

/** Starts the `process` span of a handler run that starts at nowMs (tracing is on). */
export function startProcessSpan(event, nowMs) {
  const stored = storedSpanContext(event.traceContext);
  const relation = traceRelation(event, stored, nowMs);
  const attributes = {
    ...eventAttributes(event),
    'messaging.operation.type': 'process',
    'messaging.operation.name': 'process',
    'inboxd.event_type': event.eventType,
    'inboxd.attempt': event.attempt,
    'inboxd.replayed': Boolean(event.replayed),
    'inboxd.stale': Boolean(event.stale),
    'inboxd.fencing_token': int64(event.fencingToken),
  };
  const options = { kind: SpanKind.CONSUMER, attributes, root: relation !== 'child' };
  if (relation !== null) attributes['inboxd.trace.parent'] = relation;
  if (relation === 'link') options.links = [{ context: stored }];
  const parent = relation === 'child' ? trace.setSpanContext(ROOT_CONTEXT, stored) : ROOT_CONTEXT;
  return tracer.startSpan('process', options, parent);
}

/** Ends a handler's span; a handler that failed (`error`) leaves it ERROR, with the exception. */
export function endProcessSpan(span, error) {
  if (error) fail(span, error);
  span.end();
}

/**
 * Runs job.action's work (`run`, resolving to {performed, record}) in an `action` span, a child of
 * the current (process) span, active while it runs so the perform function's own spans nest in it.
 * @param {import('./job.js').Job} job
 */
export async function traceAction(job, name, run) {
  const span = tracer.startSpan('action', {
    kind: SpanKind.INTERNAL,
    attributes: { ...eventAttributes(job.event), 'inboxd.action.name': name },
  });
  try {
    const result = await context.with(trace.setSpan(context.active(), span), run);
    noteLedger(span, result.record);
    span.setAttribute('inboxd.action.reused', !result.performed);
    return result;
  } catch (err) {
    noteLedger(span, job.actions.get(name));
    fail(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** trace_id and span_id for a log line about `span`, or null when it is not recording. */
export function logIds(span) {
  if (!span?.isRecording()) return null;
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

function eventAttributes({ namespace, eventKey }) {
  return {
    'messaging.system': 'inboxd',
    'messaging.destination.name': namespace,
    'messaging.message.id': eventRef(namespace, eventKey),
  };
}

const OUTCOMES = new Set(['SUCCEEDED', 'FAILED', 'UNKNOWN']);

/** The action's idempotency key and its outcome as the ledger last recorded it (an INTENDED alone: no outcome). */
function noteLedger(span, record) {
  if (!record) return;
  if (record.idempotencyKey) span.setAttribute('inboxd.action.idempotency_key', record.idempotencyKey);
  const outcome = String(record.state ?? '').replace(/^ACTION_STATE_/, '');
  if (OUTCOMES.has(outcome)) span.setAttribute('inboxd.action.outcome', outcome);
}

function fail(span, error) {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
}

// int64 arrives as a decimal string: a number while exact, else the string.
function int64(value) {
  const number = Number(value);
  return Number.isSafeInteger(number) ? number : String(value);
}
