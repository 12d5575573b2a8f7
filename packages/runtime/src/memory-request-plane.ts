/**
 * In-memory RequestPlane: `MemoryRequestBroker` plays the NATS server (subjects, queue groups with
 * round-robin spreading, no-responders, cancel broadcast); each `MemoryRequestPlane` is one process's
 * client. Every envelope, frame and cancel crosses as encoded bytes and is decoded with the protocol
 * decoders, and delivery is asynchronous (a microtask), like a network hop.
 *
 * Worker death is `MemoryRequestPlane.crash()`: its endpoints vanish and the streams they were writing
 * end without a final marker, so callers see StreamIncompleteError.
 */
import { alreadyExists, cancelled, deadlineExceeded, unavailable } from '@switchyard/common';
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
import { RunningRequests, isTerminal, readFrame, writeResponse } from './response-writer.js';
import {
  type Payload,
  type ResponseFrame,
  decodeCancelMessage,
  decodeJson,
  decodeMessage,
  decodeRequestEnvelope,
  decodeResponseFrame,
  encodeJson,
  encodeMessage,
} from './protocols.js';
import {
  type EndpointHandler,
  type RequestOptions,
  type RequestPlane,
  type ServedEndpoint,
  NoRespondersError,
  StreamIncompleteError,
  requestIdSource,
} from './request-plane.js';

/** The caller's inbox as the broker sees it: frames in, or the connection drops. */
interface Inbox {
  deliver(bytes: Uint8Array): void;
  drop(): void;
}

interface Subscriber {
  readonly address: InstanceAddress;
  readonly owner: MemoryRequestPlane;
  onRequest(bytes: Uint8Array, reply: Inbox): void;
  onCancel(bytes: Uint8Array): void;
}

/** The shared broker (NATS stand-in). */
export class MemoryRequestBroker {
  private readonly direct = new Map<string, Subscriber>();
  private readonly groups = new Map<string, Subscriber[]>();
  private readonly cursors = new Map<string, number>();

  /** Subjects with at least one subscriber (for assertions). */
  subjects(): string[] {
    return [...this.direct.keys(), ...[...this.groups].filter(([, s]) => s.length > 0).map(([k]) => k)].sort();
  }

  /** @internal */
  subscribe(sub: Subscriber): void {
    const subject = instanceSubject(sub.address);
    if (this.direct.has(subject)) throw alreadyExists(`${formatAddress(sub.address)} is already served`);
    this.direct.set(subject, sub);
    const group = endpointSubject(sub.address);
    this.groups.set(group, [...(this.groups.get(group) ?? []), sub]);
  }

  /** @internal */
  unsubscribe(sub: Subscriber): void {
    this.direct.delete(instanceSubject(sub.address));
    const group = endpointSubject(sub.address);
    const rest = (this.groups.get(group) ?? []).filter((s) => s !== sub);
    if (rest.length > 0) this.groups.set(group, rest);
    else this.groups.delete(group);
  }

  /** @internal publish a request; false = no responders. Round-robin within a queue group. */
  request(subject: string, bytes: Uint8Array, reply: Inbox): boolean {
    let sub = this.direct.get(subject);
    if (!sub) {
      const group = this.groups.get(subject);
      if (!group || group.length === 0) return false;
      const i = (this.cursors.get(subject) ?? 0) % group.length;
      this.cursors.set(subject, i + 1);
      sub = group[i]!;
    }
    const target = sub;
    queueMicrotask(() => target.onRequest(bytes, reply));
    return true;
  }

  /** @internal plain (non-queue) publish to every instance of the endpoint. */
  cancel(subject: string, bytes: Uint8Array): void {
    for (const sub of this.direct.values()) {
      if (cancelSubject(sub.address) === subject) queueMicrotask(() => sub.onCancel(bytes));
    }
  }
}

class MemoryServedEndpoint implements ServedEndpoint, Subscriber {
  readonly subject: string;
  private readonly running = new RunningRequests();
  private stopped = false;

  constructor(
    readonly address: InstanceAddress,
    readonly owner: MemoryRequestPlane,
    private readonly broker: MemoryRequestBroker,
    private readonly handler: EndpointHandler,
  ) {
    this.subject = instanceSubject(address);
  }

  onRequest(bytes: Uint8Array, reply: Inbox): void {
    if (this.stopped) return reply.drop();
    const envelope = decodeRequestEnvelope(decodeMessage(bytes));
    const out = this.owner.openReply(reply);
    this.running.start(envelope.requestId, envelope.attempt, async (abort) => {
      try {
        await writeResponse({ handler: this.handler, envelope, abort, send: (frame) => out.deliver(encodeMessage(frame)), stopped: () => this.stopped });
      } finally {
        out.close();
      }
    });
  }

  onCancel(bytes: Uint8Array): void {
    const msg = decodeCancelMessage(decodeJson(bytes));
    this.running.abort(msg.requestId, cancelled(`request ${msg.requestId} cancelled by the caller`), msg.attempt);
  }

