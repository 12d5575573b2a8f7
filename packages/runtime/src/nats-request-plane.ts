/**
 * RequestPlane on NATS core (no JetStream). Same semantics as MemoryRequestPlane.
 *
 * Serving one instance address subscribes to three subjects:
 *   - `endpointSubject(address)` in the queue group named after that subject (any one instance);
 *   - `instanceSubject(address)` plainly (this instance only);
 *   - `cancelSubject(address)` plainly (cancel broadcast; unknown request ids, and cancels naming
 *     another attempt of a re-sent request id, are ignored).
 *
 * A request is one NATS message: the RequestEnvelope (JSON, or a binary message for a BinaryPayload),
 * with the NATS reply subject set to a fresh inbox `<prefix>.<token>` under the plane's one wildcard
 * subscription `<prefix>.*` (made on the first request, on the same connection, so its SUB reaches
 * the server before any PUB; a subscription per request would cost a SUB and an UNSUB each). The worker publishes ResponseFrames to that reply subject, in order (NATS keeps the order
 * of one publisher's messages): `data` frames with seq 0.., then exactly one `final` or `error`. The
 * envelope announces `finalData`, so a worker of this version ends a stream that ends with its last
 * data frame in that frame (`final: true`): a unary response is one NATS message (an older worker
 * still sends two, which this caller reads as well).
 *
 * No responders: nats.js announces `headers` + `no_responders` in CONNECT, so when a message with a
 * reply subject matches no subscription, the server itself sends a status message (empty body,
 * header status 503) to the reply subject. The caller's inbox subscription sees it as its first
 * message and maps it to NoRespondersError. No extra round trip, no handshake.
 *
 * Dead worker: NATS tells the caller nothing when the worker's connection drops, so a stream with no
 * frame for `idleTimeoutMs` (default 30 s) is StreamIncompleteError; so is the caller's own connection
 * closing mid-stream. (Discovery-driven detection — the instance's key vanishing — is left to the
 * router, which can abort the request.)
 *
 * NATS outages (nats-connection.ts: the client reconnects forever, but whatever is published while
 * it is disconnected is silently discarded):
 *   - caller side: the connection dropping fails every open stream at once with a *local*
 *     StreamIncompleteError (frames may be lost; the worker is not to blame). A request made while
 *     disconnected waits for the reconnect (at most `reconnectWaitMs`, its deadline or its signal)
 *     before it is published; cancels are held until the reconnect. For `RECONNECT_GRACE_MS` after
 *     its own reconnect, a no-responders answer is re-sent every `GRACE_RETRY_MS` instead of failing:
 *     the workers that lost the same server are redialing too, a moment behind.
 *   - worker side: a data frame that cannot be published ends its stream: the handler is aborted and
 *     its terminal `cancelled` frame is held until the reconnect, so the caller sees the sequence gap
 *     (or that frame) and can migrate the request, instead of waiting out its idle timeout.
 */
import { type Msg, type NatsConnection, type Subscription, createInbox } from '@nats-io/nats-core';
import {
  type CancelSignal,
  type Logger,
  alreadyExists,
  cancelled,
  silentLogger,
  toSwitchyardError,
  unavailable,
} from '@switchyard/common';
import {
  type EndpointAddress,
  type InstanceAddress,
  cancelSubject,
  endpointSubject,
  formatAddress,
  instanceSubject,
} from './addressing.js';
import {
  type CallHomeConnection,
  CallHomeDialer,
  type CallHomeLink,
  CallHomeListener,
  type CallHomeLimits,
  type CallHomeListenOptions,
  DEFAULT_CALL_HOME_LIMITS,
  MAX_CALL_HOME_TOKEN_BYTES,
} from './call-home/call-home.js';
import { IdleSweep } from './idle-sweep.js';
import { type CallerInbox, type CallerSide, CallerStream, type IdleStream, type ReplyListener } from './nats-caller-stream.js';
import { connectNats, natsConnectionEncrypted, watchNatsConnection } from './nats-connection.js';
import { TurnBatch } from './turn-batch.js';
import { ChunkAssembler, HEARTBEAT_INTERVAL_MS, publishFramed, publishHeartbeat, publishNoResponders } from './nats-framing.js';
import { RunningRequests, writeResponse } from './response-writer.js';
import {
  type CallHomeTarget,
  type Payload,
  type ResponseFrame,
  decodeCancelMessage,
  decodeJson,
  decodeMessage,
  decodeRequestEnvelope,
  encodeMessage,
} from './protocols.js';
import {
  type EndpointHandler,
  type RequestOptions,
  type RequestPlane,
  type ServedEndpoint,
  requestIdSource,
} from './request-plane.js';

