/**
 * RequestPlane on NATS core (no JetStream). Same semantics as MemoryRequestPlane.
 *
 * Serving one instance address subscribes to three subjects:
 *   - `endpointSubject(address)` in the queue group named after that subject (any one instance);
 *   - `instanceSubject(address)` plainly (this instance only);
 *   - `cancelSubject(address)` plainly (cancel broadcast; unknown request ids are ignored).
 *
 * A request is one NATS message: the RequestEnvelope JSON, with the NATS reply subject set to a fresh
 * inbox the caller subscribed to just before (same connection, so the SUB reaches the server before
 * the PUB). The worker publishes ResponseFrames to that reply subject, in order (NATS keeps the order
 * of one publisher's messages): `data` frames with seq 0.., then exactly one `final` or `error`.
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
 */
import { randomUUID } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import { type Msg, type NatsConnection, type Subscription, createInbox } from '@nats-io/nats-core';
import {
  type Logger,
  SwitchyardError,
  alreadyExists,
  cancelled,
  deadlineExceeded,
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
  isInstanceAddress,
} from './addressing.js';
import { AsyncChannel } from './async-channel.js';
import { writeResponse } from './response-writer.js';
import {
  type JsonValue,
  type ResponseFrame,
  decodeCancelMessage,
  decodeJson,
  decodeRequestEnvelope,
  decodeResponseFrame,
  encodeJson,
} from './protocols.js';
import {
  type EndpointHandler,
  type RequestOptions,
  type RequestPlane,
  type ServedEndpoint,
  NoRespondersError,
  StreamIncompleteError,
} from './request-plane.js';

/** Default: a stream with no frame for this long is StreamIncompleteError. */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 30_000;

export interface NatsRequestPlaneOptions {
  readonly logger?: Logger;
  /** No frame for this long ends a response stream with StreamIncompleteError (0 = never). */
  readonly idleTimeoutMs?: number;
}

export interface NatsRequestPlaneConnectOptions extends NatsRequestPlaneOptions {
  /** `nats://host:port` (or several, comma separated). */
  readonly url: string;
  /** Connection name shown by the server (monitoring). */
  readonly name?: string;
}

interface Running {
  readonly abort: AbortController;
  readonly done: Promise<void>;
}

class NatsServedEndpoint implements ServedEndpoint {
  readonly subject: string;
  private readonly running = new Map<string, Running>();
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
    if (this.stopped) return;
    const reply = m.reply;
    if (!reply) return this.log.warn({ subject: m.subject }, 'request without reply subject dropped');
    let envelope;
    try {
      envelope = decodeRequestEnvelope(decodeJson(m.data));
    } catch (e) {
      const err = toSwitchyardError(e);
      this.publish(reply, { v: 1, type: 'error', seq: 0, error: { code: err.code, message: err.message } });
      return;
    }
    const abort = new AbortController();
    const requestId = envelope.requestId;
    const run = async (): Promise<void> => {
      try {
        await writeResponse({ handler: this.handler, envelope, abort, send: (frame) => this.publish(reply, frame), stopped: () => this.stopped });
      } finally {
        this.running.delete(requestId);
      }
    };
    const entry: { abort: AbortController; done: Promise<void> } = { abort, done: Promise.resolve() };
    this.running.set(requestId, entry);
    entry.done = run();
  }

  private publish(reply: string, frame: ResponseFrame): void {
    if (this.nc.isClosed()) return;
    try {
      this.nc.publish(reply, encodeJson(frame));
    } catch (e) {
      this.log.debug({ err: (e as Error).message }, 'response frame not sent');
    }
  }

  private onCancel(m: Msg): void {
    try {
      const msg = decodeCancelMessage(decodeJson(m.data));
      this.running.get(msg.requestId)?.abort.abort(cancelled(`request ${msg.requestId} cancelled by the caller`));
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'bad cancel message ignored');
    }
  }

  async stop(options?: { drain?: boolean }): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      this.owner.forget(this);
      // keep the cancel subscription until in-flight requests are done
      for (const s of this.subs.slice(0, 2)) s.unsubscribe();
    }
    if (options?.drain === false) {
      for (const r of this.running.values()) r.abort.abort(cancelled(`endpoint ${formatAddress(this.address)} stopped`));
    }
    await Promise.all([...this.running.values()].map((r) => r.done));
    for (const s of this.subs) s.unsubscribe();
    if (!this.nc.isClosed()) await this.nc.flush().catch(() => undefined);
  }

  /** The connection is gone: abort the handlers; nothing more can be sent. */
  lost(): void {
    this.stopped = true;
    for (const r of this.running.values()) r.abort.abort(unavailable('connection to NATS closed'));
  }
}

/** One process's RequestPlane client over a NATS connection. */
export class NatsRequestPlane implements RequestPlane {
  private readonly served = new Set<NatsServedEndpoint>();
  private readonly callers = new Set<AsyncChannel<ResponseFrame>>();
  private readonly log: Logger;
  private readonly idleTimeoutMs: number;
  private readonly ownsConnection: boolean;
  private closed = false;

  /**
   * Wrap an existing connection. `ownsConnection`: close() also closes the connection (default false).
   */
  constructor(
    readonly nc: NatsConnection,
    options: NatsRequestPlaneOptions & { ownsConnection?: boolean } = {},
  ) {
    this.log = options.logger ?? silentLogger;
    this.idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS;
    this.ownsConnection = options.ownsConnection ?? false;
    void nc.closed().then(() => this.connectionLost());
  }