  async stop(options?: { drain?: boolean }): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      this.broker.unsubscribe(this);
      this.owner.forget(this);
    }
    if (options?.drain === false) this.running.abortAll(cancelled(`endpoint ${formatAddress(this.address)} stopped`));
    await this.running.settled();
  }

  /** Process death: no more frames of any kind. Handlers see their signal abort. */
  crash(): void {
    this.stopped = true;
    this.broker.unsubscribe(this);
    this.running.abortAll(unavailable('worker crashed'));
  }
}

/** One process's RequestPlane client over a MemoryRequestBroker. */
export class MemoryRequestPlane implements RequestPlane {
  private readonly served = new Set<MemoryServedEndpoint>();
  /** Reply paths of requests this process is serving: dropped on crash. */
  private readonly openInboxes = new Set<Inbox>();
  private readonly callerInboxes = new Set<AsyncChannel<ResponseFrame>>();
  private closed = false;
  /** Ids of the requests and attempts this plane sends. */
  private readonly nextId = requestIdSource();

  constructor(private readonly broker: MemoryRequestBroker) {}

  async serve(address: InstanceAddress, handler: EndpointHandler): Promise<ServedEndpoint> {
    if (this.closed) throw unavailable('request plane is closed');
    const ep = new MemoryServedEndpoint(address, this, this.broker, handler);
    this.broker.subscribe(ep);
    this.served.add(ep);
    return ep;
  }

  /** @internal the worker side of one reply stream; dropped (no final marker) if this process crashes. */
  openReply(reply: Inbox): { deliver(bytes: Uint8Array): void; close(): void } {
    this.openInboxes.add(reply);
    return {
      deliver: (bytes) => {
        if (!this.closed) reply.deliver(bytes);
      },
      close: () => {
        this.openInboxes.delete(reply);
      },
    };
  }

  /** @internal */
  forget(ep: MemoryServedEndpoint): void {
    this.served.delete(ep);
  }

  request(target: EndpointAddress | InstanceAddress, payload: Payload, options: RequestOptions = {}): AsyncIterable<Payload> {
    const broker = this.broker;
    const nextId = this.nextId;
    const callers = this.callerInboxes;
    const isClosed = (): boolean => this.closed;
    return {
      [Symbol.asyncIterator]: async function* () {
        if (isClosed()) throw unavailable('request plane is closed');
        const { signal, timeoutMs = 0 } = options;
        const requestId = options.requestId ?? nextId();
        const attempt = nextId();
        if (signal?.aborted) throw cancelled(`request ${requestId} cancelled before it was sent`);
        const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : null;
        const inbox = new AsyncChannel<ResponseFrame>();
        let dropped = false;
        const replyTo: Inbox = {
          deliver: (bytes) => inbox.push(decodeResponseFrame(decodeMessage(bytes))),
          drop: () => {
            dropped = true;
            inbox.end();
          },
        };
        const subject = isInstanceAddress(target) ? instanceSubject(target) : endpointSubject(target);
        if (!broker.request(subject, encodeMessage({ v: 1, requestId, attempt, payload, deadline, finalData: true }), replyTo)) {
          throw new NoRespondersError(target);
        }
        callers.add(inbox);
        const onAbort = (): void => inbox.fail(cancelled(`request ${requestId} cancelled`));
        signal?.addEventListener('abort', onAbort, { once: true });
        const timer = deadline === null ? undefined : setTimeout(() => inbox.fail(deadlineExceeded(`request ${requestId} timed out after ${timeoutMs} ms`)), timeoutMs);
        let terminal = false;
        let received = 0;
        try {
          for (let expected = 0; ; expected++) {
            const r = await inbox.next();
            if (r.done) throw new StreamIncompleteError(target, received, dropped ? unavailable('connection dropped') : undefined);
            const frame = r.value;
            // a terminal frame (final, error, data marked final) ends the request on the worker: nothing to cancel
            terminal = isTerminal(frame, expected);
            const data = readFrame(frame, expected, target, received);
            if (data === null) return;
            received++;
            yield data.payload;
            if (data.final) return;
          }
        } finally {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          callers.delete(inbox);
          // the worker may still be producing: tell it to stop (it ignores unknown request ids)
          if (!terminal && !dropped) {
            broker.cancel(cancelSubject(target), encodeJson({ v: 1, type: 'cancel', requestId, attempt }));
          }
        }
      },
    };
  }

  /**
   * Test hook: the process dies. Its endpoints stop answering, connections to callers drop (their
   * streams end without a final marker) and its own outstanding requests fail unavailable.
   */
  crash(): void {
    if (this.closed) return;
    this.closed = true;
    for (const ep of [...this.served]) ep.crash();
    this.served.clear();
    for (const inbox of [...this.openInboxes]) inbox.drop();
    this.openInboxes.clear();
    for (const c of [...this.callerInboxes]) c.fail(unavailable('request plane is closed'));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.served].map((ep) => ep.stop({ drain: false })));
    this.closed = true;
    for (const c of [...this.callerInboxes]) c.fail(unavailable('request plane is closed'));
  }
}
