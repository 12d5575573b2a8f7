/**
 * Call-home connections: a worker dials each caller (router) that asks for it, and the pair then
 * skips the NATS broker. Responses come back over the connection instead of one NATS message per
 * frame (Dynamo's response path; reference: "keep requests off the broker"); and once the worker has
 * announced the instances it serves on the connection (SERVE, and WITHDRAW when an endpoint stops),
 * the caller sends those instances' requests down it too (REQUEST), where a stopped or unknown
 * instance is refused with NO_RESPONDERS as NATS would (cancels, queue-group requests and requests
 * to workers without a connection still go over NATS). A caller that offers it
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
 * hello. Then, worker → caller: SERVE / WITHDRAW (instance subjects, one per line), RESPONSE frames
 * (u16 BE token length, the token — the stream's reply subject —, then one encoded request-plane
 * message: a response frame as NATS would carry it, never chunked), HEARTBEAT frames (the token alone)
 * and NO_RESPONDERS (the token); caller → worker: REQUEST (token, u16 subject length, the instance
 * subject, the request envelope message). A wrong magic, version or key, a frame over the limit, an
 * unknown frame type or a handshake not done within `handshakeTimeoutMs` closes the connection.
 *
 * Failures: a connection that closes fails the streams it carried at once on the caller's side
 * (`lost`, also those sent down it that had no answer yet), where NATS would have left them to the
 * idle timeout or a stall probe, and the instances it announced are reached over NATS again; on the worker's side a frame that
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
import { FRAME_PREFIX_BYTES, FramedWireReader, encodeFrame, encodeHello } from '../wire-reader.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from '../nats-framing.js';
import type { CallHomeTarget } from '../protocols.js';
import { TurnBatch } from '../turn-batch.js';

/** "SYCH". */
export const CALL_HOME_MAGIC = 0x53594348;
export const CALL_HOME_VERSION = 1;
export const CallHomeFrame = { KEY: 0x01, RESPONSE: 0x02, HEARTBEAT: 0x03, SERVE: 0x04, WITHDRAW: 0x05, REQUEST: 0x06, NO_RESPONDERS: 0x07 } as const;
/** An instance subject a worker announces is at most this many UTF-8 bytes; one SERVE / WITHDRAW frame at most this many. */
const MAX_SUBJECT_BYTES = 1024;
const MAX_SUBJECTS_FRAME_BYTES = 1 << 20;
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

/**
 * A message at most this big travels in one buffer with its frame's head (one allocation from
 * Buffer's pool, one socket write); a larger one as the head and a view of the message (not copied).
 */
export const INLINE_MESSAGE_BYTES = 16 * 1024;

/** The UTF-8 length of a stream's token, checked (1 to MAX_CALL_HOME_TOKEN_BYTES). */
function tokenLength(token: string): number {
  const t = Buffer.byteLength(token, 'utf8');
  if (t === 0 || t > MAX_CALL_HOME_TOKEN_BYTES) throw invalidArgument(`call-home: a token of ${t} bytes (1 to ${MAX_CALL_HOME_TOKEN_BYTES})`);
  return t;
}

/**
 * A frame whose body is `parts` (strings as their UTF-8 bytes, each preceded by its length as a u16
 * big-endian; `lengths[i]` is part i's byte length) and then `message`: the buffers to write. The
 * head is the frame's prefix (u32 length, type byte) and the parts; `message` joins it unless it is
 * over INLINE_MESSAGE_BYTES.
 */
function encodePartsFrame(type: number, parts: readonly string[], lengths: readonly number[], message: Uint8Array | undefined): Buffer[] {
  let head = FRAME_PREFIX_BYTES + 1;
  for (const n of lengths) head += 2 + n;
  const m = message === undefined ? 0 : message.byteLength;
  const inline = m <= INLINE_MESSAGE_BYTES;
  const out = Buffer.allocUnsafe(inline ? head + m : head);
  out.writeUInt32BE(head - FRAME_PREFIX_BYTES + m, 0);
  out[FRAME_PREFIX_BYTES] = type;
  let at = FRAME_PREFIX_BYTES + 1;
  for (let i = 0; i < parts.length; i++) {
    out.writeUInt16BE(lengths[i]!, at);
    at += 2 + out.write(parts[i]!, at + 2, lengths[i]!, 'utf8');
  }
  if (message === undefined || m === 0) return [out];
  if (inline) {
    out.set(message, head);
    return [out];
  }
  return [out, Buffer.from(message.buffer, message.byteOffset, m)];
}

