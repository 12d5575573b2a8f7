/**
 * In-memory EventPlane: `MemoryEventStore` plays JetStream (one retained, sequenced log; durable
 * consumers with their acks); each `MemoryEventPlane` is one process's client. Payloads cross as JSON
 * bytes. Unacked messages are redelivered to the durable's next subscription (not on an ack-wait timer
 * within a live subscription: that part of JetStream is left to the real implementation).
 */
import { alreadyExists, invalidArgument, unavailable } from '@switchyard/common';
import { subjectMatches } from './addressing.js';
import { decodeJson, encodeJson } from './protocols.js';
import { type EventMessage, type EventPlane, type SubscribeOptions, checkSubscribeOptions } from './event-plane.js';

interface Stored {
  readonly seq: number;
  readonly subject: string;
  readonly bytes: Uint8Array;
}

interface Durable {
  readonly filter: string;
  readonly acked: Set<number>;
  /** seq → deliveries so far */
  readonly deliveries: Map<number, number>;
  /** Next sequence to look at when a subscription starts: the lowest unacked from the start seq. */
  floor: number;
  active: boolean;
}

/** The shared store (JetStream stand-in). */
export class MemoryEventStore {
  private readonly log: Stored[] = [];
  private readonly durables = new Map<string, Durable>();
  private readonly wakers = new Set<() => void>();

  /** Highest stored sequence (0 = empty). */
  get lastSeq(): number {
    return this.log.length;
  }

  /** @internal */
  append(subject: string, bytes: Uint8Array): number {
    const seq = this.log.length + 1;
    this.log.push({ seq, subject, bytes });
    for (const w of [...this.wakers]) w();
    return seq;
  }

  /** @internal */
  at(seq: number): Stored | undefined {
    return this.log[seq - 1];
  }

  /** @internal find or create a durable; a second live subscription is refused. */
  claim(name: string, filter: string, startSeq: number): Durable {
    let d = this.durables.get(name);
    if (!d) {
      d = { filter, acked: new Set(), deliveries: new Map(), floor: startSeq, active: false };
      this.durables.set(name, d);
    } else if (d.filter !== filter) {
      throw invalidArgument(`durable '${name}' exists with subject filter '${d.filter}', not '${filter}'`);
    }
    if (d.active) throw alreadyExists(`durable '${name}' already has a subscription`);
    d.active = true;
    return d;
  }

  /** @internal resolve once something new is appended (or `cancel` is called). */
  waitForAppend(): { promise: Promise<void>; cancel: () => void } {
    let waker!: () => void;
    const promise = new Promise<void>((resolve) => {
      waker = (): void => {
        this.wakers.delete(waker);
        resolve();
      };
      this.wakers.add(waker);
    });
    return { promise, cancel: waker };
  }
}

/** One process's EventPlane client over a MemoryEventStore. */
export class MemoryEventPlane implements EventPlane {
  private closed = false;
  private readonly stops = new Set<() => void>();

  constructor(private readonly store: MemoryEventStore) {}

  async publish(subject: string, payload: unknown): Promise<number> {
    if (this.closed) throw unavailable('event plane is closed');
    if (subject.length === 0 || /[\s*>]/.test(subject)) throw invalidArgument(`invalid publish subject '${subject}'`);
    return this.store.append(subject, encodeJson(payload));
  }

  subscribe(options: SubscribeOptions): AsyncIterable<EventMessage> {
    const store = this.store;
    const stops = this.stops;
    const isClosed = (): boolean => this.closed;
    return {
      [Symbol.asyncIterator]: async function* () {
        const { subject, durable, signal } = options;
        const { startSeq, startAt } = checkSubscribeOptions(options);
        if (isClosed()) throw unavailable('event plane is closed');
        // 'new': start after everything stored now (only when the durable is created, like startSeq)
        const d = store.claim(durable, subject, startAt === 'new' ? store.lastSeq + 1 : startSeq);
        options.onReady?.();
        let wait: { promise: Promise<void>; cancel: () => void } | null = null;
        let stopped = false;
        const stop = (): void => {
          stopped = true;
          wait?.cancel();
        };
        stops.add(stop);
        signal?.addEventListener('abort', stop, { once: true });
        if (signal?.aborted) stopped = true;
        try {
          let cursor = d.floor;
          while (!stopped) {
            const m = store.at(cursor);
            if (!m) {
              wait = store.waitForAppend();
              await wait.promise;
              wait = null;
              continue;
            }
            cursor++;
            if (d.acked.has(m.seq) || !subjectMatches(d.filter, m.subject)) {
              if (d.floor === m.seq) {
                d.acked.delete(m.seq);
                d.floor++;
              }
              continue;
            }
            const redeliveries = d.deliveries.get(m.seq) ?? 0;
            d.deliveries.set(m.seq, redeliveries + 1);
            const seq = m.seq;
            yield {
              seq,
              subject: m.subject,
              payload: decodeJson(m.bytes),
              redeliveries,
              ack: () => {
                d.acked.add(seq);
                d.deliveries.delete(seq);
                // advance the floor over every contiguous acked or non-matching message
                for (let s = store.at(d.floor); s && (d.acked.has(s.seq) || !subjectMatches(d.filter, s.subject)); s = store.at(d.floor)) {
                  d.acked.delete(s.seq);
                  d.floor++;
                }
              },
            };
          }
        } finally {
          d.active = false;
          stops.delete(stop);
          signal?.removeEventListener('abort', stop);
        }
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const s of [...this.stops]) s();
  }
}
