// One item's refusal on a batch or a stream: the status code the unary call would have ended with.

import grpc from '@grpc/grpc-js';

const { status } = grpc;

/** An item refused alone; `code` and `details` as on grpc-js's ServiceError, so callers test `err.code`. */
export class ItemError extends Error {
  constructor(code, details) {
    super(`${code} ${statusName(code)}: ${details}`);
    this.name = 'ItemError';
    this.code = code;
    this.details = details;
  }
}

/** The status' name for a code: 10 is 'ABORTED'. */
export function statusName(code) {
  return Object.keys(status).find((name) => status[name] === code) ?? 'UNKNOWN';
}