/** A RESPONSE frame as the buffers to write (a large message is not copied). */
export function encodeResponseFrame(token: string, message: Uint8Array): Buffer[] {
  return encodePartsFrame(CallHomeFrame.RESPONSE, [token], [tokenLength(token)], message);
}

export function encodeHeartbeatFrame(token: string): Buffer {
  return encodePartsFrame(CallHomeFrame.HEARTBEAT, [token], [tokenLength(token)], undefined)[0]!;
}

/** A NO_RESPONDERS frame: the worker serves no `subject` (any more) for the request `token` carried. */
export function encodeNoRespondersFrame(token: string): Buffer {
  return encodePartsFrame(CallHomeFrame.NO_RESPONDERS, [token], [tokenLength(token)], undefined)[0]!;
}

/** A SERVE or WITHDRAW frame: instance subjects, one per line (NATS subjects hold no whitespace). */
export function encodeSubjectsFrame(type: typeof CallHomeFrame.SERVE | typeof CallHomeFrame.WITHDRAW, subjects: readonly string[]): Buffer {
  return encodeFrame(type, [Buffer.from(subjects.join('\n'), 'utf8')]);
}

export function decodeSubjectsFrame(parts: readonly Uint8Array[]): string[] {
  const body = Buffer.concat(parts);
  if (body.length > MAX_SUBJECTS_FRAME_BYTES) throw invalidArgument(`call-home: a ${body.length}-byte subject list`);
  const subjects = body.toString('utf8').split('\n');
  for (const s of subjects) if (s.length === 0 || Buffer.byteLength(s) > MAX_SUBJECT_BYTES || /\s/.test(s)) throw invalidArgument('call-home: a malformed subject');
  return subjects;
}

/** A REQUEST frame (caller → worker): u16 token length, token, u16 subject length, subject, the request message. */
export function encodeRequestFrame(token: string, subject: string, message: Uint8Array): Buffer[] {
  const sub = Buffer.byteLength(subject, 'utf8');
  if (sub === 0 || sub > MAX_SUBJECT_BYTES) throw invalidArgument(`call-home: a subject of ${sub} bytes`);
  return encodePartsFrame(CallHomeFrame.REQUEST, [token, subject], [tokenLength(token), sub], message);
}

export function decodeRequestFrame(parts: readonly Uint8Array[]): { token: string; subject: string; message: Uint8Array } {
  const { token, message: rest } = decodeTokenFrame(parts);
  if (rest.byteLength < 2) throw invalidArgument('call-home: a request without its subject');
  const n = (rest[0]! << 8) | rest[1]!;
  if (n === 0 || n > MAX_SUBJECT_BYTES || rest.byteLength < 2 + n) throw invalidArgument(`call-home: a subject of ${n} bytes in a request`);
  return { token, subject: Buffer.from(rest.buffer, rest.byteOffset + 2, n).toString('utf8'), message: rest.subarray(2 + n) };
}

/** A RESPONSE or HEARTBEAT frame's body → its token and (RESPONSE) message; invalid_argument when malformed. */
export function decodeTokenFrame(parts: readonly Uint8Array[]): { token: string; message: Uint8Array } {
  const body = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  if (body.byteLength < 2) throw invalidArgument('call-home: a frame without its token');
  const n = (body[0]! << 8) | body[1]!;
  if (n === 0 || n > MAX_CALL_HOME_TOKEN_BYTES || body.byteLength < 2 + n) throw invalidArgument(`call-home: a token of ${n} bytes in a ${body.byteLength}-byte frame`);
  return { token: Buffer.from(body.buffer, body.byteOffset + 2, n).toString('utf8'), message: body.subarray(2 + n) };
}