/** Default: a stream with no frame for this long is StreamIncompleteError. */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 30_000;
/** Default: how long a request made while NATS is disconnected waits for the reconnect. */
export const DEFAULT_RECONNECT_WAIT_MS = 10_000;
/** Instance subjects one call-home connection may announce; more are not routed down it. */
const MAX_SUBJECTS_PER_HOME = 4096;
/** Messages (cancels, terminal frames) held while disconnected; beyond it the oldest are dropped. */
const MAX_HELD_MESSAGES = 10_000;

/**
 * A message waiting in the plane's outbox. A request carries its reply inbox and `failed`, which
 * fails the caller's stream when it cannot be published (a request is never held for a reconnect: its
 * caller's stream already ended with the disconnect).
 */
interface OutboxMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly reply?: string;
  readonly failed?: (e: unknown) => void;
}

/** A stream a worker is answering, in the plane's heartbeat sweep: silent `heartbeatIntervalMs` → a heartbeat to `reply`. */
interface HeartbeatEntry {
  lastActive: number;
  readonly reply: string;
  /** The stream's call-home link, when its frames go there. */
  readonly link: CallHomeLink | undefined;
}


/** What a caller's `offerCallHome` listens on (call-home/call-home.ts). */
export type CallHomeOffer = Pick<CallHomeListenOptions, 'host' | 'port' | 'advertiseHost' | 'limits'>;

export interface NatsRequestPlaneOptions {
  readonly logger?: Logger;
  /** No frame for this long ends a response stream with StreamIncompleteError (0 = never). */
  readonly idleTimeoutMs?: number;
  /** A request made while disconnected waits this long for the reconnect, then fails `unavailable`. */
  readonly reconnectWaitMs?: number;
  /** Worker side: a stream silent this long gets a heartbeat (default HEARTBEAT_INTERVAL_MS). */
  readonly heartbeatIntervalMs?: number;
  /** Worker side: the limits of its call-home links (DEFAULT_CALL_HOME_LIMITS). */
  readonly callHomeLimits?: Partial<CallHomeLimits>;
  /** Worker side: false = never dial a caller's call-home address (every response goes over NATS). Default true. */
  readonly answerCallHome?: boolean;
}

export interface NatsRequestPlaneConnectOptions extends NatsRequestPlaneOptions {
  /** `nats://host:port` (or several, comma separated). */
  readonly url: string;
  /** Connection name shown by the server (monitoring). */
  readonly name?: string;
  /** Take response streams over call-home connections, listening here (`offerCallHome`). */
  readonly callHome?: CallHomeOffer;
}

/** A chunked request whose last chunk has not come within this long is dropped (its caller died). */
const PARTIAL_REQUEST_TTL_MS = 60_000;

class NatsServedEndpoint implements ServedEndpoint {
  readonly subject: string;
  private readonly running = new RunningRequests();
  /** Chunked requests being received, by reply inbox (nats-framing.ts). */
  private readonly chunks = new ChunkAssembler();
  private readonly subs: Subscription[] = [];
  private stopped = false;

  constructor(
    readonly address: InstanceAddress,
    private readonly owner: NatsRequestPlane,
    private readonly nc: NatsConnection,
    private readonly handler: EndpointHandler,
    private readonly log: Logger,
  ) {
    this.subject = instanceSubject(address);
  }

  async start(): Promise<void> {
    const group = endpointSubject(this.address);
    const onRequest = (err: Error | null, m: Msg): void => {
      if (err) return this.log.warn({ err: err.message }, 'request subscription error');
      this.onRequest(m);
    };
    this.subs.push(this.nc.subscribe(group, { queue: group, callback: onRequest }));
    this.subs.push(this.nc.subscribe(this.subject, { callback: onRequest }));
    this.subs.push(
      this.nc.subscribe(cancelSubject(this.address), {
        callback: (err, m) => {
          if (!err) this.onCancel(m);
        },
      }),
    );
    // make sure the server has the subscriptions before the instance is announced in discovery
    await this.nc.flush();
  }

