// inboxd for Node.js: a promise-based client and a worker loop on @grpc/grpc-js.

export { CompleteItemError, InboxClient, status } from './client.js';
export { AcceptStream } from './accept_stream.js';
export { ItemError } from './item_error.js';
export { CompletionBatcher } from './completions.js';
export { Worker, LeaseLost } from './worker.js';
export { WorkerStopping } from './finishing.js';
export { HandlerTimeout } from './handler_timeout.js';
export { Job, ActionFailed, ActionUnresolved } from './job.js';
export { NotJsonPayload, isJsonType, DEFAULT_CONTENT_TYPE } from './payloads.js';
export { duration, timestamp, toDate, compareInt64 } from './convert.js';
export { loadInboxd, DEFAULT_PROTOS_DIR } from './protos.js';
export { TracingConfigError, tracingRule } from './tracing_rule.js';
export { eventRef } from './worker_tracing.js';
