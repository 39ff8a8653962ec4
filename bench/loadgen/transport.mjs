// The load generator's connections: two transports behind one `call(service, method, request)`.
// The contract is loaded from protos/ at run time, so an RPC added there needs no stub step.

import http2 from 'node:http2';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
// The Node client's dependencies: nothing to install for the benchmark.
const require = createRequire(path.join(REPO, 'clients', 'node', 'package.json'));
export const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const LOADER = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
// No deadline: a deadline is a timer per call, and the window bounds every run anyway.
const CALL_OPTIONS = {};

export function loadServices() {
  const inbox = protoLoader.loadSync(['inboxd/v1/inbox.proto'], {
    ...LOADER,
    // INBOXD_PROTOS, as for the Node client: another checkout's contract, for trying a branch.
    includeDirs: [process.env.INBOXD_PROTOS || path.join(REPO, 'protos')],
  });
  const health = protoLoader.loadSync([path.join(HERE, 'health.proto')], LOADER);
  return {
    Inbox: grpc.loadPackageDefinition(inbox).inboxd.v1.InboxService,
    Health: grpc.loadPackageDefinition(health).grpc.health.v1.Health,
  };
}

// Two transports behind one `call(service, method, request)`. `h2` (the default) frames gRPC
// by hand on node:http2, one session (one TCP connection) per channel, with the
// contract's own (de)serializers from @grpc/proto-loader: it costs about half
// the CPU per call of `grpc-js`, whose per-call machinery (filters, call
// stacks, retry and channelz bookkeeping) costs about as much as the server's
// whole empty RPC. `grpc-js` stays selectable, to check the two agree.
class RpcError extends Error {
  constructor(code, details) {
    super(`${details} (code ${code})`);
    this.code = code;
    this.details = details;
  }
}

function grpcJsChannel(spec, services, id) {
  const options = channelOptions(id);
  const inbox = new services.Inbox(spec.target, grpc.credentials.createInsecure(), options);
  // The health client shares the inbox client's channel: one connection per channel.
  const health = new services.Health(spec.target, grpc.credentials.createInsecure(), {
    ...options,
    channelOverride: inbox.getChannel(),
  });
  const clients = { inbox, health };
  return {
    ready: () =>
      new Promise((resolve, reject) =>
        inbox.waitForReady(Date.now() + 30_000, (err) => (err ? reject(err) : resolve())),
      ),
    call: (service, method, request) =>
      new Promise((resolve, reject) => {
        clients[service][method](request, CALL_OPTIONS, (err, response) => (err ? reject(err) : resolve(response)));
      }),
    // A bidirectional stream: `write(request)`, `end()`, each answer to `onMessage`, the end to `onEnd(err)`.
    stream: (service, method, onMessage, onEnd) => {
      const call = clients[service][method](CALL_OPTIONS);
      call.on('data', onMessage);
      call.on('error', (err) => onEnd(err));
      call.on('end', () => onEnd(null));
      return { write: (request) => call.write(request), end: () => call.end(), cancel: () => call.cancel() };
    },
    close: () => inbox.close(),
  };
}

// gRPC's length-prefixed messages out of an HTTP/2 stream's chunks, however the chunks split them.
function messageReader(deserialize, onMessage) {
  let pending = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= 5) {
      const size = pending.readUInt32BE(1);
      if (pending.length < 5 + size) break;
      onMessage(deserialize(pending.subarray(5, 5 + size)));
      pending = pending.subarray(5 + size);
    }
  };
}

function frame(message) {
  const framed = Buffer.allocUnsafe(5 + message.length);
  framed[0] = 0;
  framed.writeUInt32BE(message.length, 1);
  message.copy(framed, 5);
  return framed;
}