  private onRequest(m: Msg): void {
    if (this.stopped) {
      // Stopped (draining, or gone): refuse as NATS refuses a subject nobody serves, so the caller
      // sends it elsewhere at once instead of waiting on silence (see stop()).
      if (m.reply && !this.nc.isClosed()) publishNoResponders(this.nc, m.reply);
      return;
    }
    const reply = m.reply;
    if (!reply) return this.log.warn({ subject: m.subject }, 'request without reply subject dropped');
    let data;
    try {
      if (this.chunks.size > 0) this.chunks.expire(PARTIAL_REQUEST_TTL_MS);
      data = this.chunks.accept(reply, m);
      if (data === null) return; // more chunks to come
    } catch (e) {
      return this.refuse(reply, e, undefined);
    }
    this.run(reply, data, undefined);
  }

  /** @internal A request a caller sent down its call-home link (never chunked); answered on that link. */
  onLinkRequest(link: CallHomeLink, token: string, message: Uint8Array): void {
    if (this.stopped) return void link.noResponders(token);
    this.run(token, message, link);
  }

  /** A request that cannot be read: an error frame to its caller. */
  private refuse(reply: string, e: unknown, via: CallHomeLink | undefined): void {
    const err = toSwitchyardError(e);
    const frame: ResponseFrame = { v: 1, type: 'error', seq: 0, error: { code: err.code, message: err.message } };
    if (via !== undefined) via.send(reply, encodeMessage(frame));
    else this.publish(reply, frame, true);
  }

  /** Run one request whose whole message is `data`; `via`: the call-home link it came down (its answer goes there). */
  private run(reply: string, data: Uint8Array, via: CallHomeLink | undefined): void {
    let envelope;
    try {
      envelope = decodeRequestEnvelope(decodeMessage(data));
    } catch (e) {
      return this.refuse(reply, e, via);
    }
    const requestId = envelope.requestId;
    this.running.start(requestId, envelope.attempt, async (abort) => {
      // A frame of this stream lost to a NATS outage: the handler is aborted, the caller told.
      let broken = false;
      // a silent handler (a long unary computation) still shows the caller it is alive: the plane's
      // one heartbeat sweep, not a timer per request
      const heartbeats = this.owner.heartbeats;
      // the caller's call-home connection, when one is open: the whole stream goes there
      const link =
        via ??
        (envelope.callHome === undefined || !this.owner.answerCallHome || Buffer.byteLength(reply) > MAX_CALL_HOME_TOKEN_BYTES ? undefined : this.owner.callHomeDialer.link(envelope.callHome));
      const silence: HeartbeatEntry = { lastActive: 0, reply, link };
      heartbeats.add(silence);
      const send = (frame: ResponseFrame): void => {
        heartbeats.touch(silence);
        if (link !== undefined) {
          let message = encodeMessage(frame);
          if (message.byteLength > link.maxMessageBytes && !broken) {
            // the caller would refuse the frame and close the connection every stream shares: this
            // stream ends with an error instead (over NATS it would have been refused as a whole too)
            broken = true;
            abort.abort(cancelled(`request ${requestId}: a response frame too large for call-home`));
            const error = { code: 'internal' as const, message: `a response frame of ${message.byteLength} bytes is over the call-home limit of ${link.maxMessageBytes} bytes` };
            message = encodeMessage({ v: 1, type: 'error', seq: frame.seq, error });
          } else if (message.byteLength > link.maxMessageBytes) return;
          if (link.send(reply, message) || frame.type !== 'data' || broken) return;
          // the connection is gone, and the caller knows: stop producing
          broken = true;
          return abort.abort(cancelled(`request ${requestId}: the call-home connection to its caller closed mid-stream`));
        }
        if (frame.type !== 'data') return this.publish(reply, frame, true);
        if (this.owner.isConnected()) return this.publish(reply, frame, false);
        // NATS would discard it: the stream has a hole now, end it and say so once reconnected
        broken = true;
        abort.abort(cancelled(`request ${requestId}: the worker lost its connection to NATS mid-stream`));
      };
      try {
        await writeResponse({ handler: this.handler, envelope, abort, send, stopped: () => this.stopped || broken });
      } finally {
        heartbeats.delete(silence);
      }
    });
  }

