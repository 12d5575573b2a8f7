/**
 * EventPlane on NATS JetStream. Same semantics as MemoryEventPlane, plus ack-wait redelivery.
 *
 * Streams: a subject of the layout (`switchyard.<ns>.<kind>.<component>` for the kinds `kv_events`,
 * `load`, `forward_pass`, `request_figures` and `planner_decisions`, or a filter with wildcards in the component token) maps
 * to that kind's stream from addressing (`kvEventsStream(ns)`, `loadStream(ns)`, ...; the two figure
 * streams and the planner decisions keep at most FIGURES_STREAM_MAX_AGE_MS, 10 min); any other subject needs the `resolveStream` option (else invalid_argument). The
 * stream is created on first use (file storage, limits retention, messages older than `maxAgeMs`
 * dropped — default 1 h, 0 = kept until deleted) and reused when it exists; an existing stream whose
 * `max_age` differs is updated in place (`streams.update`, the rest of its config kept), so a stream
 * created by an older version (no age limit) gets the limit on the next start.
 *
 * Subscriptions: one durable pull consumer per `durable` name (explicit ack, the subscription's
 * subject as filter, `startSeq` → deliver policy by start sequence when the durable is new, or
 * `startAt: 'new'` → start sequence = the stream's last sequence + 1, see ensureConsumer), pulled
 * in batches of `batchSize` with `consume()`. Within a live subscription, a message not acked within `ackWaitMs` is redelivered by the server.
 *
 * Orphans: every durable is created with `inactive_threshold` = `durableInactiveMs` (default 1 h; 0 =
 * never): the server deletes a durable nobody has pulled from for that long (nats-server >= 2.9 does
 * this for durables too). A live subscription keeps its durable: its pull requests are renewed well
 * within the threshold. So a router's per-process durable disappears an hour after the router stops.
 *
 * Resume: when a subscription starts on an existing durable, the durable is re-created (delete + add,
 * same name and filter) starting right after its ack floor. So the first unacked message comes first,
 * in sequence order, immediately, instead of after ack-wait and behind newer messages. (Naking on stop
 * does not work: a pull request of the ended subscription stays pending on the server until it expires
 * and swallows the redeliveries; nats-server 2.9 has no consumer reset API.) Consequences: messages
 * acked above the first gap are delivered again (at-least-once), and `redeliveries` of a message the
 * previous incarnation had delivered is a lower bound (JetStream delivery count - 1, plus 1). A crash
 * between the delete and the add loses the position (the durable restarts from `startSeq`).
 *
 * Outages: a publish made while disconnected waits for the reconnect (nats.js would drop it and time
 * out after 5 s); a publish the server answers with "no responders" (a server that lost its store)
 * re-creates the stream and is sent again once. Every reconnect ends a live subscription's consume()
 * and resumes the durable as above, retrying every 50 ms–1 s until it works (nats.js's own recovery
 * checks the consumer once and, if JetStream is not back yet, waits up to 30 s). A subscription whose
 * durable or stream is gone after the reconnect (or is deleted under it) re-creates it where it stood,
 * or from the start of a stream that was re-created. Messages delivered before a resume are not acked after it (the ack
 * could land on another message of the new durable): they come again.
 *
 * "One live subscription per durable" is enforced within one JetStreamEventPlane only; JetStream itself
 * lets two processes pull from the same durable (they then share its messages).
 */
