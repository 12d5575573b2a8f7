/**
 * Call-home response streams: a request still travels over NATS, but its responses come back over a
 * TCP connection the worker dials to the caller, instead of one NATS message per frame through the
 * broker (Dynamo's response path; reference: "keep requests off the broker"). A caller that offers it
 * (`CallHomeListener`) names its address and a key in each request envelope (`callHome`); a worker
 * (`CallHomeDialer`) keeps one connection per caller and sends each stream's frames there, tagged
 * with the stream's NATS reply subject, so the caller hands them to the same stream reader as NATS
 * messages. Whatever is not known yet goes over NATS as before: a stream starts on call-home only
 * when its worker already holds an open connection to that caller (the first requests after a
 * caller's start go over NATS while the connection is dialed; a caller that cannot be reached keeps
 * getting NATS, with the dial retried after `redialMs`). A stream never changes path midway.
 *
 * Wire (`wire-reader.ts` framing, magic "SYCH", version 1): the worker opens with its hello and a
 * KEY frame (the caller's key, from the envelope); the caller checks both and answers with its own
 * hello, after which the worker may send; the caller sends nothing else. Then, worker → caller:
 * RESPONSE frames (u16 BE token length, the token — the stream's reply subject —, then one encoded
 * request-plane message: a response frame as NATS would carry it, never chunked) and HEARTBEAT
 * frames (the token alone). A wrong magic, version or key, a frame over the limit, an unknown frame
 * type or a handshake not done within `handshakeTimeoutMs` closes the connection.
 *
 * Failures: a connection that closes fails the streams it carried at once on the caller's side
 * (`lost`), where NATS would have left them to the idle timeout; on the worker's side a frame that
 * cannot be sent (connection closed, or more than `maxBufferedBytes` unsent) ends its stream like a
 * NATS outage does (the handler is aborted), and a message over `maxMessageBytes` (which the caller
 * would refuse by closing the connection every stream shares) ends its stream with an error frame. The key keeps strangers out of a caller's port; it does
 * not make the connection private (no TLS), as NATS carries the same bytes in the clear.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { type Logger, invalidArgument, silentLogger } from '@switchyard/common';
import { formatTransferAddress, parseTransferAddress } from '../kv-transfer/kv-transfer-limits.js';
import { defaultAdvertiseHost } from '../kv-transfer/tcp-kv-transfer-plane.js';
import { FramedWireReader, encodeFrame, encodeHello, frameHead } from '../wire-reader.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../nats-framing.js';
import type { CallHomeTarget } from '../protocols.js';

/** "SYCH". */
export const CALL_HOME_MAGIC = 0x53594348;
export const CALL_HOME_VERSION = 1;
export const CallHomeFrame = { KEY: 0x01, RESPONSE: 0x02, HEARTBEAT: 0x03 } as const;
/** A stream's token (its NATS reply subject) is at most this many UTF-8 bytes. */
export const MAX_CALL_HOME_TOKEN_BYTES = 1024;
/** A caller's key: this many random bytes, base64url. */
const KEY_BYTES = 18;

export interface CallHomeLimits {
  /** Largest message one RESPONSE frame carries (default: the NATS plane's largest joined message, 512 MiB). */
  readonly maxMessageBytes: number;
  /** Caller: connections at once (default 1024); more are closed as they come. */
  readonly maxConnections: number;
  /** Caller: hello and key within this long of the connection (default 5 s). Worker: connected and answered within it. */
  readonly handshakeTimeoutMs: number;
  /** Worker: bytes a connection may hold unsent before it is given up (default 64 MiB). */
  readonly maxBufferedBytes: number;
  /** Worker: after a failed dial, the caller's address is not dialed again for this long (default 5 s). */
  readonly redialMs: number;
  /** Worker: connections to callers at once (default 256); a caller beyond that gets NATS. */
  readonly maxLinks: number;
}

export const DEFAULT_CALL_HOME_LIMITS: CallHomeLimits = {
  maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES,
  maxConnections: 1024,
  handshakeTimeoutMs: 5_000,
  maxBufferedBytes: 64 * 1024 * 1024,
  redialMs: 5_000,
  maxLinks: 256,
};