  /** `hold`: while disconnected, keep the frame for the reconnect instead of losing it. */
  private publish(reply: string, frame: ResponseFrame, hold: boolean): void {
    if (this.nc.isClosed()) return;
    this.owner.publishWhenConnected(reply, encodeMessage(frame), hold);
  }

  private onCancel(m: Msg): void {
    try {
      const msg = decodeCancelMessage(decodeJson(m.data));
      this.running.abort(msg.requestId, cancelled(`request ${msg.requestId} cancelled by the caller`), msg.attempt);
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'bad cancel message ignored');
    }
  }

  async stop(options?: { drain?: boolean }): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      this.owner.forget(this);
      // callers that send requests down their call-home links stop sending this instance's there
      this.owner.callHomeDialer.announce(false, [this.subject]);
      // The queue group's subscription goes now, so NATS routes the group's requests to the other
      // members. The instance subject's stays until the requests in flight are done: a request a
      // caller sent just before the server saw an UNSUB would still reach this connection, be dropped
      // by the client (no subscription) and leave its caller waiting on silence; kept, it is refused
      // with the no-responders status (onRequest) and its caller re-sends it elsewhere at once. The
      // cancel subscription stays too.
      this.subs[0]?.unsubscribe();
    }
    if (options?.drain === false) this.running.abortAll(cancelled(`endpoint ${formatAddress(this.address)} stopped`));
    await this.running.settled();
    for (const s of this.subs) s.unsubscribe();
    this.owner.flushOutbox(); // the last frames, queued for the end of this turn
    if (!this.nc.isClosed()) await this.nc.flush().catch(() => undefined);
  }

  /** The connection is gone: abort the handlers; nothing more can be sent. */
  lost(): void {
    this.stopped = true;
    this.running.abortAll(unavailable('connection to NATS closed'));
  }
}

/** One process's RequestPlane client over a NATS connection. */
export class NatsRequestPlane implements RequestPlane {
  private readonly served = new Set<NatsServedEndpoint>();
  private readonly callers = new Set<CallerInbox>();
  /** What each request's CallerStream reaches of this plane. */
  private readonly callerSide: CallerSide;
  private readonly log: Logger;
  private readonly idleTimeoutMs: number;
  private readonly reconnectWaitMs: number;
  /** @internal */
  readonly heartbeatIntervalMs: number;
  /** @internal Worker side: the streams being answered, a heartbeat to each one silent for `heartbeatIntervalMs`. */
  readonly heartbeats: IdleSweep<HeartbeatEntry>;
  /** Caller side: the open streams, each ended once silent for `idleTimeoutMs` (undefined: 0, never). */
  private readonly idleStreams: IdleSweep<IdleStream> | undefined;
  private readonly ownsConnection: boolean;
  private closed = false;
  /** Ids of the requests and attempts this plane sends. */
  private readonly nextId = requestIdSource();
  /** False from a `disconnect` status until the `reconnect` (nats-connection.ts). */
  private connected = true;
  /** Epoch ms of the last reconnect (-Infinity: never reconnected). */
  private reconnectedAt = -Infinity;
  private readonly reconnectWaiters = new Set<() => void>();
  /** Published once reconnected, in order. */
  private held: OutboxMessage[] = [];
  /** Published at once when idle, else at the end of this event-loop turn, in order (`publishBatch`). */
  private readonly outbox = new TurnBatch<OutboxMessage>((batch) => this.publishBatch(batch));
  /** The callers' reply inboxes: one wildcard subscription, a listener per request's reply subject. */
  private replies: { readonly prefix: string; readonly sub: Subscription; readonly listeners: Map<string, ReplyListener> } | undefined;
  private nextToken = 0;
  /** @internal Worker side: connections to the callers that offer call-home. */
  readonly callHomeDialer: CallHomeDialer;
  /** @internal Worker side: whether requests naming a call-home address are answered there. */
  readonly answerCallHome: boolean;
  /** Caller side, once `offerCallHome`: the listener, and what each request's envelope names. */
  private callHome: { readonly listener: CallHomeListener; readonly target: CallHomeTarget } | undefined;
  private callHomeStarting: Promise<CallHomeTarget> | undefined;
  /** Caller side: the call-home connection each stream's frames come on (by reply subject), and the streams of each. */
  private readonly homeOf = new Map<string, number>();
  private readonly homeStreams = new Map<number, Set<string>>();
  private homeFrames = 0;
  /** Caller side: the call-home connection of the worker serving each instance subject (as it announced), and each connection's subjects. */
  private readonly subjectHome = new Map<string, CallHomeConnection>();
  private readonly homeSubjects = new Map<number, Set<string>>();
  private homeRequests = 0;

