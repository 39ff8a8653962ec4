// Shared by the tracing tests (test/tracing.test.js, test/tracing-setup.test.js): a delivery's W3C
// context, a proxy that notes what each call carried, a worker run until its event settled, Replay.

import { randomBytes } from 'node:crypto';

import grpc from '@grpc/grpc-js';

import { loadInboxd } from '../src/index.js';
import { newWorker, settledOf, TARGET } from './helpers.js';
import { proxy } from './proxy.js';

function randomHex(bytes) {
  return randomBytes(bytes).toString('hex');
}

/** A W3C context the "provider" sent: what the edge's Accept stores with the event. */
export function deliveryContext() {
  const traceId = randomHex(16);
  const spanId = randomHex(8);
  return { traceId, spanId, traceContext: { traceparent: `00-${traceId}-${spanId}-01`, tracestate: 'vendor=delivery' } };
}

/** Clears the OTEL_* variables the shell exported: the tracing tests set what they need themselves. */
export function clearOtelEnvironment() {
  for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) delete process.env[name];
}

/** A proxy in front of inboxd that notes every call and stream message with the traceparent it came with. */
export async function recordingProxy() {
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
export function completingTraceparents(seen, claimToken) {
  const items = ({ method, request }) => {
    if (method === 'Work.complete') return [request.complete];
    if (method === 'Work.completeBatch') return request.completeBatch.completions;
    if (method === 'Complete') return [request];
    if (method === 'CompleteBatch' || method === 'Claim') return request.completions ?? [];
    return [];
  };
  return seen.filter((call) => items(call).some((item) => item.claimToken === claimToken)).map((call) => call.traceparent);
}

/** The traceparents of the calls that recorded an action outcome for the claim `claimToken`. */
export function recordTraceparents(seen, claimToken) {
  return seen
    .filter(({ method, request }) => {
      const record = method === 'Work.recordActionOutcome' ? request.recordActionOutcome : method === 'RecordActionOutcome' ? request : null;
      return record?.claimToken === claimToken;
    })
    .map((call) => call.traceparent);
}

/** Runs a worker on `ns` until `count` handler runs of `eventKey` settled; resolves to their 'settled' reports. */
export async function handle(inboxClient, ns, eventKey, handler, { count = 1, between, ...options } = {}) {
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

/** The operator's Replay of one event (InboxAdminService). */
export function replay(ns, eventKey) {
  const admin = new (loadInboxd().InboxAdminService)(TARGET, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    admin.Replay({ namespace: ns, eventKey, reason: 'tracing test' }, (err, answer) => {
      admin.close();
      if (err) reject(err);
      else resolve(answer);
    });
  });
}
