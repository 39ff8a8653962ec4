// A TCP relay in front of the live inboxd that can cut every connection through it at once: the
// network failing under an open stream, as a reset connection or a balancer's timeout would.

import net from 'node:net';

import { TARGET } from './helpers.js';

export async function cutter() {
  const [host, port] = TARGET.split(':');
  const pairs = new Set();
  let connections = 0;
  const server = net.createServer((downstream) => {
    connections += 1;
    const upstream = net.connect(Number(port), host);
    const pair = { downstream, upstream };
    pairs.add(pair);
    const drop = () => {
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
    close() {
      this.cut();
      server.close();
    },
  };
}