  /**
   * Wrap an existing connection. `ownsConnection`: close() also closes the connection (default false).
   */
  constructor(
    readonly nc: NatsConnection,
    options: NatsRequestPlaneOptions & { ownsConnection?: boolean } = {},
  ) {
    this.log = options.logger ?? silentLogger;
    this.idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS;
    this.reconnectWaitMs = options.reconnectWaitMs ?? DEFAULT_RECONNECT_WAIT_MS;
    this.heartbeatIntervalMs = options.heartbeatIntervalMs ?? HEARTBEAT_INTERVAL_MS;
    this.ownsConnection = options.ownsConnection ?? false;
    this.answerCallHome = options.answerCallHome ?? true;
    this.callHomeDialer = new CallHomeDialer({
      logger: this.log,
      ...(options.callHomeLimits !== undefined ? { limits: options.callHomeLimits } : {}),
      served: () => [...this.served].map((ep) => ep.subject),
      onRequest: (link, token, subject, message) => {
        for (const ep of this.served) if (ep.subject === subject) return ep.onLinkRequest(link, token, message);
        link.noResponders(token);
      },
    });
    this.heartbeats = new IdleSweep<HeartbeatEntry>(this.heartbeatIntervalMs, (e) => this.heartbeat(e));
    if (this.idleTimeoutMs > 0) {
      const idle = new IdleSweep<IdleStream>(this.idleTimeoutMs, (e) => {
        idle.delete(e);
        e.expire();
      });
      this.idleStreams = idle;
    }
    this.callerSide = {
      nc,
      idleTimeoutMs: this.idleTimeoutMs,
      idleStreams: this.idleStreams,
      callers: this.callers,
      reconnectWaitMs: this.reconnectWaitMs,
      isClosed: () => this.closed || nc.isClosed(),
      isConnected: () => this.connected,
      reconnectedAt: () => this.reconnectedAt,
      nextId: this.nextId,
      waitConnected: (ms, signal) => this.waitConnected(ms, signal),
      openReplyInbox: (listener) => this.openReplyInbox(listener),
      sendHome: (subject, replySubject, message) => this.sendHome(subject, replySubject, message),
      publishRequest: (subject, data, reply, failed) => this.queue({ subject, data, reply, failed }),
      publishWhenConnected: (subject, data) => this.publishWhenConnected(subject, data),
      callHomeTarget: () => this.callHome?.target,
    };
    void nc.closed().then(() => this.connectionLost());
    watchNatsConnection(nc, this.log, { onDisconnect: () => this.onDisconnect(), onReconnect: () => this.onReconnect() });
  }

  /**
   * Open a connection of its own (closed by close()); it reconnects forever. Over an encrypted NATS
   * connection (TLS) there is no call-home, either side: its connections are plain TCP, and requests
   * and responses must not leave the encryption the operator chose. They stay on NATS (logged once).
   */
  static async connect(options: NatsRequestPlaneConnectOptions): Promise<NatsRequestPlane> {
    const nc = await connectNats({ url: options.url, name: options.name ?? 'switchyard-request-plane' });
    const encrypted = natsConnectionEncrypted(nc, options.url);
    if (encrypted && (options.callHome !== undefined || options.answerCallHome !== false)) {
      options.logger?.info(
        { nats: options.url },
        'call-home off: NATS is reached over TLS and call-home connections are not encrypted, so requests and responses stay on NATS',
      );
    }
    const plane = new NatsRequestPlane(nc, { ...options, ownsConnection: true, ...(encrypted ? { answerCallHome: false } : {}) });
    if (options.callHome !== undefined && !encrypted) {
      try {
        await plane.offerCallHome(options.callHome);
      } catch (e) {
        await plane.close();
        throw unavailable(`cannot listen for call-home response streams: ${(e as Error).message}`, e);
      }
    }
    return plane;
  }