/** Largest frame either side reads: a REQUEST with the longest token, subject and message (a RESPONSE is smaller). */
function maxFrameBytes(limits: CallHomeLimits): number {
  return 1 + 4 + MAX_CALL_HOME_TOKEN_BYTES + MAX_SUBJECT_BYTES + Math.max(limits.maxMessageBytes, MAX_SUBJECTS_FRAME_BYTES);
}

/** Frames for one socket: at once on an idle link, else a turn's frames in one write (TurnBatch). */
class FrameWriter {
  closed = false;
  private readonly batch = new TurnBatch<Buffer>((buffers) => this.write(buffers));

  constructor(
    readonly socket: net.Socket,
    private readonly maxBufferedBytes: number,
  ) {}

  /** False when closed, or when the peer has left more than `maxBufferedBytes` unread (the socket is then given up). */
  queue(buffers: readonly Buffer[]): boolean {
    if (this.closed) return false;
    if (this.socket.writableLength > this.maxBufferedBytes) {
      this.closed = true;
      this.socket.destroy();
      return false;
    }
    this.batch.addAll(buffers);
    return true;
  }

  /** What is queued, now. */
  flush(): void {
    this.batch.flush();
  }

  private write(buffers: readonly Buffer[]): void {
    if (this.closed) return;
    if (buffers.length === 1) {
      this.socket.write(buffers[0]!);
      return;
    }
    this.socket.cork();
    for (const b of buffers) this.socket.write(b);
    this.socket.uncork();
  }
}

// ---- caller side ----------------------------------------------------------------------------------

/** One worker's connection to this caller, as the listener's callbacks name it. */
export interface CallHomeConnection {
  readonly id: number;
  /** Send a request down this connection (at once when it is idle, else with the others of this turn); false when it is closed. */
  request(token: string, subject: string, message: Uint8Array): boolean;
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
  /** The worker behind `conn` serves (`serving`) or no longer serves these instance subjects. */
  readonly onSubjects?: (conn: CallHomeConnection, subjects: readonly string[], serving: boolean) => void;
  /** The worker refused the request `token` carried: it serves no such instance (any more). */
  readonly onNoResponders?: (token: string, conn: CallHomeConnection) => void;
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
    const writer = new FrameWriter(socket, this.limits.maxBufferedBytes);
    const conn: CallHomeConnection = {
      id: this.nextId++,
      request: (token, subject, message) => writer.queue(encodeRequestFrame(token, subject, message)),
    };
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
          switch (item.type) {
            case CallHomeFrame.RESPONSE:
            case CallHomeFrame.HEARTBEAT: {
              const { token, message } = decodeTokenFrame(item.parts);
              this.options.onFrame(token, item.type === CallHomeFrame.RESPONSE ? message : null, conn);
              break;
            }
            case CallHomeFrame.NO_RESPONDERS:
              this.options.onNoResponders?.(decodeTokenFrame(item.parts).token, conn);
              break;
            case CallHomeFrame.SERVE:
            case CallHomeFrame.WITHDRAW:
              this.options.onSubjects?.(conn, decodeSubjectsFrame(item.parts), item.type === CallHomeFrame.SERVE);
              break;
            default:
              return fail(`frame type ${item.type}`);
          }
        }
      } catch (e) {
        fail((e as Error).message);
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(handshake);
      writer.closed = true;
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
  /** Send a RESPONSE frame (at once when the link is idle, else with the others of this turn); false when the link is closed. */
  send(token: string, message: Uint8Array): boolean;
  heartbeat(token: string): boolean;
  /** Refuse the request `token` carried down this link: no such instance is served (any more). */
  noResponders(token: string): boolean;
  readonly closed: boolean;
}

class Link implements CallHomeLink {
  open = false;
  readonly writer: FrameWriter;