  /** Open a connection of its own (closed by close()). */
  static async connect(options: NatsRequestPlaneConnectOptions): Promise<NatsRequestPlane> {
    let nc: NatsConnection;
    try {
      nc = await connect({ servers: options.url.split(','), name: options.name ?? 'switchyard-request-plane' });
    } catch (e) {
      throw unavailable(`cannot connect to NATS at ${options.url}: ${(e as Error).message}`, e);
    }
    return new NatsRequestPlane(nc, { ...options, ownsConnection: true });
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
    return ep;
  }

  /** @internal */
  forget(ep: NatsServedEndpoint): void {
    this.served.delete(ep);
  }

  request(target: EndpointAddress | InstanceAddress, payload: JsonValue, options: RequestOptions = {}): AsyncIterable<JsonValue> {
    const nc = this.nc;
    const callers = this.callers;
    const idleTimeoutMs = this.idleTimeoutMs;
    const isClosed = (): boolean => this.closed || nc.isClosed();
    return {
      [Symbol.asyncIterator]: async function* () {
        if (isClosed()) throw unavailable('request plane is closed');
        const { signal, timeoutMs = 0 } = options;
        const requestId = options.requestId ?? randomUUID();
        if (signal?.aborted) throw cancelled(`request ${requestId} cancelled before it was sent`);
        const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : null;

        // frames, or a marker for the 503 status / the subscription closing with the connection
        const inbox = new AsyncChannel<ResponseFrame | 'no-responders'>();
        let protocolError: unknown = null;
        let idle: ReturnType<typeof setTimeout> | undefined;
        let idleExpired = false;
        const armIdle = (): void => {
          if (idleTimeoutMs <= 0) return;
          clearTimeout(idle);
          idle = setTimeout(() => {
            idleExpired = true;
            inbox.end();
          }, idleTimeoutMs);
        };
        const sub = nc.subscribe(createInbox(), {
          callback: (err, m) => {
            if (err) return inbox.end();
            armIdle();
            if (m.data.length === 0 && (m.headers?.code === 503 || m.headers?.status === '503')) return inbox.push('no-responders');
            try {
              inbox.push(decodeResponseFrame(decodeJson(m.data)));
            } catch (e) {
              protocolError = e;
              inbox.end();
            }
          },
        });
        void sub.closed.then(() => inbox.end());
        callers.add(inbox as AsyncChannel<ResponseFrame>);
        const subject = isInstanceAddress(target) ? instanceSubject(target) : endpointSubject(target);
        let sent = false;
        let terminal = false;
        let received = 0;
        const onAbort = (): void => inbox.fail(cancelled(`request ${requestId} cancelled`));
        signal?.addEventListener('abort', onAbort, { once: true });
        const timer =
          deadline === null ? undefined : setTimeout(() => inbox.fail(deadlineExceeded(`request ${requestId} timed out after ${timeoutMs} ms`)), timeoutMs);
        try {
          try {
            nc.publish(subject, encodeJson({ v: 1, requestId, payload, deadline }), { reply: sub.getSubject() });
          } catch (e) {
            throw unavailable(`request ${requestId} not sent: ${(e as Error).message}`, e);
          }
          sent = true;
          armIdle();
          for (let expected = 0; ; expected++) {
            const r = await inbox.next();
            if (r.done) {
              const why = protocolError
                ? unavailable(`bad response frame: ${(protocolError as Error).message}`, protocolError)
                : idleExpired
                  ? unavailable(`no response frame for ${idleTimeoutMs} ms`)
                  : unavailable('connection to NATS closed');
              throw new StreamIncompleteError(target, received, why);
            }
            const frame = r.value;
            if (frame === 'no-responders') {
              if (expected === 0) {
                terminal = true; // nothing reached a worker: nothing to cancel
                throw new NoRespondersError(target);
              }
              continue;
            }
            if (frame.seq !== expected) {
              throw new StreamIncompleteError(target, received, unavailable(`frame ${expected} missing (got ${frame.seq})`));
            }
            if (frame.type === 'final') {
              terminal = true;
              return;
            }
            if (frame.type === 'error') {
              terminal = true;
              throw new SwitchyardError(frame.error.code, frame.error.message);
            }
            received++;
            yield frame.payload;
          }
        } finally {
          clearTimeout(timer);
          clearTimeout(idle);
          signal?.removeEventListener('abort', onAbort);
          callers.delete(inbox as AsyncChannel<ResponseFrame>);
          if (!sub.isClosed()) sub.unsubscribe();
          // the worker may still be producing: tell it to stop (it ignores unknown request ids)
          if (sent && !terminal && !nc.isClosed()) {
            try {
              nc.publish(cancelSubject(target), encodeJson({ v: 1, type: 'cancel', requestId }));
            } catch {
              // connection closing: the worker will find out by itself
            }
          }
        }
      },
    };
  }

  private connectionLost(): void {
    for (const ep of [...this.served]) ep.lost();
    this.served.clear();
    // the callers' inbox subscriptions close with the connection: their streams end incomplete
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.served].map((ep) => ep.stop({ drain: false })));
    this.closed = true;
    for (const c of [...this.callers]) c.fail(unavailable('request plane is closed'));
    if (this.ownsConnection && !this.nc.isClosed()) {
      await this.nc.drain().catch(() => this.nc.close());
    }
  }
}