  /** A stream silent for a heartbeat interval: one heartbeat (none while disconnected), and the next one an interval later. */
  private heartbeat(e: HeartbeatEntry): void {
    e.lastActive = Date.now();
    if (e.link !== undefined) return void e.link.heartbeat(e.reply);
    if (!this.connected || this.nc.isClosed()) return;
    try {
      publishHeartbeat(this.nc, e.reply);
    } catch {
      // closing: the caller finds out by itself
    }
  }

  /** @internal False while NATS is disconnected. */
  isConnected(): boolean {
    return this.connected;
  }

  /** @internal Publish now, or once reconnected (a cancel, a terminal frame: small, must arrive). */
  publishWhenConnected(subject: string, data: Uint8Array, hold = true): void {
    if (this.nc.isClosed()) return;
    if (!this.connected) {
      if (hold) this.holdMessage({ subject, data });
      return;
    }
    this.queue({ subject, data });
  }

  private queue(m: OutboxMessage): void {
    this.outbox.add(m);
  }

  private holdMessage(m: OutboxMessage): void {
    if (this.held.length >= MAX_HELD_MESSAGES) this.held.shift();
    this.held.push(m);
  }

  /** @internal Publish what is queued now (an endpoint's last frames as it stops). */
  flushOutbox(): void {
    this.outbox.flush();
  }

  /**
   * Publish a batch (TurnBatch: one message at once when the plane was idle, else what this turn of
   * the event loop queued), in order, in one go: nats.js flushes its buffer once per microtask drain,
   * so the frames of every stream that produced one this turn (a unary response's data and final
   * frames, for a caller that did not announce `finalData`) leave in one socket write instead of one
   * write each. Disconnected meanwhile: the batch is held for the reconnect, still in order.
   */
  private publishBatch(batch: readonly OutboxMessage[]): void {
    for (const m of batch) {
      if (this.nc.isClosed()) {
        m.failed?.(unavailable('connection to NATS closed'));
        continue;
      }
      if (!this.connected) {
        // a request's caller was told of the disconnect already (its stream failed): not re-sent later
        if (m.failed !== undefined) m.failed(unavailable('connection to NATS lost before the request was sent'));
        else this.holdMessage(m);
        continue;
      }
      try {
        publishFramed(this.nc, m.subject, m.data, m.reply);
      } catch (e) {
        if (m.failed !== undefined) m.failed(e);
        else this.log.debug({ err: (e as Error).message, subject: m.subject }, 'message not sent');
      }
    }
  }

  /**
   * A reply inbox for one request: `listener` gets each message sent to it, or `null` once the
   * subscription behind it has ended (the connection closed). `close` forgets it; frames still on their
   * way are dropped.
   */
  private openReplyInbox(listener: ReplyListener): { readonly subject: string; close(): void } {
    let r = this.replies;
    if (r === undefined) {
      const prefix = createInbox();
      const listeners = new Map<string, ReplyListener>();
      const sub = this.nc.subscribe(`${prefix}.*`, {
        callback: (err, m) => {
          if (err) {
            for (const l of listeners.values()) l.nats(null);
            return;
          }
          listeners.get(m.subject)?.nats(m);
        },
      });
      const made = { prefix, sub, listeners };
      void sub.closed.then(() => {
        if (this.replies === made) this.replies = undefined;
        for (const l of listeners.values()) l.nats(null);
        listeners.clear();
      });
      this.replies = r = made;
    }
    // keyed by the whole reply subject: a frame's subject (NATS or call-home) is looked up as it is
    const subject = `${r.prefix}.${(this.nextToken++).toString(36)}`;
    const listeners = r.listeners;
    listeners.set(subject, listener);
    return {
      subject,
      close: () => {
        listeners.delete(subject);
        const conn = this.homeOf.get(subject);
        if (conn === undefined) return;
        this.homeOf.delete(subject);
        this.homeStreams.get(conn)?.delete(subject);
      },
    };
  }

