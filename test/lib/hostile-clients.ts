/**
 * Hostile clients for the front-door limit suites: compression bombs, raw gRPC frames, slowloris
 * clients, held connections — and the peak memory of the process under test.
 */
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { deflateSync, gzipSync } from 'node:zlib';

const MEMBER_BYTES = 64 * 1024 * 1024;
let member: Buffer | undefined;

/**
 * A gzip stream that inflates to `inflatedBytes` zeros (a multiple of 64 MiB) from about 1/1000 of
 * that: one gzip member of 64 MiB zeros repeated (gzip allows concatenated members).
 */
export function gzipBomb(inflatedBytes: number): Buffer {
  member ??= gzipSync(Buffer.alloc(MEMBER_BYTES), { level: 9 });
  return Buffer.concat(Array.from({ length: Math.ceil(inflatedBytes / MEMBER_BYTES) }, () => member!));
}

/** A zlib-wrapped deflate stream (HTTP `Content-Encoding: deflate`) inflating to `inflatedBytes` spaces. */
export function deflateBomb(inflatedBytes: number): Buffer {
  return deflateSync(Buffer.alloc(inflatedBytes, 0x20), { level: 9 });
}

const statusKb = (pid: number, field: 'VmHWM' | 'VmRSS'): number => {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (m === null) throw new Error(`no ${field} for pid ${pid}`);
  return Number(m[1]) * 1024;
};

/** The peak resident set (VmHWM) of a process since it started or since `resetPeakRss`, in bytes. */
export function peakRssBytes(pid: number): number {
  return statusKb(pid, 'VmHWM');
}

/** Restart a process's peak from its current resident set (Linux `clear_refs` 5); returns that, in bytes. */
export function resetPeakRss(pid: number): number {
  writeFileSync(`/proc/${pid}/clear_refs`, '5');
  return statusKb(pid, 'VmRSS');
}

export interface RawGrpcStatus {
  code: number;
  details: string;
}

/**
 * One gRPC call written by hand over HTTP/2, as any client may send it: a single length-prefixed
 * message whose bytes are sent as given, flagged compressed with `encoding` unless it is
 * `identity`; on its own connection to an address, or on a session the caller holds. Resolves
 * with the call's status; rejects when the stream ends without one.
 */
export function rawGrpcCall(
  target: string | http2.ClientHttp2Session,
  path: string,
  message: Buffer,
  encoding: 'gzip' | 'deflate' | 'identity',
): Promise<RawGrpcStatus> {
  return new Promise((resolve, reject) => {
    const own = typeof target === 'string';
    const session = own ? http2.connect(`http://${target}`) : target;
    if (own) session.on('error', reject);
    const req = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      'grpc-encoding': encoding,
      'grpc-accept-encoding': 'identity',
    });
    let status: RawGrpcStatus | undefined;
    const take = (headers: http2.IncomingHttpHeaders): void => {
      const code = headers['grpc-status'];
      if (code !== undefined) status = { code: Number(code), details: decodeURIComponent(String(headers['grpc-message'] ?? '')) };
    };
    req.on('response', take);
    req.on('trailers', take);
    req.on('data', () => {});
    req.on('error', () => {});
    req.on('close', () => {
      if (own) session.close();
      if (status !== undefined) resolve(status);
      else reject(new Error(`gRPC call ${path} ended without a status (rst ${req.rstCode})`));
    });
    const prefix = Buffer.alloc(5);
    prefix[0] = encoding === 'identity' ? 0 : 1;
    prefix.writeUInt32BE(message.byteLength, 1);
    req.end(Buffer.concat([prefix, message]));
  });
}

export interface SlowClientResult {
  /** Everything the server sent before it closed the connection. */
  received: string;
  /** From connecting to the server closing the connection. */
  elapsedMs: number;
  /** The server had not closed the connection after `giveUpMs`. */
  gaveUp: boolean;
}

/**
 * A slowloris client: connects to `url`'s host and sends a request one small piece every
 * `everyMs` — its body (`slow: 'body'`, headers complete with a large Content-Length) or its
 * headers (`slow: 'headers'`, never finished) — until the server closes the connection or
 * `giveUpMs` pass.
 */
