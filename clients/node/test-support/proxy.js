// A grpc-js server in front of the live inboxd that forwards every call, for tests that need the
// network to misbehave on one call: `hook(method, request, forward)` forwards it (changed or not),
// or holds it by never calling forward (the caller then sees its deadline pass). On a stream each
// message from the client goes through the hook, named for what it carries ('Work.renewLease',
// 'Work.subscribe', 'AcceptStream.accept'). `streams: false` serves the unary methods only: a server
// older than the streams, which answers them UNIMPLEMENTED. The hook's fourth argument is the
// metadata the call (or the stream) came with, to look at; it is not forwarded.

import grpc from '@grpc/grpc-js';

import { InboxClient, loadInboxd } from '../src/index.js';
import { TARGET } from './helpers.js';

const forwardAll = (method, request, forward) => forward(request);

export async function proxy(hook = forwardAll, { streams = true } = {}) {
  const upstream = new InboxClient({ target: TARGET });
  const service = loadInboxd().InboxService.service;
  const handlers = {};
  for (const [method, definition] of Object.entries(service)) {
    if (!definition.requestStream) {
      handlers[method] = (call, callback) =>
        hook(method, call.request, (request) => upstream.raw[method](request, callback), call.metadata);
    } else if (streams) {
      handlers[method] = (call) => relayStream(upstream, method, call, hook);
    }
  }
  const server = new grpc.Server();
  server.addService(service, handlers);
  const port = await new Promise((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    );
  });
  return {
    target: `127.0.0.1:${port}`,
    close() {
      server.forceShutdown();
      upstream.close();
    },
  };
}

/** Relays one bidirectional stream: each client message through the hook, each answer back as it is. */
function relayStream(upstream, method, call, hook) {
  const onward = upstream.openStream(method);
  onward.on('data', (message) => call.write(message));
  onward.on('error', () => {});
  onward.on('status', (status) => {
    if (status.code === grpc.status.OK) call.end();
    else call.emit('error', { code: status.code, details: status.details, metadata: status.metadata });
  });
  call.on('data', (message) => {
    const kind = message.call ?? (message.accept ? 'accept' : 'credit');
    hook(`${method}.${kind}`, message, (changed) => onward.write(changed), call.metadata);
  });
  call.on('end', () => onward.end());
  call.on('cancelled', () => onward.cancel());
  call.on('error', () => onward.cancel());
}