  /**
   * Caller side: take response streams over call-home connections from now on (call-home/call-home.ts).
   * Listens (`host`, default 127.0.0.1) and names the address and key in every request's envelope;
   * workers that reach it send the streams there, the others over NATS. Idempotent.
   */
  offerCallHome(options: CallHomeOffer = {}): Promise<CallHomeTarget> {
    const starting = (this.callHomeStarting ??= this.startCallHome(options));
    starting.catch(() => {
      if (this.callHomeStarting === starting) this.callHomeStarting = undefined;
    });
    return starting;
  }

  private async startCallHome(options: CallHomeOffer): Promise<CallHomeTarget> {
    if (this.closed) throw unavailable('request plane is closed');
    const listener = await CallHomeListener.listen({
      ...options,
      logger: this.log,
      onFrame: (subject, message, conn) => this.onHomeFrame(subject, message, conn),
      onClose: (conn) => this.onHomeClose(conn),
      onSubjects: (conn, subjects, serving) => this.onHomeSubjects(conn, subjects, serving),
      onNoResponders: (token) => this.homeListener(token)?.home('no-responders'),
    });
    if (this.closed) {
      await listener.close();
      throw unavailable('request plane is closed');
    }
    this.callHome = { listener, target: { address: listener.address, key: listener.key } };
    return this.callHome.target;
  }

  /** The open stream whose reply subject is `subject`, if any. */
  private homeListener(subject: string): ReplyListener | undefined {
    return this.replies?.listeners.get(subject);
  }

  /** The stream with reply subject `subject` travels on `conn`: its close fails the stream. */
  private bindHome(subject: string, conn: CallHomeConnection): void {
    if (this.homeOf.has(subject)) return;
    this.homeOf.set(subject, conn.id);
    let streams = this.homeStreams.get(conn.id);
    if (streams === undefined) this.homeStreams.set(conn.id, (streams = new Set()));
    streams.add(subject);
  }

  private onHomeFrame(subject: string, message: Uint8Array | null, conn: CallHomeConnection): void {
    const listener = this.homeListener(subject);
    if (listener === undefined) return; // a stream that is over
    this.bindHome(subject, conn);
    this.homeFrames++;
    listener.home(message ?? 'heartbeat');
  }

  private onHomeSubjects(conn: CallHomeConnection, subjects: readonly string[], serving: boolean): void {
    let mine = this.homeSubjects.get(conn.id);
    if (mine === undefined) this.homeSubjects.set(conn.id, (mine = new Set()));
    for (const s of subjects) {
      if (serving) {
        // (a worker process serves a few endpoints per model: this bound only stops a peer gone wrong)
        if (mine.size >= MAX_SUBJECTS_PER_HOME && !mine.has(s)) continue;
        this.subjectHome.set(s, conn);
        mine.add(s);
      } else {
        if (this.subjectHome.get(s) === conn) this.subjectHome.delete(s);
        mine.delete(s);
      }
    }
  }

  /**
   * @internal Caller side: send a request down the call-home connection of the worker that announced
   * `subject`; false (nothing sent) when there is none: the caller publishes it on NATS.
   */
  sendHome(subject: string, replySubject: string, message: Uint8Array): boolean {
    const conn = this.subjectHome.get(subject);
    if (conn === undefined || message.byteLength > DEFAULT_CALL_HOME_LIMITS.maxMessageBytes || !conn.request(replySubject, subject, message)) return false;
    this.bindHome(replySubject, conn);
    this.homeRequests++;
    return true;
  }

  /** Caller side: requests sent down call-home connections so far (diagnostics, tests). */
  get callHomeRequests(): number {
    return this.homeRequests;
  }

  /** Caller side: frames and heartbeats that came over call-home connections so far (diagnostics, tests). */
  get callHomeFrames(): number {
    return this.homeFrames;
  }

  /** Caller side: worker connections streaming responses home now (0 until `offerCallHome`). */
  get callHomeConnections(): number {
    return this.callHome?.listener.connections ?? 0;
  }

