/**
 * The KvTransferPlane on TCP (`node:net`): a decode worker pulls KV blocks straight from the prefill
 * worker that holds them.
 *
 * ## Protocol (version 1)
 *
 * One connection carries one request: the client connects, both sides send an 8-byte hello at once,
 * the client sends its request right behind its hello (no round trip is spent on the handshake), the
 * server answers and ends the connection. Integers are big-endian. Block hashes are 16 lower-case hex
 * digits (the engine's sequence hashes); a pull with none opens no connection.
 *
 * ```
 * hello      "SYKV" (4 bytes) | u16 version (1) | u16 flags (0)
 * frame      u32 length (of type + body, 1 ≤ length ≤ limit) | u8 type | body
 * str16      u16 byte length | UTF-8
 * hash       8 bytes: the 16 hex digits of a block's sequence hash
 *
 * client → server (exactly one frame)
 *   0x01 PULL      str16 model | str16 leaseId | str16 layoutDigest | u32 n | n × hash
 *   0x02 RELEASE   str16 model | str16 leaseId
 * server → client
 *   0x81 CHUNK     u32 crc32 of the rest of the body | u32 index of its first block in the pull |
 *                  u32 n ≥ 1 | n × (hash | u32 size) | the n blocks' bytes, back to back
 *   0x82 END       u32 blocks sent (= the pull's n)                        — after the last CHUNK
 *   0x83 RELEASED  u8 1 (the provider knew the lease) or 0                  — the answer to RELEASE
 *   0xEE ERROR     u8 length + ASCII SwitchyardError code | str16 message  — instead of any answer
 * ```
 *
 * A pull is answered with CHUNKs then END, or an ERROR (the provider's refusal with its code, or the
 * server's own: invalid_argument for a malformed or over-limit request, unsupported for another
 * version) at any point. A chunk holds consecutive blocks of the pull, up to `chunkBytes` (1 MiB) of
 * data and table, or one bigger block alone. The puller checks each chunk before it yields any of
 * its blocks: the checksum (CRC-32 over the chunk's table and bytes: a corrupt chunk is `internal`), its
 * position and its hashes against the pull's, in order (a wrong block is `internal`), the sizes (the
 * table must account for every byte). A connection that ends before END is `unavailable` (truncated),
 * as is one that cannot be opened or is reset.
 *
 * ## Flow control
 *
 * Both sides hold at most about one frame. The server asks its provider for about a chunk's worth of
 * blocks at a time (`readChunks`), writes the chunk (its header, then the blocks' own bytes, uncopied,
 * corked into one write) and waits for 'drain' before the next when the socket's buffer is full. The
 * puller stops reading the socket as soon as a whole frame is buffered and nobody is waiting for it,
 * and resumes when its consumer asks for the next chunk: a slow consumer leaves the TCP window closed
 * and the server waiting, and memory stays at a chunk or two per pull whatever the pull's size.
 *
 * ## Limits (the server faces any client; the puller faces any server)
 *
 * Server: `maxConnections` at once (more are closed as they arrive); hello and request within
 * `handshakeTimeoutMs`; no read or write progress for `idleTimeoutMs` closes the connection; the
 * request frame is at most what a pull of `maxHashesPerPull` hashes with the longest names needs, and
 * the frame's length prefix is refused before its body is awaited. A protocol violation is answered
 * with an ERROR frame where the socket still allows it, then the connection is ended: it never
 * throws out of the server. Puller: frames up to one chunk or one `maxBlockBytes` block; the whole
 * operation is bounded by `timeoutMs` (deadline_exceeded) and `signal` (cancelled).
 *
 * ## Connections
 *
 * One connection per operation, no pool: a pull moves megabytes, so a connect (one loopback or LAN
 * round trip, and the hello costs none) is small beside it; a cancelled, timed-out or corrupt pull is
 * ended by destroying its own socket, with nothing shared to resynchronise; there is no pool to
 * expire when a prefill worker leaves. A pool can come later without a protocol change (a version 2
 * could keep the connection open after END).
 */
import * as net from 'node:net';
import { networkInterfaces } from 'node:os';
import {
  type SwitchyardError,
  cancelled,
  deadlineExceeded,
  internal,
  invalidArgument,
  toSwitchyardError,
  unavailable,
  unsupported,
} from '@switchyard/common';
import {
  type KvTransferLimits,
  type KvTransferOptions,
  type ServedChunk,
  checkPullOptions,
  checkPullRequest,
  checkReleaseRequest,
  formatTransferAddress,
  parseKvTransferOptions,
  parseTransferAddress,
  readChunks,
} from './kv-transfer-limits.js';
import {
  DEFAULT_KV_PULL_TIMEOUT_MS,
  type KvBlockProvider,
  type KvPullOptions,
  type KvPullRequest,
  type KvReleaseRequest,
  type KvTransferBlock,
  type KvTransferCounters,
  type KvTransferPlane,
  type KvTransferServeOptions,
  type KvTransferServer,
} from './kv-transfer-plane.js';
import {
  KV_WIRE_VERSION,
  type KvWireMessage,
  WireReader,
  type WireItem,
  decodeMessage,
  encodeChunk,
  encodeEnd,
  encodeError,
  encodeHello,
  encodePull,
  encodeRelease,
  encodeReleased,
  maxChunkFrameBytes,
  maxRequestFrameBytes,
  verifyChunk,
} from './kv-transfer-wire.js';