function tokenBytes(token: string): Buffer {
  const t = Buffer.from(token, 'utf8');
  if (t.length === 0 || t.length > MAX_CALL_HOME_TOKEN_BYTES) throw invalidArgument(`call-home: a token of ${t.length} bytes (1 to ${MAX_CALL_HOME_TOKEN_BYTES})`);
  return t;
}

function tokenHead(type: number, token: Buffer, bodyBytes: number): Buffer {
  const head = frameHead(type, 2 + token.length + bodyBytes);
  const len = Buffer.alloc(2);
  len.writeUInt16BE(token.length, 0);
  return Buffer.concat([head, len, token]);
}

/** A RESPONSE frame as the buffers to write (the message is not copied). */
export function encodeResponseFrame(token: string, message: Uint8Array): Buffer[] {
  return [tokenHead(CallHomeFrame.RESPONSE, tokenBytes(token), message.byteLength), Buffer.from(message.buffer, message.byteOffset, message.byteLength)];
}

export function encodeHeartbeatFrame(token: string): Buffer {
  return tokenHead(CallHomeFrame.HEARTBEAT, tokenBytes(token), 0);
}

/** A RESPONSE or HEARTBEAT frame's body → its token and (RESPONSE) message; invalid_argument when malformed. */
export function decodeTokenFrame(parts: readonly Uint8Array[]): { token: string; message: Uint8Array } {
  const body = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  if (body.byteLength < 2) throw invalidArgument('call-home: a frame without its token');
  const n = (body[0]! << 8) | body[1]!;
  if (n === 0 || n > MAX_CALL_HOME_TOKEN_BYTES || body.byteLength < 2 + n) throw invalidArgument(`call-home: a token of ${n} bytes in a ${body.byteLength}-byte frame`);
  return { token: Buffer.from(body.buffer, body.byteOffset + 2, n).toString('utf8'), message: body.subarray(2 + n) };
}

/** Largest frame either side reads: a RESPONSE with the longest token and message. */
function maxFrameBytes(limits: CallHomeLimits): number {
  return 1 + 2 + MAX_CALL_HOME_TOKEN_BYTES + limits.maxMessageBytes;
}

// ---- caller side ----------------------------------------------------------------------------------

/** One worker's connection to this caller, as the listener's callbacks name it. */
export interface CallHomeConnection {
  readonly id: number;
}

export interface CallHomeListenOptions {
  /** Host to listen on (default 127.0.0.1: workers on this machine only; `0.0.0.0` for every interface). */
  readonly host?: string;
  /** Port (default 0: the system picks one). */
  readonly port?: number;
  /** Host put in the advertised address (default: the listen host, or for a wildcard the first non-internal IPv4). */
  readonly advertiseHost?: string;
  readonly limits?: Partial<CallHomeLimits>;
  readonly logger?: Logger;
  /** A RESPONSE (`message`) or HEARTBEAT (`null`) frame for `token`, from `conn`. */
  readonly onFrame: (token: string, message: Uint8Array | null, conn: CallHomeConnection) => void;
  /** `conn` is gone: the streams it carried end incomplete. */
  readonly onClose: (conn: CallHomeConnection) => void;
}

/** The caller's end: a TCP server workers dial to stream responses home. */
export class CallHomeListener {
  private readonly sockets = new Set<net.Socket>();
  private nextId = 0;
  private closed = false;
  private open = 0;

  /** Connections past their handshake now. */
  get connections(): number {
    return this.open;
  }

  private constructor(
    private readonly server: net.Server,
    /** `host:port` as workers are told to dial it. */
    readonly address: string,
    /** The key a worker must present (random per listener). */
    readonly key: string,
    private readonly limits: CallHomeLimits,
    private readonly options: CallHomeListenOptions,
  ) {}

