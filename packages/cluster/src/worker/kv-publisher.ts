/**
 * KV events of the worker's LLM engines → the event plane, as WireKvEvents batches.
 *
 * The engine calls the listener synchronously inside its step; the listener only queues, so the
 * engine never waits for the network. A model's queue is flushed on the next macrotask
 * (setImmediate), but never sooner than `minIntervalMs` (KV_EVENTS_MIN_INTERVAL_MS) after the
 * model's previous publish began; while a publish is in flight further events accumulate into the
 * next batch, so batches grow under load instead of publishes piling up. Publishes of one model are
 * sequential, so batches are stored in event-id order.
 *
 * Why the interval: every batch costs the same fixed work however few events it holds (a JetStream
 * store and acknowledgement, and on EACH router replica a consume, a Redis script call and an ack),
 * while an engine that steps every millisecond or two completes a block in some sequence on almost
 * every step. Measured on a 2-core machine (mock_llm, 16 streams of 128 tokens, straight to the
 * worker): one batch per step was 5.5 batches per request; at 10 ms, 1.8, and the router, NATS and
 * Redis spent about a third less CPU on them. An engine stepping every 10 ms or more (a real model on
 * a GPU, mostly) is not slowed at all, and an idle model's first event still goes at once. Routers
 * see a block at most that much later: far less than a request's own prefill.
 *
 * A failed publish is logged with the lost id range and the batch is dropped: the next batch's first
 * id jumps, routers see the gap and resync from `kv_snapshot`. Retrying here could reorder or block.
 *
 * Event ids on the wire are one sequence per (worker, model) for the life of the worker process, even
 * when a reload replaces the model's engine (whose own ids start again at 0): the publisher adds an
 * offset per engine, and a new engine starts with a `cleared` event, so routers drop the old engine's
 * blocks instead of mistaking the new ids for redeliveries. `wireEventId` translates an engine's id
 * (e.g. a snapshot's `last_event_id`) into that sequence.
 */
import type { Logger } from '@switchyard/common';
import type { KvCacheEvent, LlmKvSource } from '@switchyard/llm';
import type { EventPlane, InstanceId } from '@switchyard/runtime';
import type { WireKvEvents } from '../protocols.js';

/** Default of KvEventPublisher's `minIntervalMs`: the least time between two publishes of one model. */
export const KV_EVENTS_MIN_INTERVAL_MS = 10;

interface ModelQueue {
  events: KvCacheEvent[];
  /** A publish is due (on setImmediate, or on `timer` when the interval has not elapsed). */
  scheduled: boolean;
  timer: ReturnType<typeof setTimeout> | undefined;
  publishing: Promise<void> | undefined;
  /** When the last publish began (performance.now(); -Infinity: never). */
  lastPublishAt: number;
}

/** The wire numbering of one model's events: engine id + offset; `next` is the next wire id. */
interface Numbering {
  source: LlmKvSource;
  offset: number;
  next: number;
}

export class KvEventPublisher {
  private readonly queues = new Map<string, ModelQueue>();
  private readonly numbering = new Map<string, Numbering>();
  private closed = false;

  constructor(
    private readonly eventPlane: EventPlane,
    private readonly subject: string,
    private readonly instanceId: InstanceId,
    private readonly logger: Logger,
    /** Least ms between two publishes of one model (>= 0; 0 = every macrotask). */
    private readonly minIntervalMs: number = KV_EVENTS_MIN_INTERVAL_MS,
  ) {
    if (!(minIntervalMs >= 0 && minIntervalMs <= 60_000)) throw new RangeError(`KV events interval must be 0..60000 ms, got ${minIntervalMs}`);
  }

  /** Publish `model`'s events from now on. Returns detach (events already queued are still published). */
  attach(model: string, kv: LlmKvSource): () => void {
    let n = this.numbering.get(model);
    if (n === undefined) {
      n = { source: kv, offset: 0, next: 0 };
      this.numbering.set(model, n);
    } else if (n.source !== kv) {
      // A new engine for the model (reload): its cache starts empty and its ids start at 0 again.
      n.source = kv;
      this.push(model, { event_id: n.next, data: { type: 'cleared' } });
      n.next++;
      n.offset = n.next;
    }
    const numbering = n;
    return kv.onEvent((event) => {
      if (numbering.source !== kv) return; // a replaced engine's late events
      const wireId = event.event_id + numbering.offset;
      numbering.next = wireId + 1;
      this.push(model, wireId === event.event_id ? event : { ...event, event_id: wireId });
    });
  }

  /** An engine event id of `model`'s current engine (-1: none yet) in the wire numbering. */
  wireEventId(model: string, engineEventId: number): number {
    const n = this.numbering.get(model);
    return n === undefined ? engineEventId : engineEventId + n.offset;
  }

  /** Resolves once every event queued so far has been published (or dropped after a failure); does not wait out the interval. */
  async flush(): Promise<void> {
    for (;;) {
      for (const [model, q] of this.queues) if (q.timer !== undefined) this.run(model, q);
      const pending = [...this.queues.values()].filter((q) => q.scheduled || q.publishing !== undefined || q.events.length > 0);
      if (pending.length === 0) return;
      await Promise.all(pending.map((q) => q.publishing ?? new Promise<void>((r) => setImmediate(r))));
    }
  }

  /** Publish what is queued, then drop further events. */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }

  private push(model: string, event: KvCacheEvent): void {
    if (this.closed) return;
    let q = this.queues.get(model);
    if (q === undefined) {
      q = { events: [], scheduled: false, timer: undefined, publishing: undefined, lastPublishAt: -Infinity };
      this.queues.set(model, q);
    }
    q.events.push(event);
    this.schedule(model, q);
  }

  private schedule(model: string, q: ModelQueue): void {
    if (q.scheduled || q.publishing !== undefined) return;
    q.scheduled = true;
    const wait = q.lastPublishAt + this.minIntervalMs - performance.now();
    if (wait > 0) q.timer = setTimeout(() => this.run(model, q), wait);
    else setImmediate(() => this.run(model, q));
  }

  private run(model: string, q: ModelQueue): void {
    if (!q.scheduled) return; // already run by flush()
    if (q.timer !== undefined) clearTimeout(q.timer);
    q.timer = undefined;
    q.scheduled = false;
    this.publish(model, q);
  }

  private publish(model: string, q: ModelQueue): void {
    if (q.events.length === 0) return;
    q.lastPublishAt = performance.now();
    const events = q.events;
    q.events = [];
    const batch: WireKvEvents = { v: 1, instanceId: this.instanceId, model, events };
    q.publishing = this.eventPlane
      .publish(this.subject, batch)
      .then(
        () => undefined,
        (e: unknown) => {
          this.logger.error(
            { err: e, model, firstEventId: events[0]!.event_id, lastEventId: events[events.length - 1]!.event_id },
            'failed to publish KV events: routers will see the gap and resync',
          );
        },
      )
      .finally(() => {
        q.publishing = undefined;
        if (q.events.length > 0) this.schedule(model, q);
      });
  }
}