/** How long a refused connection stays open, discarding input, so the peer can read the ERROR frame. */
const REFUSAL_LINGER_MS = 1_000;

/**
 * One socket with the protocol's reading discipline: items (hello, frames) are read one at a time on
 * demand, the socket paused while one is buffered and unasked for. The first failure (socket error,
 * timeout, abort, close of the plane) destroys the socket and is what every later read throws.
 */
class FramedSocket {
  private readonly reader: WireReader;
  private failure: SwitchyardError | null = null;
  private ended = false;
  private waiting = false;
  private discarding = false;
  private waiter: (() => void) | null = null;

  constructor(
    readonly socket: net.Socket,
    maxFrameBytes: number,
    private readonly peer: string,
  ) {
    this.reader = new WireReader(maxFrameBytes);
    socket.on('data', (bytes: Buffer) => {
      if (this.discarding) return;
      this.reader.push(bytes);
      if (!this.waiting || this.reader.ready()) socket.pause();
      this.wake();
    });
    socket.on('end', () => this.end());
    socket.on('close', () => this.end());
    socket.on('drain', () => this.wake());
    socket.on('error', (e) => this.fail(unavailable(`KV transfer connection ${peer}: ${e.message}`, e)));
  }

  get failed(): boolean {
    return this.failure !== null;
  }

  fail(e: SwitchyardError): void {
    this.failure ??= e;
    this.socket.destroy();
    this.wake();
  }

  /** The peer's next item; throws the connection's failure, invalid_argument for bad bytes, unavailable when it ended first. */
  async item(): Promise<WireItem> {
    for (;;) {
      if (this.failure !== null) throw this.failure;
      const item = this.reader.next();
      if (item !== null) return item;
      if (this.ended) {
        const partial = this.reader.buffered > 0 ? ` (${this.reader.buffered} bytes into a frame)` : '';
        throw unavailable(`KV transfer connection ${this.peer} closed before the end of the answer${partial}`);
      }
      this.waiting = true;
      this.socket.resume();
      await new Promise<void>((resolve) => (this.waiter = resolve));
      this.waiting = false;
    }
  }