  static async listen(options: CallHomeListenOptions): Promise<CallHomeListener> {
    const limits = { ...DEFAULT_CALL_HOME_LIMITS, ...options.limits };
    const host = options.host ?? '127.0.0.1';
    const server = net.createServer({ noDelay: true });
    server.maxConnections = limits.maxConnections;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const port = (server.address() as net.AddressInfo).port;
    const key = randomBytes(KEY_BYTES).toString('base64url');
    const self = new CallHomeListener(server, formatTransferAddress(options.advertiseHost ?? defaultAdvertiseHost(host), port), key, limits, options);
    server.on('error', (e) => (options.logger ?? silentLogger).warn({ err: e.message }, 'call-home listener error'));
    server.on('connection', (socket) => self.accept(socket));
    return self;
  }

  private accept(socket: net.Socket): void {
    if (this.closed) return void socket.destroy();
    this.sockets.add(socket);
    const conn: CallHomeConnection = { id: this.nextId++ };
    const reader = new FramedWireReader(CALL_HOME_MAGIC, 'call-home', maxFrameBytes(this.limits));
    let state: 'hello' | 'key' | 'open' = 'hello';
    const log = this.options.logger ?? silentLogger;
    const handshake = setTimeout(() => socket.destroy(), this.limits.handshakeTimeoutMs);
    const fail = (why: string): void => {
      log.debug({ remote: socket.remoteAddress, why }, 'call-home connection refused');
      socket.destroy();
    };
    socket.on('data', (chunk: Buffer) => {
      reader.push(chunk);
      try {
        for (let item = reader.next(); item !== null && !socket.destroyed; item = reader.next()) {
          if (item.kind === 'hello') {
            if (item.version !== CALL_HOME_VERSION) return fail(`version ${item.version}`);
            state = 'key';
            continue;
          }
          if (state === 'key') {
            const key = Buffer.concat(item.parts).toString('utf8');
            if (item.type !== CallHomeFrame.KEY || key !== this.key) return fail('wrong key');
            state = 'open';
            this.open++;
            clearTimeout(handshake);
            socket.write(encodeHello(CALL_HOME_MAGIC, CALL_HOME_VERSION));
            continue;
          }
          if (item.type !== CallHomeFrame.RESPONSE && item.type !== CallHomeFrame.HEARTBEAT) return fail(`frame type ${item.type}`);
          const { token, message } = decodeTokenFrame(item.parts);
          this.options.onFrame(token, item.type === CallHomeFrame.RESPONSE ? message : null, conn);
        }
      } catch (e) {
        fail((e as Error).message);
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(handshake);
      this.sockets.delete(socket);
      if (state === 'open') {
        this.open--;
        this.options.onClose(conn);
      }
    });
  }

  /** Stop listening and close every connection (their streams end incomplete). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

// ---- worker side ----------------------------------------------------------------------------------

/** An open connection to one caller, shared by every stream answering it. */
export interface CallHomeLink {
  /** The largest message `send` takes (a caller refuses a larger frame, closing the connection). */
  readonly maxMessageBytes: number;
  /** Queue a RESPONSE frame (written at the end of this event-loop turn with the others); false when the link is closed. */
  send(token: string, message: Uint8Array): boolean;
  heartbeat(token: string): boolean;
  readonly closed: boolean;
}

class Link implements CallHomeLink {
  closed = false;
  open = false;
  private pending: Buffer[] = [];
  private scheduled = false;

  constructor(
    readonly socket: net.Socket,
    private readonly maxBufferedBytes: number,
    readonly maxMessageBytes: number,
  ) {}

  send(token: string, message: Uint8Array): boolean {
    if (message.byteLength > this.maxMessageBytes) throw invalidArgument(`call-home: a ${message.byteLength}-byte message is over the limit of ${this.maxMessageBytes} bytes`);
    return this.queue(encodeResponseFrame(token, message));
  }

  heartbeat(token: string): boolean {
    return this.queue([encodeHeartbeatFrame(token)]);
  }

  private queue(buffers: Buffer[]): boolean {
    if (this.closed) return false;
    if (this.socket.writableLength > this.maxBufferedBytes) {
      // the caller does not read: give it up (its streams end on both sides)
      this.closed = true;
      this.socket.destroy();
      return false;
    }
    this.pending.push(...buffers);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
    return true;
  }

  /** Everything queued this turn in one write. */
  flush(): void {
    this.scheduled = false;
    const pending = this.pending;
    if (pending.length === 0 || this.closed) return;
    this.pending = [];
    this.socket.cork();
    for (const b of pending) this.socket.write(b);
    this.socket.uncork();
  }
}

export interface CallHomeDialerOptions {
  readonly limits?: Partial<CallHomeLimits>;
  readonly logger?: Logger;
}

/** The worker's end: one connection per caller, dialed on the first request that names it. */
export class CallHomeDialer {
  private readonly limits: CallHomeLimits;
  private readonly log: Logger;
  /** By `address key`: a link open or being dialed. */
  private readonly links = new Map<string, Link>();
  /** By `address key`: not dialed again before this time (epoch ms). */
  private readonly backoff = new Map<string, number>();
  /** Addresses whose failed dial was logged as a warning. */
  private readonly warned = new Set<string>();
  private closed = false;

  constructor(options: CallHomeDialerOptions = {}) {
    this.limits = { ...DEFAULT_CALL_HOME_LIMITS, ...options.limits };
    this.log = options.logger ?? silentLogger;
  }

  /**
   * The open link to `target`, or undefined (the stream then answers over NATS): a dial starts now
   * unless one is under way, the address failed within `redialMs`, or `maxLinks` are held.
   */
  link(target: CallHomeTarget): CallHomeLink | undefined {
    const id = `${target.address} ${target.key}`;
    const l = this.links.get(id);
    if (l !== undefined) return l.open ? l : undefined;
    if (this.closed || this.links.size >= this.limits.maxLinks) return undefined;
    const until = this.backoff.get(id);
    if (until !== undefined) {
      if (Date.now() < until) return undefined;
      this.backoff.delete(id);
    }
    this.dial(id, target);
    return undefined;
  }

  private dial(id: string, target: CallHomeTarget): void {
    const { host, port } = parseTransferAddress(target.address);
    const socket = net.connect({ host, port, noDelay: true });
    const link = new Link(socket, this.limits.maxBufferedBytes, this.limits.maxMessageBytes);
    this.links.set(id, link);
    const reader = new FramedWireReader(CALL_HOME_MAGIC, 'call-home', 1);
    const timer = setTimeout(() => socket.destroy(), this.limits.handshakeTimeoutMs);
    socket.on('connect', () => {
      socket.write(Buffer.concat([encodeHello(CALL_HOME_MAGIC, CALL_HOME_VERSION), encodeFrame(CallHomeFrame.KEY, [Buffer.from(target.key, 'utf8')])]));
    });
    socket.on('data', (chunk: Buffer) => {
      // the caller says one thing, its hello; anything else ends the link
      reader.push(chunk);
      try {
        const item = reader.next();
        if (item === null) return;
        if (link.open || item.kind !== 'hello' || item.version !== CALL_HOME_VERSION || reader.buffered > 0) throw invalidArgument('call-home: the caller sent more than its hello');
        clearTimeout(timer);
        link.open = true;
      } catch (e) {
        this.log.debug({ address: target.address, err: (e as Error).message }, 'call-home link refused');
        socket.destroy();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      if (!link.open) {
        this.backoff.set(id, Date.now() + this.limits.redialMs);
        if (this.backoff.size > 4 * this.limits.maxLinks) this.backoff.delete(this.backoff.keys().next().value!);
        // said once per address (a router that cannot be reached stays so): its responses still flow, over NATS
        const quiet = this.warned.has(target.address);
        if (!quiet && this.warned.size < 4 * this.limits.maxLinks) this.warned.add(target.address);
        this.log[quiet ? 'debug' : 'warn'](
          { address: target.address },
          "call-home: cannot reach the router's call-home address (check its --call-home-address / --call-home-advertise); its responses go over NATS",
        );
      }
      link.closed = true;
      if (this.links.get(id) === link) this.links.delete(id);
    });
  }

  /** Write what is queued, then end every link. */
  close(): void {
    this.closed = true;
    for (const l of this.links.values()) {
      l.flush();
      l.socket.end();
    }
    this.links.clear();
  }
}