function h2Channel(spec, services, _id) {
  const session = http2.connect(`http://${spec.target}`, { settings: { enablePush: false } });
  session.on('error', () => {}); // surfaced by the calls that fail
  const defs = { inbox: services.Inbox.service, health: services.Health.service };
  // One headers object per method, made once: node:http2 copies it on every request.
  const headers = {};
  for (const service of Object.values(defs)) {
    for (const def of Object.values(service)) {
      headers[def.path] = { ':method': 'POST', ':path': def.path, 'content-type': 'application/grpc', te: 'trailers' };
    }
  }
  return {
    ready: () =>
      new Promise((resolve, reject) => {
        if (session.connected) resolve();
        session.once('connect', () => resolve());
        session.once('error', reject);
      }),
    call: (service, method, request) => {
      const def = defs[service][method];
      const framed = frame(def.requestSerialize(request));
      return new Promise((resolve, reject) => {
        const stream = session.request(headers[def.path]);
        const chunks = [];
        let status;
        let details = '';
        const takeStatus = (headers) => {
          if (headers['grpc-status'] !== undefined) {
            status = Number(headers['grpc-status']);
            details = decodeURIComponent(headers['grpc-message'] || '');
          }
        };
        stream.on('response', takeStatus); // a trailers-only answer carries its status here
        stream.on('trailers', takeStatus);
        stream.on('data', (chunk) => chunks.push(chunk));
        stream.on('error', (err) => reject(err));
        stream.on('close', () => {
          if (status === undefined) {
            reject(new RpcError(14, `stream closed without a gRPC status (rst ${stream.rstCode})`));
          } else if (status !== 0) {
            reject(new RpcError(status, details));
          } else {
            const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
            resolve(def.responseDeserialize(body.subarray(5, 5 + body.readUInt32BE(1))));
          }
        });
        stream.end(framed);
      });
    },
    // A bidirectional stream: each request framed as it is written, each answer handed to `onMessage`
    // as soon as its last byte arrives, the end to `onEnd` (null for status OK).
    stream: (service, method, onMessage, onEnd) => {
      const def = defs[service][method];
      const stream = session.request(headers[def.path], { endStream: false });
      let status;
      let details = '';
      const takeStatus = (headers) => {
        if (headers['grpc-status'] !== undefined) {
          status = Number(headers['grpc-status']);
          details = decodeURIComponent(headers['grpc-message'] || '');
        }
      };
      stream.on('response', takeStatus);
      stream.on('trailers', takeStatus);
      stream.on('data', messageReader(def.responseDeserialize, onMessage));
      stream.on('error', () => {}); // the close below says how it ended
      stream.on('close', () => {
        if (status === 0) onEnd(null);
        else if (status === undefined) onEnd(new RpcError(14, `stream closed without a gRPC status (rst ${stream.rstCode})`));
        else onEnd(new RpcError(status, details));
      });
      // The messages written in one turn of the event loop leave in one write: measured on AcceptStream
      // (3 paired runs), about 15% less of the generator's CPU per item than a write per message.
      let pending = [];
      const flush = () => {
        stream.write(pending.length === 1 ? pending[0] : Buffer.concat(pending));
        pending = [];
      };
      return {
        write: (request) => {
          if (!pending.length) setImmediate(flush);
          pending.push(frame(def.requestSerialize(request)));
        },
        // After what is pending: setImmediate runs its callbacks in the order they were queued.
        end: () => (pending.length ? setImmediate(() => stream.end()) : stream.end()),
        cancel: () => stream.close(http2.constants.NGHTTP2_CANCEL),
      };
    },
    close: () => session.close(),
  };
}

export function openChannel(spec, services, id) {
  return (spec.transport || 'h2') === 'grpc-js' ? grpcJsChannel(spec, services, id) : h2Channel(spec, services, id);
}

export function describe(err) {
  const code = err && err.code !== undefined ? ` (code ${err.code})` : '';
  return `${err && err.details ? err.details : String(err)}${code}`.slice(0, 300);
}

// Distinct options give each channel its own connection: the kernel spreads
// connections, not calls, over SO_REUSEPORT server processes.
function channelOptions(id) {
  return {
    'grpc.use_local_subchannel_pool': 1,
    'grpc.primary_user_agent': `inboxd-bench/${id}`,
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    // Per-call bookkeeping the benchmark does not need: retry buffering and channelz counters.
    'grpc.enable_retries': 0,
    'grpc.enable_channelz': 0,
  };
}
