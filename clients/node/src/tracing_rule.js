// Whether the runtime exports traces, and through what: the one rule every inboxd process follows.
//
// On only when OTEL_TRACES_EXPORTER names an exporter other than `none`, or, when it is unset,
// when an OTLP endpoint is configured (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT). OTEL_SDK_DISABLED=true is always off. The exporters are `otlp`
// (OTLP/gRPC, or OTLP/HTTP with protobuf when OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL says
// http/protobuf) and `console`; any other name is refused at start, naming the variable, rather
// than leaving an operator who asked for traces with none and no word why. Everything else
// (sampler, resource, batching, the exporter's endpoint, headers, timeout) is the SDK's own
// handling of the standard variables.

const EXPORTERS = new Set(['otlp', 'console']);
const PROTOCOLS = new Set(['grpc', 'http/protobuf']);

/** A misconfigured OTEL_* variable: thrown when the worker starts, naming the variable. */
export class TracingConfigError extends Error {
  constructor(message) {
    super(message);
    this.name = 'TracingConfigError';
  }
}

/**
 * The rule applied to `env`: {on: false} or {on: true, exporters: ['otlp' | 'console', ...],
 * protocol: 'grpc' | 'http/protobuf', protocolVariable}. Throws TracingConfigError for an unknown
 * exporter or protocol.
 * @param {Record<string, string | undefined>} [env]
 */
export function tracingRule(env = process.env) {
  const value = (name) => (env[name] ?? '').trim();
  if (value('OTEL_SDK_DISABLED').toLowerCase() === 'true') return { on: false };
  let exporters;
  const named = value('OTEL_TRACES_EXPORTER');
  if (named !== '') {
    const names = named
      .split(',')
      .map((name) => name.trim().toLowerCase())
      .filter((name) => name !== '');
    for (const name of names) {
      if (name !== 'none' && !EXPORTERS.has(name)) {
        throw new TracingConfigError(
          `OTEL_TRACES_EXPORTER=${named}: unknown exporter ${JSON.stringify(name)} (inboxd's Node runtime knows otlp, console and none)`,
        );
      }
    }
    exporters = [...new Set(names.filter((name) => name !== 'none'))];
  } else if (value('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') !== '' || value('OTEL_EXPORTER_OTLP_ENDPOINT') !== '') {
    exporters = ['otlp'];
  } else {
    exporters = [];
  }
  if (exporters.length === 0) return { on: false };
  const protocolVariable =
    value('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') !== '' ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = value(protocolVariable).toLowerCase() || 'grpc';
  if (exporters.includes('otlp') && !PROTOCOLS.has(protocol)) {
    throw new TracingConfigError(
      `${protocolVariable}=${value(protocolVariable)}: inboxd's Node runtime exports OTLP over grpc (the default) or http/protobuf`,
    );
  }
  return { on: true, exporters, protocol, protocolVariable };
}