export function slowClient(url: string, path: string, slow: 'body' | 'headers', { everyMs = 100, giveUpMs = 30_000 } = {}): Promise<SlowClientResult> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const start = Date.now();
    const socket = net.connect(Number(port), hostname);
    let received = '';
    let timer: NodeJS.Timeout | undefined;
    const finish = (gaveUp: boolean): void => {
      clearInterval(timer);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ received, elapsedMs: Date.now() - start, gaveUp });
    };
    const giveUp = setTimeout(() => finish(true), giveUpMs);
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => finish(false));
    socket.on('connect', () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\n`);
      if (slow === 'body') socket.write('Content-Length: 1000000\r\n\r\n');
      let i = 0;
      timer = setInterval(() => socket.write(slow === 'body' ? ' ' : `X-Slow-${i++}: 1\r\n`), everyMs);
    });
  });
}

/**
 * An HTTP/1.1 connection that has been served (one request answered) and is then held open with a
 * request whose headers never end: a connection the server is sure to count. `finish()` completes
 * the held request and resolves with the answer's status line.
 */
export async function heldHttpConnection(url: string): Promise<{ finish(): Promise<string>; destroy(): void }> {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {});
  let received = '';
  let waiting: (() => void) | undefined;
  socket.on('data', (d: Buffer) => {
    received += d.toString('latin1');
    waiting?.();
  });
  const answer = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const end = received.indexOf('\r\n\r\n');
        if (end === -1) return;
        const status = received.slice(0, received.indexOf('\r\n'));
        received = '';
        waiting = undefined;
        resolve(status);
      };
      waiting = check;
      socket.once('close', () => reject(new Error(`connection closed; received ${JSON.stringify(received)}`)));
      check();
    });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.write(`GET /v2/health/live HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
  const first = await answer();
  if (!first.startsWith('HTTP/1.1 200')) throw new Error(`unexpected answer ${first}`);
  socket.write(`GET /v2/health/live HTTP/1.1\r\nHost: ${hostname}\r\n`);
  return {
    finish: () => {
      socket.write('\r\n');
      return answer();
    },
    destroy: () => socket.destroy(),
  };
}

/** What happens to one more HTTP connection: the status line it is answered with, or '' when closed unanswered. */
export function oneHttpRequest(url: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let received = '';
    socket.on('error', () => {});
    socket.on('data', (d: Buffer) => {
      received += d.toString('latin1');
      if (received.includes('\r\n')) socket.destroy();
    });
    socket.on('close', () => resolve(received.split('\r\n')[0] ?? ''));
    socket.on('connect', () => socket.write(`GET /v2/health/live HTTP/1.1\r\nHost: ${hostname}\r\nConnection: close\r\n\r\n`));
  });
}

/** An HTTP/2 connection to a gRPC port once the server's SETTINGS arrived (it accepted it), or the reason it did not. */
export function http2Connection(address: string): Promise<{ session: http2.ClientHttp2Session; settings: http2.Settings } | { refused: string }> {
  return new Promise((resolve) => {
    const session = http2.connect(`http://${address}`);
    session.on('error', () => {});
    session.once('remoteSettings', (settings) => resolve({ session, settings }));
    session.once('close', () => resolve({ refused: 'closed before SETTINGS' }));
  });
}

/** A TCP connection that sends nothing: resolves with how long until the server closed it, or gives up. */
export function silentConnection(address: string, giveUpMs = 30_000): Promise<{ elapsedMs: number; gaveUp: boolean }> {
  return timeUntilClosed(address, giveUpMs, () => {});
}

/**
 * A peer that completes the HTTP/2 handshake on a gRPC port and then goes silent, answering nothing
 * (not even PING): a client whose machine vanished. Resolves with how long until the server closed
 * the connection, or gives up.
 */
export function deadPeer(address: string, giveUpMs = 30_000): Promise<{ elapsedMs: number; gaveUp: boolean }> {
  return timeUntilClosed(address, giveUpMs, (socket) => {
    const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
    const settingsAck = Buffer.from([0, 0, 0, 4, 1, 0, 0, 0, 0]);
    socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'), settings, settingsAck]));
  });
}

/** A raw connection to `host:port` that says `hello` once connected, then only listens: how long until the server closes it, or gives up. */
function timeUntilClosed(address: string, giveUpMs: number, hello: (socket: net.Socket) => void): Promise<{ elapsedMs: number; gaveUp: boolean }> {
  const colon = address.lastIndexOf(':');
  return new Promise((resolve) => {
    const start = Date.now();
    const socket = net.connect(Number(address.slice(colon + 1)), address.slice(0, colon));
    socket.on('error', () => {});
    socket.on('data', () => {});
    socket.on('connect', () => hello(socket));
    const giveUp = setTimeout(() => {
      socket.destroy();
      resolve({ elapsedMs: Date.now() - start, gaveUp: true });
    }, giveUpMs);
    socket.on('close', () => {
      clearTimeout(giveUp);
      resolve({ elapsedMs: Date.now() - start, gaveUp: false });
    });
  });
}
