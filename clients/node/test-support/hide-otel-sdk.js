// Makes the OpenTelemetry SDK look uninstalled, as `npm install --omit=optional` leaves it, for a
// child process a test starts with `node --import ./test-support/hide-otel-sdk.js`: importing any
// @opentelemetry package but the API fails as a missing package does (ERR_MODULE_NOT_FOUND).

import { register } from 'node:module';

const hooks = `
export async function resolve(specifier, context, next) {
  // Resolved as a name no registry holds, so Node itself answers as for a missing package.
  const hidden = specifier.startsWith('@opentelemetry/') && specifier !== '@opentelemetry/api';
  return next(hidden ? specifier.replace('@opentelemetry/', '@opentelemetry-hidden-by-test/') : specifier, context);
}
`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