import { type NatsConnection, nanos } from '@nats-io/nats-core';
import {
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type ConsumerInfo,
  type StreamInfo,
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  StorageType,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream';
import { type Logger, SwitchyardError, alreadyExists, invalidArgument, silentLogger, unavailable } from '@switchyard/common';
import { NAME_PATTERN, SUBJECT_ROOT, forwardPassStream, kvEventsStream, loadStream, namespace, plannerDecisionsStream, requestFiguresStream } from './addressing.js';
import { type EventMessage, type EventPlane, type SubscribeOptions, checkSubscribeOptions } from './event-plane.js';
import { decodeJson, encodeJson } from './protocols.js';
import { connectNats, watchNatsConnection } from './nats-connection.js';

export const DEFAULT_ACK_WAIT_MS = 30_000;
export const DEFAULT_EVENT_BATCH_SIZE = 64;
/** Retention of the event streams (`max_age`). */
export const DEFAULT_EVENT_MAX_AGE_MS = 3_600_000;
/** A durable nobody pulls from for this long is deleted by the server (`inactive_threshold`). */
export const DEFAULT_DURABLE_INACTIVE_MS = 3_600_000;
/** First retry delay of a subscription resuming after a reconnect; doubles up to RESUME_RETRY_MAX_MS. */
const RESUME_RETRY_MS = 50;
const RESUME_RETRY_MAX_MS = 1_000;
/** A publish made while disconnected waits this long at most for the reconnect. */
const PUBLISH_RECONNECT_WAIT_MS = 10_000;

export interface StreamSpec {
  readonly name: string;
  readonly subjects: string;
  /** This stream's retention when shorter than the plane's `maxAgeMs` (figures only planners read live). */
  readonly maxAgeMs?: number;
}

/**
 * Retention of the planners' figure streams (forward passes, request figures): planners read them live
 * (from new messages), so an hour of per-second batches from every worker would only fill the disk.
 */
export const FIGURES_STREAM_MAX_AGE_MS = 600_000;

export interface JetStreamEventPlaneOptions {
  readonly logger?: Logger;
  /** Unacked messages are redelivered after this long (set when a durable is created). */
  readonly ackWaitMs?: number;
  /** Messages pulled per request. */
  readonly batchSize?: number;
  /**
   * Stream retention: messages older than this are dropped (`max_age`; 0 = no age limit). Default 1 h.
   * Applied when the stream is created, and to an existing stream with another `max_age` (updated).
   */
  readonly maxAgeMs?: number;
  /**
   * Durables nobody pulls from for this long are deleted by the server (`inactive_threshold`, set when
   * the durable is created or resumed; 0 = never). Default 1 h.
   */
  readonly durableInactiveMs?: number;
  /** Stream for subjects outside the layout; return null to refuse. */
  readonly resolveStream?: (subject: string) => StreamSpec | null;
}

export interface JetStreamEventPlaneConnectOptions extends JetStreamEventPlaneOptions {
  readonly url: string;
  readonly name?: string;
}

/** The layout's stream for a subject or filter; null outside the layout. */
export function layoutStreamFor(subject: string): StreamSpec | null {
  const t = subject.split('.');
  if (t.length !== 4 || t[0] !== SUBJECT_ROOT || !NAME_PATTERN.test(t[1]!)) return null;
  if (t[3] !== '*' && !NAME_PATTERN.test(t[3]!) && t[3] !== '>') return null;
  const ns = namespace(t[1]!);
  if (t[2] === 'kv_events') return kvEventsStream(ns);
  if (t[2] === 'load') return loadStream(ns);
  if (t[2] === 'forward_pass') return { ...forwardPassStream(ns), maxAgeMs: FIGURES_STREAM_MAX_AGE_MS };
  if (t[2] === 'request_figures') return { ...requestFiguresStream(ns), maxAgeMs: FIGURES_STREAM_MAX_AGE_MS };
  if (t[2] === 'planner_decisions') return { ...plannerDecisionsStream(ns), maxAgeMs: FIGURES_STREAM_MAX_AGE_MS };
  return null;
}

function isApiError(e: unknown, code: number): boolean {
  return e instanceof JetStreamApiError && e.code === code;
}

export class JetStreamEventPlane implements EventPlane {
  private readonly js: JetStreamClient;
  private readonly log: Logger;
  private readonly ackWaitMs: number;
  private readonly batchSize: number;
  private readonly maxAgeMs: number;
  private readonly durableInactiveMs: number;
  private readonly resolveStream: ((subject: string) => StreamSpec | null) | undefined;
  private readonly ownsConnection: boolean;
  private readonly streams = new Map<string, Promise<void>>();
  private readonly active = new Set<string>();
  private readonly stops = new Set<() => void>();
  private jsmPromise: Promise<JetStreamManager> | null = null;
  private closed = false;
  private connected = true;
  private readonly unwatch: () => void;
  /** Called on every reconnect: live subscriptions resume, held publishes go out. */
  private readonly onReconnect = new Set<() => void>();

  constructor(
    readonly nc: NatsConnection,
    options: JetStreamEventPlaneOptions & { ownsConnection?: boolean } = {},
  ) {
    this.js = jetstream(nc);
    this.log = options.logger ?? silentLogger;
    this.ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
    this.batchSize = options.batchSize ?? DEFAULT_EVENT_BATCH_SIZE;
    this.maxAgeMs = options.maxAgeMs ?? DEFAULT_EVENT_MAX_AGE_MS;
    this.durableInactiveMs = options.durableInactiveMs ?? DEFAULT_DURABLE_INACTIVE_MS;
    for (const [k, v] of [['maxAgeMs', this.maxAgeMs], ['durableInactiveMs', this.durableInactiveMs]] as const) {
      if (!Number.isSafeInteger(v) || v < 0) throw invalidArgument(`${k} must be an integer >= 0`);
    }
    this.resolveStream = options.resolveStream;
    this.ownsConnection = options.ownsConnection ?? false;
    // (logged by whoever owns the connection)
    this.unwatch = watchNatsConnection(nc, this.ownsConnection ? this.log : silentLogger, {
      onDisconnect: () => {
        this.connected = false;
      },
      onReconnect: () => {
        this.connected = true;
        for (const f of [...this.onReconnect]) f();
      },
    });
  }

  static async connect(options: JetStreamEventPlaneConnectOptions): Promise<JetStreamEventPlane> {
    const nc = await connectNats({ url: options.url, name: options.name ?? 'switchyard-event-plane' });
    return new JetStreamEventPlane(nc, { ...options, ownsConnection: true });
  }

  static fromConnection(nc: NatsConnection, options: JetStreamEventPlaneOptions = {}): JetStreamEventPlane {
    return new JetStreamEventPlane(nc, options);
  }

  private jsm(): Promise<JetStreamManager> {
    this.jsmPromise ??= jetstreamManager(this.nc);
    return this.jsmPromise;
  }

  /** The stream that holds `subject` (created if missing). */
  async ensureStream(subject: string): Promise<StreamSpec> {
    const spec = layoutStreamFor(subject) ?? this.resolveStream?.(subject) ?? null;
    if (!spec) throw invalidArgument(`subject '${subject}' belongs to no event stream`);
    let p = this.streams.get(spec.name);
    if (!p) {
      p = this.createStream(spec);
      this.streams.set(spec.name, p);
      p.catch(() => this.streams.delete(spec.name));
    }
    await p;
    return spec;
  }

  private async createStream(spec: StreamSpec): Promise<void> {
    try {
      const jsm = await this.jsm();
      // the plane's retention, or the stream's own when shorter (0 = no age limit)
      const maxAgeMs = spec.maxAgeMs === undefined ? this.maxAgeMs : this.maxAgeMs === 0 ? spec.maxAgeMs : Math.min(this.maxAgeMs, spec.maxAgeMs);
      const maxAge = nanos(maxAgeMs);
      let info: StreamInfo | null = null;
      try {
        info = await jsm.streams.info(spec.name);
      } catch (e) {
        if (!isApiError(e, JetStreamApiCodes.StreamNotFound)) throw e;
      }
      if (!info) {
        try {
          await jsm.streams.add({ name: spec.name, subjects: [spec.subjects], storage: StorageType.File, max_age: maxAge });
          this.log.info({ stream: spec.name, subjects: spec.subjects, maxAgeMs }, 'event stream created');
          return;
        } catch (e) {
          // created meanwhile by another process?
          info = await jsm.streams.info(spec.name).catch(() => {
            throw e;
          });
        }
      }
      if (info.config.max_age !== maxAge) {
        // e.g. created by a version without an age limit: update in place (the rest of the config kept)
        // (the duplicate window may not exceed max_age; on create the server shortens it itself)
        const dupWindow = maxAge > 0 && (info.config.duplicate_window ?? 0) > maxAge ? { duplicate_window: maxAge } : {};
        await jsm.streams.update(spec.name, { max_age: maxAge, ...dupWindow });
        this.log.info({ stream: spec.name, maxAgeMs, previousMaxAgeMs: Math.round(info.config.max_age / 1e6) }, 'event stream retention updated');
      }
    } catch (e) {
      throw unavailable(`cannot set up stream '${spec.name}': ${(e as Error).message}`, e);
    }
  }

  async publish(subject: string, payload: unknown): Promise<number> {
    if (this.closed) throw unavailable('event plane is closed');
    // nats.js drops what is published while disconnected: a publish would wait out its 5 s timeout
    if (!this.connected) await this.reconnected(PUBLISH_RECONNECT_WAIT_MS);
    const spec = await this.ensureStream(subject);
    const data = encodeJson(payload);
    try {
      return (await this.js.publish(subject, data)).seq;
    } catch (e) {
      // the stream may be gone (a server that lost its store answers "no responders"): look again next time
      this.streams.delete(spec.name);
      if ((e as Error).name === 'JetStreamNotEnabled' && !this.closed) {
        try {
          await this.ensureStream(subject);
          return (await this.js.publish(subject, data)).seq;
        } catch (again) {
          throw unavailable(`event on '${subject}' not stored: ${(again as Error).message}`, again);
        }
      }
      throw unavailable(`event on '${subject}' not stored: ${(e as Error).message}`, e);
    }
  }

  /** Resolves on the next reconnect, on close, or after `ms`. */
  private reconnected(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.onReconnect.delete(done);
        this.stops.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.onReconnect.add(done);
      this.stops.add(done);
    });
  }

  subscribe(options: SubscribeOptions): AsyncIterable<EventMessage> {
    const plane = this;
    return {
      [Symbol.asyncIterator]: async function* () {
        const { subject, durable, signal } = options;
        const { startSeq, startAt } = checkSubscribeOptions(options);
        if (plane.closed) throw unavailable('event plane is closed');
        if (signal?.aborted) return;
        const stream = await plane.ensureStream(subject);
        const key = `${stream.name}/${durable}`;
        if (plane.active.has(key)) throw alreadyExists(`durable '${durable}' already has a subscription`);
        plane.active.add(key);
        let msgs: ConsumerMessages | null = null;
        let stopped = false;
        let wake: (() => void) | null = null;
        const stop = (): void => {
          stopped = true;
          void msgs?.close();
          wake?.();
        };
        plane.stops.add(stop);
        signal?.addEventListener('abort', stop, { once: true });
        // After a reconnect, nats.js's consume() checks the consumer once and, if that check fails (the
        // server still recovering its JetStream state, or the store lost), waits up to 30 s before the
        // next try. Instead every reconnect ends the current consume() and the loop below resumes the
        // durable itself, retrying quickly.
        const resume = (): void => void (msgs as ConsumerMessages | null)?.close();
        plane.onReconnect.add(resume);
        // Where this subscription stands, for a resume that finds its durable gone: the lowest
        // sequence not yet acked (those delivered and unacked, else the next one to come).
        const unacked = new Set<number>();
        let nextSeq = 1;
        const floor = (): number => (unacked.size > 0 ? Math.min(...unacked) : nextSeq);
        let streamCreated: string | null = null;
        let incarnation = 0;
        const ended = (): boolean => stopped || plane.closed || plane.nc.isClosed();
        /** Sleep before the next resume (backoff by consecutive failures); a stop wakes it. */
        const pause = (failures: number): Promise<void> =>
          new Promise<void>((resolve) => {
            const t = setTimeout(done, Math.min(RESUME_RETRY_MAX_MS, RESUME_RETRY_MS * 2 ** Math.min(failures, 8)));
            function done(): void {
              clearTimeout(t);
              wake = null;
              resolve();
            }
            wake = done;
          });
        try {
          for (let failures = 0; !ended(); ) {
            let deliveredBefore: number;
            try {
              if (incarnation > 0) plane.streams.delete(stream.name); // the server may have lost it
              await plane.ensureStream(subject);
              const created = (await (await plane.jsm()).streams.info(stream.name)).created;
              if (streamCreated !== null && created !== streamCreated) {
                // a new stream under the same name (the server lost its store): from its start
                unacked.clear();
                nextSeq = 1;
              }
              streamCreated = created;
              const from = incarnation === 0 ? { startSeq, startAt } : { startSeq: floor(), startAt: 'first' as const };
              const started = await plane.ensureConsumer(stream.name, durable, subject, from.startSeq, from.startAt);
              deliveredBefore = started.deliveredBefore;
              nextSeq = started.from; // (redelivered from here: nothing below is unacked)
              unacked.clear();
              const consumer = await plane.js.consumers.get(stream.name, durable);
              const current = await consumer.consume({ max_messages: plane.batchSize });
              msgs = current;
              // nats.js keeps a consume() whose durable or stream was deleted waiting (30 s between
              // checks): resume instead, which re-creates what is missing
              void (async () => {
                for await (const n of current.status()) {
                  if (n.type === 'consumer_deleted' || n.type === 'consumer_not_found' || n.type === 'stream_not_found') {
                    void current.close();
                    return;
                  }
                }
              })().catch(() => undefined);
            } catch (e) {
              const err = e instanceof SwitchyardError ? e : unavailable(`cannot consume durable '${durable}': ${(e as Error).message}`, e);
              if (incarnation === 0) throw err;
              if (ended()) break;
              if (failures++ === 0) plane.log.warn({ durable, stream: stream.name, err: err.message }, 'event subscription lost; resuming');
              await pause(failures);
              continue;
            }
            if (incarnation === 0) options.onReady?.(); // the durable exists: whatever is published from now on is delivered to it
            else plane.log.info({ durable, stream: stream.name, failures }, 'event subscription resumed');
            const current = ++incarnation;
            const startedAt = Date.now();
            let received = false;
            if (stopped) void msgs.close();
            try {
              for await (const m of msgs) {
                if (stopped) break;
                received = true;
                const seq = m.seq;
                nextSeq = Math.max(nextSeq, seq + 1);
                let payload: unknown;
                try {
                  payload = decodeJson(m.data);
                } catch (e) {
                  plane.log.warn({ seq, subject: m.subject, err: (e as Error).message }, 'undecodable event dropped');
                  m.term();
                  continue;
                }
                let acked = false;
                unacked.add(seq);
                yield {
                  seq,
                  subject: m.subject,
                  payload,
                  redeliveries: m.info.deliveryCount - 1 + (seq <= deliveredBefore ? 1 : 0),
                  ack: () => {
                    if (acked) return;
                    acked = true;
                    // a message of an earlier incarnation of the durable comes again: its ack could
                    // land on another message of the re-created durable
                    if (current !== incarnation) return;
                    unacked.delete(seq);
                    try {
                      m.ack();
                    } catch {
                      // connection closed: redelivered later
                    }
                  },
                };
              }
            } catch (e) {
              if (!ended()) plane.log.warn({ durable, stream: stream.name, err: (e as Error).message }, 'event subscription interrupted; resuming');
            }
            if (ended()) break;
            // an incarnation that worked resets the backoff; one that ended at once (a pull the server
            // refuses, another process deleting the durable) waits before the next resume
            if (received || Date.now() - startedAt >= RESUME_RETRY_MAX_MS) failures = 0;
            else await pause(++failures);
          }
        } finally {
          stopped = true;
          plane.onReconnect.delete(resume);
          plane.stops.delete(stop);
          signal?.removeEventListener('abort', stop);
          // acks are fire-and-forget publishes: make sure the server has them before this durable can
          // be subscribed again (a new subscription resumes after the ack floor it reads)
          if (!plane.nc.isClosed()) await plane.nc.flush().catch(() => undefined);
          if (msgs) await msgs.close().catch(() => undefined);
          plane.active.delete(key);
        }
      },
    };
  }

  /**
   * Create the durable, or re-create it at its first unacked message (see the file comment). Returns
   * the stream sequence it starts from and the highest one the previous incarnation had delivered (0
   * for a new durable).
   */
  private async ensureConsumer(
    stream: string,
    durable: string,
    subject: string,
    startSeq: number,
    startAt: 'first' | 'new',
  ): Promise<{ readonly from: number; readonly deliveredBefore: number }> {
    const jsm = await this.jsm();
    let existing: ConsumerInfo | null = null;
    try {
      existing = await jsm.consumers.info(stream, durable);
    } catch (e) {
      if (!isApiError(e, JetStreamApiCodes.ConsumerNotFound)) {
        throw unavailable(`cannot look up durable '${durable}': ${(e as Error).message}`, e);
      }
    }
    let from = startSeq;
    let deliverNew = startAt === 'new';
    let deliveredBefore = 0;
    if (existing) {
      if (existing.config.filter_subject !== subject) {
        throw invalidArgument(`durable '${durable}' exists with subject filter '${existing.config.filter_subject ?? ''}', not '${subject}'`);
      }
      // resume right after the ack floor: the first unacked message comes first, in order, now
      // (not after ack-wait) and no stale pull request of a previous subscription can take it
      from = Math.max(existing.ack_floor.stream_seq + 1, existing.config.opt_start_seq ?? 1);
      deliverNew = false;
      deliveredBefore = existing.delivered.stream_seq;
      try {
        await jsm.consumers.delete(stream, durable);
      } catch (e) {
        if (!isApiError(e, JetStreamApiCodes.ConsumerNotFound)) {
          throw unavailable(`cannot reset durable '${durable}': ${(e as Error).message}`, e);
        }
      }
    }
    if (deliverNew) {
      // 'new' = start right after the stream's last message. Not DeliverPolicy.New: a New durable that
      // has not acked anything reports ack_floor 0 (nats-server 2.9.10) and records no start sequence,
      // so the resume above would replay the whole stream. A message published between this lookup and
      // the add is delivered too (more, never less, than "published after creation").
      try {
        from = (await jsm.streams.info(stream)).state.last_seq + 1;
      } catch (e) {
        throw unavailable(`cannot look up stream '${stream}': ${(e as Error).message}`, e);
      }
    }
    try {
      await jsm.consumers.add(stream, {
        durable_name: durable,
        ack_policy: AckPolicy.Explicit,
        filter_subject: subject,
        ack_wait: nanos(this.ackWaitMs),
        ...(this.durableInactiveMs > 0 ? { inactive_threshold: nanos(this.durableInactiveMs) } : {}),
        ...(from > 1 ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from } : { deliver_policy: DeliverPolicy.All }),
      });
    } catch (e) {
      throw unavailable(`cannot create durable '${durable}': ${(e as Error).message}`, e);
    }
    return { from: Math.max(1, from), deliveredBefore };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.unwatch();
    for (const s of [...this.stops]) s();
    if (this.ownsConnection && !this.nc.isClosed()) {
      await this.nc.drain().catch(() => this.nc.close());
    }
  }
}