  /** Caller side: where workers are told to stream responses home (undefined until `offerCallHome`). */
  get callHomeAddress(): string | undefined {
    return this.callHome?.target.address;
  }

  /** A worker's call-home connection closed: the streams it carried end incomplete. */
  private onHomeClose(conn: CallHomeConnection): void {
    for (const s of this.homeSubjects.get(conn.id) ?? []) if (this.subjectHome.get(s) === conn) this.subjectHome.delete(s);
    this.homeSubjects.delete(conn.id);
    const streams = this.homeStreams.get(conn.id);
    if (streams === undefined) return;
    this.homeStreams.delete(conn.id);
    const r = this.replies;
    for (const subject of streams) {
      this.homeOf.delete(subject);
      r?.listeners.get(subject)?.home('lost');
    }
  }

  private onDisconnect(): void {
    this.connected = false;
    // frames to our inboxes may be lost from now on: end every open stream (the worker is not to blame)
    for (const c of this.callers) c.push('connection-lost');
  }

  private onReconnect(): void {
    this.connected = true;
    this.reconnectedAt = Date.now();
    const held = this.held;
    this.held = [];
    for (const m of held) this.publishWhenConnected(m.subject, m.data);
    for (const wake of [...this.reconnectWaiters]) wake();
  }

  /** Resolves once connected (at once if connected); rejects `unavailable` after `ms` or on `signal`. */
  private async waitConnected(ms: number, signal: CancelSignal | undefined): Promise<void> {
    if (this.connected) return;
    await new Promise<void>((resolve, reject) => {
      const done = (err?: unknown): void => {
        clearTimeout(timer);
        this.reconnectWaiters.delete(wake);
        signal?.removeEventListener('abort', onAbort);
        if (err === undefined) resolve();
        else reject(err);
      };
      const wake = (): void => done();
      const onAbort = (): void => done(cancelled('request cancelled while waiting for the NATS reconnect'));
      const timer = setTimeout(() => done(unavailable(`not connected to NATS (waited ${ms} ms for the reconnect)`)), ms);
      this.reconnectWaiters.add(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Wrap an existing connection (not closed by close()). */
  static fromConnection(nc: NatsConnection, options: NatsRequestPlaneOptions = {}): NatsRequestPlane {
    return new NatsRequestPlane(nc, options);
  }

  async serve(address: InstanceAddress, handler: EndpointHandler): Promise<ServedEndpoint> {
    if (this.closed || this.nc.isClosed()) throw unavailable('request plane is closed');
    for (const ep of this.served) {
      if (ep.subject === instanceSubject(address)) throw alreadyExists(`${formatAddress(address)} is already served`);
    }
    const ep = new NatsServedEndpoint(address, this, this.nc, handler, this.log.child({ endpoint: formatAddress(address) }));
    this.served.add(ep);
    try {
      await ep.start();
    } catch (e) {
      this.served.delete(ep);
      throw unavailable(`cannot serve ${formatAddress(address)}: ${(e as Error).message}`, e);
    }
    this.callHomeDialer.announce(true, [ep.subject]);
    return ep;
  }

  /** @internal */
  forget(ep: NatsServedEndpoint): void {
    this.served.delete(ep);
  }

  request(target: EndpointAddress | InstanceAddress, payload: Payload, options: RequestOptions = {}): AsyncIterable<Payload> {
    // each iteration sends the request (nats-caller-stream.ts)
    return { [Symbol.asyncIterator]: () => new CallerStream(this.callerSide, target, payload, options) };
  }

  private connectionLost(): void {
    for (const wake of [...this.reconnectWaiters]) wake();
    for (const ep of [...this.served]) ep.lost();
    this.served.clear();
    // the callers' inbox subscriptions close with the connection: their streams end incomplete
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.served].map((ep) => ep.stop({ drain: false })));
    this.closed = true;
    this.callHomeDialer.close();
    for (const c of [...this.callers]) c.fail(unavailable('request plane is closed'));
    await this.callHome?.listener.close();
    this.flushOutbox();
    if (this.ownsConnection && !this.nc.isClosed()) {
      await this.nc.drain().catch(() => this.nc.close());
    }
  }
}
