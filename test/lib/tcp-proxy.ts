/**
 * A TCP proxy for fault injection between two processes (e.g. a decode worker and the KV transfer
 * server of a prefill worker that advertises the proxy's port). Every connection is forwarded as is,
 * except the next one after `next(fault)`:
 * - `corrupt`: one byte of the server's answer, at `offset`, is flipped;
 * - `stall`: the server's answer is held back (never forwarded); when the server side closes, the
 *   client side is cut. `stalled` resolves once such a connection received its first server bytes.
 * The target may be set after the proxy listens (`retarget`), so a process that binds port 0 and
 * reports its port can sit behind a proxy whose port it was told at start; until then a connection
 * is refused (closed at once).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export type ProxyFault = { kind: 'corrupt'; offset: number } | { kind: 'stall' };

export interface TcpProxy {
  readonly port: number;
  /** Connections accepted so far. */
  readonly connections: number;
  /** Forward the connections accepted from now on to `target`. */
  retarget(target: { host: string; port: number }): void;
  /** Apply `fault` to the next connection only. Resolves when that connection's fault took effect. */
  next(fault: ProxyFault): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(initialTarget?: { host: string; port: number }): Promise<TcpProxy> {
  let target = initialTarget;
  const sockets = new Set<Socket>();
  let connections = 0;
  let pending: { fault: ProxyFault; done: () => void } | undefined;
  const track = (s: Socket): void => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => {});
  };
  const server: Server = createServer((client) => {
    connections++;
    track(client);
    if (target === undefined) {
      client.destroy();
      return;
    }
    const upstream = connect(target.port, target.host);
    track(upstream);
    const fault = pending;
    pending = undefined;
    client.on('data', (d) => upstream.write(d));
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
    if (fault === undefined) {
      upstream.on('data', (d) => client.write(d));
      return;
    }
    if (fault.fault.kind === 'stall') {
      upstream.once('data', () => fault.done());
      return;
    }
    const { offset } = fault.fault;
    let seen = 0;
    upstream.on('data', (d: Buffer) => {
      if (offset >= seen && offset < seen + d.length) {
        d = Buffer.from(d);
        d[offset - seen] = d[offset - seen]! ^ 0x5a;
        fault.done();
      }
      seen += d.length;
      client.write(d);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    port,
    get connections() {
      return connections;
    },
    retarget: (t) => {
      target = t;
    },
    next: (fault) => new Promise<void>((resolve) => (pending = { fault, done: resolve })),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
