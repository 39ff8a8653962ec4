// A grpc-js server in front of the live inboxd that forwards every call, for tests that need the
// network to misbehave on one call: `hook(method, request, forward)` forwards it (changed or not),
// or holds it by never calling forward (the caller then sees its deadline pass).

import grpc from '@grpc/grpc-js';

import { InboxClient, loadInboxd } from '../src/index.js';
import { TARGET } from './helpers.js';

export async function proxy(hook) {
  const upstream = new InboxClient({ target: TARGET });
  const service = loadInboxd().InboxService.service;
  const handlers = {};
  for (const method of Object.keys(service)) {
    handlers[method] = (call, callback) => hook(method, call.request, (request) => upstream.raw[method](request, callback));
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
