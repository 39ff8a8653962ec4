// Requests built from a caller's plain objects, and batch results read back: shared by the unary
// calls (client.js) and the streams (accept_stream.js, work_stream.js), which send the same messages.

import grpc from '@grpc/grpc-js';

import { duration, enumValue, timestamp } from './convert.js';
import { ItemError } from './item_error.js';
import { payloadBytes } from './payloads.js';

const { status } = grpc;

/** One CompleteBatch item's refusal; `code` and `details` as on grpc-js's ServiceError. */
export class CompleteItemError extends ItemError {
  constructor(code, details) {
    super(code, details);
    this.name = 'CompleteItemError';
  }
}

/** The fence of a fenced call; throws before anything is sent when a part is missing. */
export function fenced({ namespace, eventKey, claimToken }) {
  if (!namespace || !eventKey || !claimToken) {
    throw new TypeError('a fenced call needs namespace, eventKey and claimToken');
  }
  return { namespace, eventKey, claimToken };
}

/** A RenewLeaseRequest; no leaseMs: the server's default lease. */
export function renewRequest({ leaseMs, ...fence }) {
  const request = fenced(fence);
  if (leaseMs !== undefined) request.lease = duration(leaseMs);
  return request;
}

/** A CompleteRequest; disposition 'APPLIED' (default) or 'IGNORED' with a reason. */
export function completeRequest({ disposition = 'APPLIED', reason = '', ...fence }) {
  return { ...fenced(fence), disposition: enumValue('DISPOSITION_', disposition), reason };
}

/** A FailRequest: retried after backoff (or retryAfterMs), or dead-lettered when permanent. */
export function failRequest({ error = '', permanent = false, retryAfterMs, ...fence }) {
  const request = { ...fenced(fence), error, permanent };
  if (retryAfterMs !== undefined) request.retryAfter = duration(retryAfterMs);
  return request;
}

/** A RecordActionOutcomeRequest; state INTENDED, SUCCEEDED, FAILED or UNKNOWN, with or without its prefix. */
export function recordRequest({ action, state, externalRef = '', detail = '', ...fence }) {
  return { ...fenced(fence), action, state: enumValue('ACTION_STATE_', state), externalRef, detail };
}

/**
 * An AcceptRequest from an event as callers give it (payload as a value, availableAt as a Date).
 * contentType '' (the default) is application/json; under another type the payload is a Buffer or a string.
 */
export function acceptRequest({ payload = {}, availableAt, metadata = {}, contentType = '', ...fields }) {
  const request = { ...fields, payload: payloadBytes(payload, contentType), metadata, contentType };
  if (availableAt) request.availableAt = timestamp(availableAt);
  if (request.revision !== undefined) request.revision = String(request.revision);
  return request;
}

/** A CompleteRequest as a batch item: sent as it is, for the server to judge (a missing field is its own refusal). */
export function completeItem(item) {
  return {
    namespace: item.namespace ?? '',
    eventKey: item.eventKey ?? '',
    claimToken: item.claimToken ?? '',
    disposition: enumValue('DISPOSITION_', item.disposition ?? 'APPLIED'),
    reason: item.reason ?? '',
  };
}

/** One entry per completion sent: null when it completed, else its CompleteItemError. */
export function outcomes(method, results = [], sent) {
  if (results.length !== sent) {
    throw new CompleteItemError(status.INTERNAL, `${method} answered ${results.length} results for ${sent} completions`);
  }
  return results.map(({ code, message }) => (code === status.OK ? null : new CompleteItemError(code, message)));
}
