// How a claim ends, fenced by its token: completed, failed or released, and the outcome to report.
//
// A handler that resolved completes the event (IGNORED with {ignored: reason}); one that threw
// fails it, to be retried with backoff (error.retryAfterMs overrides it; error.permanent
// dead-letters). Only a handler that gave up because the worker stops (it rejected with the
// signal's WorkerStopping) is released, without counting the attempt; a crash counts, stopping
// or not. ABORTED means a newer claim superseded this one: the event is left alone. Any other
// error leaves the lease to lapse and the event to come back: at-least-once, never lost.

import grpc from '@grpc/grpc-js';

const { status } = grpc;
// inboxd keeps 4 KiB of an error; never the payload, only what the handler threw.
const MAX_ERROR = 4096;

/** The reason a job's signal aborts when the worker stops. */
export class WorkerStopping extends Error {
  constructor() {
    super('the worker is stopping');
    this.name = 'WorkerStopping';
  }
}

/**
 * Ends the claim `fence` as the handler's end says; resolves to 'completed', 'ignored', 'failed',
 * 'released', 'superseded' or 'unfinished' (then `onError(err)` was told why).
 * @param {{client: object, completions: import('./completions.js').CompletionBatcher}} via
 */
export async function finishClaim({ client, completions }, fence, { result, error, stopping, onError }) {
  try {
    if (error && stopping && isStopping(error)) {
      await client.release(fence);
      return 'released';
    }
    if (error) {
      await client.fail({
        ...fence,
        error: describe(error),
        permanent: error?.permanent === true,
        retryAfterMs: error?.retryAfterMs,
      });
      return 'failed';
    }
    const reason = result?.ignored;
    await completions.complete({ ...fence, disposition: reason ? 'IGNORED' : 'APPLIED', reason: reason || '' });
    return reason ? 'ignored' : 'completed';
  } catch (err) {
    return failedEnd(err, onError);
  }
}

/** Gives the claim back (Release: attempt not counted); resolves to 'released', 'superseded' or 'unfinished'. */
export async function releaseClaim(client, { namespace, eventKey, claimToken }, onError) {
  try {
    await client.release({ namespace, eventKey, claimToken });
    return 'released';
  } catch (err) {
    return failedEnd(err, onError);
  }
}

function failedEnd(err, onError) {
  if (err?.code === status.ABORTED) return 'superseded';
  onError(err);
  return 'unfinished';
}

function isStopping(error) {
  return error instanceof WorkerStopping || error?.cause instanceof WorkerStopping;
}

function describe(error) {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return text.slice(0, MAX_ERROR);
}