  /** Write `parts` as one batch; resolves once the socket can take more (after 'drain' when it was full). */
  async send(parts: readonly Uint8Array[]): Promise<void> {
    if (this.failure !== null) throw this.failure;
    if (this.socket.destroyed || !this.socket.writable) throw unavailable(`KV transfer connection ${this.peer} closed`);
    this.socket.cork();
    for (const p of parts) this.socket.write(p);
    this.socket.uncork();
    while (this.socket.writableNeedDrain) {
      if (this.failure !== null) throw this.failure;
      if (this.ended || this.socket.destroyed) throw unavailable(`KV transfer connection ${this.peer} closed`);
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
    if (this.failure !== null) throw this.failure;
  }

  /** Server side: the answer is complete. Input is read (and dropped) from now on, so the peer's close is seen at once. */
  finish(): void {
    this.discarding = true;
    this.socket.resume();
    this.socket.end();
  }

  /** Server side: send `error` (if the socket still takes it), end, and drop whatever else arrives for a moment. */
  refuse(error: SwitchyardError): void {
    if (this.socket.destroyed) return;
    this.discarding = true;
    this.socket.end(encodeError(error));
    this.socket.resume();
    setTimeout(() => this.socket.destroy(), REFUSAL_LINGER_MS).unref();
  }

  private end(): void {
    this.ended = true;
    this.wake();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
}

const WILDCARD_HOSTS = new Set(['', '0.0.0.0', '::', '::0']);

/**
 * The host to advertise when none is given: the listening host when it names one interface, else the
 * first non-internal IPv4 address of this machine, else 127.0.0.1.
 */
export function defaultAdvertiseHost(listenHost: string | undefined): string {
  if (listenHost !== undefined && !WILDCARD_HOSTS.has(listenHost)) return listenHost;
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

class TcpKvTransferServer implements KvTransferServer {
  private readonly sockets = new Set<net.Socket>();
  private closing: Promise<void> | null = null;

  private constructor(
    private readonly server: net.Server,
    readonly address: string,
    private readonly provider: KvBlockProvider,
    private readonly limits: KvTransferLimits,
    private readonly sent: (bytes: number) => void,
  ) {}

  static async listen(provider: KvBlockProvider, options: KvTransferServeOptions, limits: KvTransferLimits, sent: (bytes: number) => void): Promise<TcpKvTransferServer> {
    const host = options.host ?? '0.0.0.0';
    const port = options.port ?? 0;
    if (!Number.isSafeInteger(port) || port < 0 || port > 65_535) throw invalidArgument(`KV transfer: port ${String(port)} is not 0 to 65535`);
    const server = net.createServer({ noDelay: true });
    server.maxConnections = limits.maxConnections;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e) => reject(unavailable(`KV transfer: cannot listen on ${formatTransferAddress(host, port)}: ${e.message}`, e)));
      server.listen({ host, port }, () => resolve());
    });
    const bound = (server.address() as net.AddressInfo).port;
    const self = new TcpKvTransferServer(server, formatTransferAddress(options.advertiseHost ?? defaultAdvertiseHost(options.host), bound), provider, limits, sent);
    server.on('error', () => {}); // after listening, errors belong to connections
    server.on('connection', (socket) => self.accept(socket));
    return self;
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    const peer = `from ${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
    const conn = new FramedSocket(socket, maxRequestFrameBytes(this.limits), peer);
    socket.setTimeout(this.limits.idleTimeoutMs, () => conn.fail(unavailable(`KV transfer connection ${peer} idle for ${this.limits.idleTimeoutMs} ms`)));
    this.serve(conn).catch(() => socket.destroy());
  }

  /** One connection: hello, one request, its answer. Never throws past `accept`. */
  private async serve(conn: FramedSocket): Promise<void> {
    const handshake = setTimeout(() => conn.fail(deadlineExceeded(`KV transfer handshake not done in ${this.limits.handshakeTimeoutMs} ms`)), this.limits.handshakeTimeoutMs);
    let message: KvWireMessage;
    try {
      conn.socket.write(encodeHello());
      const hello = await conn.item();
      if (hello.kind !== 'hello') throw internal('KV transfer: a frame before the hello');
      if (hello.version !== KV_WIRE_VERSION) throw unsupported(`KV transfer protocol version ${hello.version} is not supported (this server speaks ${KV_WIRE_VERSION})`);
      const item = await conn.item();
      if (item.kind !== 'frame') throw internal('KV transfer: a second hello');
      message = decodeMessage(item.type, item.body, this.limits);
      if (message.type === 'pull') checkPullRequest(message.request, this.limits);
      else if (message.type === 'release') checkReleaseRequest(message.request);
      else throw invalidArgument(`KV transfer: a client sent a ${message.type} frame`);
    } catch (e) {
      if (!conn.failed) conn.refuse(toSwitchyardError(e));
      return;
    } finally {
      clearTimeout(handshake);
    }
    if (message.type === 'release') {
      let released: boolean;
      try {
        released = this.provider.release(message.request) === true;
      } catch (e) {
        return conn.refuse(toSwitchyardError(e));
      }
      await conn.send([encodeReleased(released)]);
      return conn.finish();
    }
    const request = message.request;
    const chunks = readChunks(this.provider, request, this.limits);
    for (;;) {
      let next: IteratorResult<ServedChunk>;
      try {
        next = await chunks.next();
      } catch (e) {
        return conn.refuse(toSwitchyardError(e));
      }
      if (next.done) break;
      const { first, blocks } = next.value;
      await conn.send(encodeChunk(first, blocks));
      this.sent(blocks.reduce((n, b) => n + b.data.byteLength, 0));
    }
    await conn.send([encodeEnd(request.hashes.length)]);
    conn.finish();
  }

  close(): Promise<void> {
    return (this.closing ??= new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
    }));
  }
}

/** The KvTransferPlane over TCP; see the file header for the protocol. */
export class TcpKvTransferPlane implements KvTransferPlane {
  private readonly limits: KvTransferLimits;
  private bytesIn = 0;
  private bytesOut = 0;
  private closed = false;
  /** Open connections → what undoes their deadline and abort listener. */
  private readonly open = new Map<FramedSocket, () => void>();

  constructor(options: KvTransferOptions = {}) {
    this.limits = parseKvTransferOptions(options);
  }

  async serve(provider: KvBlockProvider, options: KvTransferServeOptions = {}): Promise<KvTransferServer> {
    if (this.closed) throw unavailable('KV transfer plane is closed');
    return TcpKvTransferServer.listen(provider, options, this.limits, (n) => (this.bytesOut += n));
  }

  pull(address: string, request: KvPullRequest, options: KvPullOptions = {}): AsyncIterable<readonly KvTransferBlock[]> {
    const plane = this;
    return {
      [Symbol.asyncIterator]: async function* () {
        checkPullRequest(request, plane.limits);
        checkPullOptions(options);
        const target = parseTransferAddress(address);
        if (plane.closed) throw unavailable('KV transfer plane is closed');
        const what = `KV pull of ${request.hashes.length} blocks from ${address}`;
        if (options.signal?.aborted) throw cancelled(`${what} cancelled`);
        if (request.hashes.length === 0) return;
        const hashes = [...request.hashes];
        const conn = plane.connect(target, what, options);
        try {
          conn.socket.write(Buffer.concat([encodeHello(), encodePull(request)]));
          await plane.expectHello(conn, address);
          let next = 0;
          for (;;) {
            const message = await plane.answer(conn, address);
            if (message.type === 'chunk') {
              const blocks = verifyChunk(message, hashes, next);
              next += blocks.length;
              plane.bytesIn += message.data.byteLength;
              yield blocks;
            } else if (message.type === 'end') {
              if (next !== hashes.length || message.blocks !== hashes.length) {
                throw internal(`${what}: the server ended after ${next} blocks (it counted ${message.blocks})`);
              }
              return;
            } else if (message.type === 'error') {
              throw message.error;
            } else {
              throw internal(`${what}: the server answered with a ${message.type} frame`);
            }
          }
        } finally {
          plane.disconnect(conn);
        }
      },
    };
  }

  async release(address: string, request: KvReleaseRequest, options: KvPullOptions = {}): Promise<boolean> {
    checkReleaseRequest(request);
    checkPullOptions(options);
    const target = parseTransferAddress(address);
    if (this.closed) throw unavailable('KV transfer plane is closed');
    const what = `KV release of lease ${request.leaseId} at ${address}`;
    if (options.signal?.aborted) throw cancelled(`${what} cancelled`);
    const conn = this.connect(target, what, options);
    try {
      conn.socket.write(Buffer.concat([encodeHello(), encodeRelease(request)]));
      await this.expectHello(conn, address);
      const message = await this.answer(conn, address);
      if (message.type === 'released') return message.released;
      if (message.type === 'error') throw message.error;
      throw internal(`${what}: the server answered with a ${message.type} frame`);
    } finally {
      this.disconnect(conn);
    }
  }

  counters(): KvTransferCounters {
    return { bytesIn: this.bytesIn, bytesOut: this.bytesOut };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const conn of this.open.keys()) conn.fail(unavailable('KV transfer plane is closed'));
  }

  /**
   * A connection for one operation, failed by its deadline and its signal until `disconnect` (also
   * after the server closed it: what it sent may still be waiting for the consumer).
   */
  private connect(target: { host: string; port: number }, what: string, options: KvPullOptions): FramedSocket {
    const socket = net.connect({ host: target.host, port: target.port, noDelay: true });
    const conn = new FramedSocket(socket, maxChunkFrameBytes(this.limits), `to ${formatTransferAddress(target.host, target.port)}`);
    const timeoutMs = options.timeoutMs ?? DEFAULT_KV_PULL_TIMEOUT_MS;
    const timer = setTimeout(() => conn.fail(deadlineExceeded(`${what} timed out after ${timeoutMs} ms`)), timeoutMs);
    const onAbort = (): void => conn.fail(cancelled(`${what} cancelled`));
    options.signal?.addEventListener('abort', onAbort, { once: true });
    this.open.set(conn, () => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
    });
    return conn;
  }

  private disconnect(conn: FramedSocket): void {
    this.open.get(conn)?.();
    this.open.delete(conn);
    conn.socket.destroy();
  }

  private async expectHello(conn: FramedSocket, address: string): Promise<void> {
    let hello: WireItem;
    try {
      hello = await conn.item();
    } catch (e) {
      if (conn.failed || (e as SwitchyardError).code !== 'invalid_argument') throw e;
      conn.fail(unavailable(`KV transfer: the peer at ${address} is not a KV transfer server`));
      throw unavailable(`KV transfer: the peer at ${address} is not a KV transfer server`, e);
    }
    if (hello.kind === 'hello' && hello.version !== KV_WIRE_VERSION) {
      throw unsupported(`KV transfer: the server at ${address} speaks protocol version ${hello.version}, this client ${KV_WIRE_VERSION}`);
    }
  }

  /** The server's next message; its malformed bytes are `internal` (what arrived cannot be trusted). */
  private async answer(conn: FramedSocket, address: string): Promise<KvWireMessage> {
    try {
      const item = await conn.item();
      if (item.kind !== 'frame') throw invalidArgument('a second hello');
      return decodeMessage(item.type, item.body, this.limits);
    } catch (e) {
      if (conn.failed || (e as SwitchyardError).code !== 'invalid_argument') throw e;
      const error = internal(`KV transfer: the server at ${address} sent a malformed frame: ${(e as Error).message}`, e);
      conn.fail(error);
      throw error;
    }
  }
}
