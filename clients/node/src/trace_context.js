// W3C Trace Context in and out of inboxd's messages, with OpenTelemetry's own propagator.
//
// The client puts the caller's current context on every call (`traceparent`/`tracestate`
// metadata, or a message's `trace_context` on a stream); the runtime reads an event's stored
// context back. Only these two headers travel, never the global propagator's choice (the contract
// stores exactly these two). With no valid span current this costs one lookup of the current span
// and nothing else, so a process without tracing pays nothing for it.
//
// The propagator comes from @opentelemetry/core, an optional dependency: it is loaded the first time
// a valid span is current (an SDK is then running, so the package is there), synchronously, since
// a call's metadata is built synchronously; without the package nothing is injected.

import { createRequire } from 'node:module';

import { context, defaultTextMapGetter, defaultTextMapSetter, isSpanContextValid, ROOT_CONTEXT, trace } from '@opentelemetry/api';

const require = createRequire(import.meta.url);

// undefined: not loaded yet; null: @opentelemetry/core is not installed.
let propagator;

function w3c() {
  if (propagator === undefined) {
    try {
      const { W3CTraceContextPropagator } = require('@opentelemetry/core');
      propagator = new W3CTraceContextPropagator();
    } catch {
      propagator = null;
    }
  }
  return propagator;
}

/**
 * The context `ctx` (the current one by default) as a TraceContext message ({traceparent,
 * tracestate}), or null when no valid span is current in it.
 */
export function currentTraceContext(ctx = context.active()) {
  const span = trace.getSpan(ctx);
  if (span === undefined || !isSpanContextValid(span.spanContext())) return null;
  const carrier = {};
  w3c()?.inject(ctx, carrier, defaultTextMapSetter);
  if (!carrier.traceparent) return null;
  return { traceparent: carrier.traceparent, tracestate: carrier.tracestate ?? '' };
}

/** Adds the current context to a call's grpc-js Metadata, when a valid span is current. */
export function addTraceMetadata(metadata) {
  const current = currentTraceContext();
  if (current === null) return;
  metadata.set('traceparent', current.traceparent);
  if (current.tracestate) metadata.set('tracestate', current.tracestate);
}

/**
 * A stored TraceContext message read back as a remote SpanContext, or null when it is absent or
 * not W3C's format (the propagator ignores what it cannot parse, as W3C asks).
 */
export function storedSpanContext(stored) {
  if (!stored?.traceparent) return null;
  const reader = w3c();
  if (reader === null) return null;
  const carrier = { traceparent: stored.traceparent, tracestate: stored.tracestate || undefined };
  const spanContext = trace.getSpanContext(reader.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter));
  return spanContext && isSpanContextValid(spanContext) ? spanContext : null;
}