  constructor(
    readonly socket: net.Socket,
    maxBufferedBytes: number,
    readonly maxMessageBytes: number,
  ) {
    this.writer = new FrameWriter(socket, maxBufferedBytes);
  }

  get closed(): boolean {
    return this.writer.closed;
  }

  send(token: string, message: Uint8Array): boolean {
    if (message.byteLength > this.maxMessageBytes) throw invalidArgument(`call-home: a ${message.byteLength}-byte message is over the limit of ${this.maxMessageBytes} bytes`);
    return this.writer.queue(encodeResponseFrame(token, message));
  }

  heartbeat(token: string): boolean {
    return this.writer.queue([encodeHeartbeatFrame(token)]);
  }

  noResponders(token: string): boolean {
    return this.writer.queue([encodeNoRespondersFrame(token)]);
  }

  subjects(serving: boolean, subjects: readonly string[]): void {
    // (a list longer than one frame takes is sent in several)
    let part: string[] = [];
    let bytes = 0;
    for (const s of subjects) {
      if (bytes + s.length + 1 > MAX_SUBJECTS_FRAME_BYTES / 4 && part.length > 0) {
        this.writer.queue([encodeSubjectsFrame(serving ? CallHomeFrame.SERVE : CallHomeFrame.WITHDRAW, part)]);
        part = [];
        bytes = 0;
      }
      part.push(s);
      bytes += s.length + 1;
    }
    if (part.length > 0) this.writer.queue([encodeSubjectsFrame(serving ? CallHomeFrame.SERVE : CallHomeFrame.WITHDRAW, part)]);
  }

  flush(): void {
    this.writer.flush();
  }
}

export interface CallHomeDialerOptions {
  readonly limits?: Partial<CallHomeLimits>;
  readonly logger?: Logger;
  /** The instance subjects this process serves now: announced to each caller once its link is open. */
  readonly served?: () => readonly string[];
  /** A request the caller sent down `link` (for the instance `subject`). */
  readonly onRequest?: (link: CallHomeLink, token: string, subject: string, message: Uint8Array) => void;
}

/** The worker's end: one connection per caller, dialed on the first request that names it. */
export class CallHomeDialer {
  private readonly limits: CallHomeLimits;
  private readonly log: Logger;
  private readonly options: CallHomeDialerOptions;
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
    this.options = options;
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
    const reader = new FramedWireReader(CALL_HOME_MAGIC, 'call-home', maxFrameBytes(this.limits));
    const timer = setTimeout(() => socket.destroy(), this.limits.handshakeTimeoutMs);
    socket.on('connect', () => {
      socket.write(Buffer.concat([encodeHello(CALL_HOME_MAGIC, CALL_HOME_VERSION), encodeFrame(CallHomeFrame.KEY, [Buffer.from(target.key, 'utf8')])]));
    });
    socket.on('data', (chunk: Buffer) => {
      // the caller sends its hello, then requests only; anything else ends the link
      reader.push(chunk);
      try {
        for (let item = reader.next(); item !== null && !socket.destroyed; item = reader.next()) {
          if (!link.open) {
            if (item.kind !== 'hello' || item.version !== CALL_HOME_VERSION) throw invalidArgument('call-home: the caller did not answer with its hello');
            clearTimeout(timer);
            link.open = true;
            const served = this.options.served?.() ?? [];
            if (served.length > 0) link.subjects(true, served);
            continue;
          }
          if (item.kind !== 'frame' || item.type !== CallHomeFrame.REQUEST || this.options.onRequest === undefined) throw invalidArgument('call-home: the caller sent something other than a request');
          const { token, subject, message } = decodeRequestFrame(item.parts);
          this.options.onRequest(link, token, subject, message);
        }
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
      link.writer.closed = true;
      if (this.links.get(id) === link) this.links.delete(id);
    });
  }

  /** Tell every caller this process holds a link to that it now serves (or no longer serves) `subjects`. */
  announce(serving: boolean, subjects: readonly string[]): void {
    for (const l of this.links.values()) if (l.open && !l.closed) l.subjects(serving, subjects);
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
