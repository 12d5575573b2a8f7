/**
 * KV events of the worker's LLM engines → the event plane, as WireKvEvents batches.
 *
 * The engine calls the listener synchronously inside its step; the listener only queues, so the
 * engine never waits for the network. A model's queue is flushed on the next macrotask
 * (setImmediate), and while a publish is in flight further events accumulate into the next batch,
 * so batches grow under load instead of publishes piling up. Publishes of one model are sequential,
 * so batches are stored in event-id order.
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

interface ModelQueue {
  events: KvCacheEvent[];
  scheduled: boolean;
  publishing: Promise<void> | undefined;
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
  ) {}

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

  /** Resolves once every event queued so far has been published (or dropped after a failure). */
  async flush(): Promise<void> {
    for (;;) {
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
      q = { events: [], scheduled: false, publishing: undefined };
      this.queues.set(model, q);
    }
    q.events.push(event);
    this.schedule(model, q);
  }

  private schedule(model: string, q: ModelQueue): void {
    if (q.scheduled || q.publishing !== undefined) return;
    q.scheduled = true;
    setImmediate(() => {
      q.scheduled = false;
      this.publish(model, q);
    });
  }

  private publish(model: string, q: ModelQueue): void {
    if (q.events.length === 0) return;
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
