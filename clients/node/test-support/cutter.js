// A TCP relay in front of the live inboxd that can cut every connection through it at once: the
// network failing under an open stream, as a reset connection or a balancer's timeout would. Or
// silence them: a path that goes quiet with no FIN and no RST (a partition, a frozen VM), where
// every connection stays open and nothing more crosses it either way, not even a close.

import net from 'node:net';

import { TARGET } from './helpers.js';

export async function cutter() {
  const [host, port] = TARGET.split(':');
  const pairs = new Set();
  let connections = 0;
  let silent = false;
  // Connections taken while silent: never answered, reset when the path mends (the client dials again).
  const unanswered = new Set();
  const swallow = (socket) => {
    socket.on('data', () => {});
    socket.on('error', () => {});
  };
  const server = net.createServer((downstream) => {
    connections += 1;
    if (silent) {
      unanswered.add(downstream);
      swallow(downstream);
      return;
    }
    const upstream = net.connect(Number(port), host);
    const pair = { downstream, upstream };
    pairs.add(pair);
    const drop = () => {
      if (silent) return; // a silent path carries no close either
      pairs.delete(pair);
      downstream.destroy();
      upstream.destroy();
    };
    downstream.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    downstream.pipe(upstream);
    upstream.pipe(downstream);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    target: `127.0.0.1:${server.address().port}`,
    /** How many connections came through so far. */
    get connections() {
      return connections;
    },
    /** Drops every connection open now, both ways, without a goodbye. */
    cut() {
      for (const { downstream, upstream } of [...pairs]) {
        downstream.resetAndDestroy?.() ?? downstream.destroy();
        upstream.destroy();
      }
    },
    /** From now on, what either side sends is read and dropped, and no connection closes. */
    silence() {
      silent = true;
      for (const { downstream, upstream } of pairs) {
        downstream.unpipe(upstream);
        upstream.unpipe(downstream);
        swallow(downstream);
        swallow(upstream);
      }
    },
    /** The path is back for new connections; those taken while silent are reset. */
    mend() {
      silent = false;
      for (const socket of unanswered) socket.resetAndDestroy?.() ?? socket.destroy();
      unanswered.clear();
    },
    close() {
      silent = false;
      for (const socket of unanswered) socket.destroy();
      unanswered.clear();
      this.cut();
      server.close();
    },
  };
}
