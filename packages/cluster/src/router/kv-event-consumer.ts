/**
 * KvEventConsumer: the IO that feeds the router's pure KV state.
 *
 * - **KV events**: a durable consumer per router replica on `kvEventsSubject(ns, backend)` →
 *   `decodeWireKvEvents` → `indexer.apply('<instanceId>/<model>', events)` → ack. The indexer (the
 *   kv-router package's KvIndexer) detects gaps in a worker's event ids and resyncs that worker from
 *   its snapshot, which this consumer fetches over the request plane (`kv_snapshot`, chunks assembled).
 *   Batches of workers the registry does not list (gone, or not registered yet) are acked and dropped:
 *   a worker is resynced from its snapshot when it (re)appears, so nothing is lost, and a replay of old
 *   events cannot resurrect a dead worker's blocks.
 * - **Load**: a durable consumer on `loadSubject(ns, backend)` keeps the latest WireLoad per worker
 *   (metrics and per-worker prefix hit rate).
 * - **Discovery**: a worker first seen → resync (its full snapshot); a worker gone → forget (its
 *   blocks, event id and load leave the table). Models whose card says `kvEvents: false` are routed in
 *   approximate mode: they are never resynced (they publish no events) but are still forgotten.
 *
 * Start: both durables are per router process (a fresh routerId each start) and created with
 * `startAt: 'new'`: the retained backlog is not replayed, since every worker is resynced from its
 * snapshot when discovery first shows it. No event is lost in between: resyncs wait until the KV
 * durable exists (`onReady`), so a snapshot is always taken after the subscription's start point and
 * every later event reaches the indexer (events already in the snapshot are skipped by event id).
 * (Without that wait, an event published between the durable's creation and a snapshot taken before it
 * would be missed; the indexer's event-id gap check would catch it at the worker's next event and
 * resync again — a delay, not a loss — but the wait avoids even that.) If the subscription fails to
 * start, resyncs proceed anyway, and the subscription is started again every SUBSCRIBE_RETRY_MS
 * (logged once, counted in `subscriptionFailures`) until it runs. Durables of routers
 * that stopped are removed by the server after the event plane's inactivity threshold (JetStream).
 *
 * Ordering: every indexer call of one worker (apply, resync, forget) runs on one promise chain, so a
 * forget never overtakes an apply of the same worker; different workers' chains run concurrently (at
 * most MAX_BATCHES_IN_FLIGHT batches), so one worker's slow resync delays only its own events.
 * Messages are acked after their batch is applied: a router that dies mid-batch gets it again (the
 * table skips event ids it already holds). Batches of a worker that arrive while an earlier one of
 * that worker is still being applied wait as one merged batch (at most MAX_MERGED_EVENTS events), so
 * they cost one indexer call; the indexer in turn gathers the calls of one event-loop turn, over all
 * workers, into one table call (kv-router's KvIndexer).
 */
import { type Logger, pauseUnlessAborted, unavailable } from '@switchyard/common';
import type { WorkerId } from '@switchyard/kv-router';
import type { KvCacheEvent, KvSnapshot, SnapshotBlock } from '@switchyard/llm';
import {
  type EventPlane,
  type Namespace,
  type RequestPlane,
  componentName,
  endpointAddress,
  instanceAddress,
  kvEventsSubject,
  loadSubject,
} from '@switchyard/runtime';
import { KV_SNAPSHOT_ENDPOINT, WORKER_COMPONENT, type WireLoad, type WireSnapshotRequest } from '../protocols.js';
import { decodeWireKvEvents, decodeWireLoad, decodeWireSnapshotChunk, toJson } from '../wire-codec.js';
import type { ModelRegistry, RegistryChange } from './model-registry.js';
import { workerId } from './routed-llm-endpoint.js';
import type { RouterStatsRecorder } from './router-stats.js';

/** Wait before starting a failed subscription again. */
export const SUBSCRIBE_RETRY_MS = 1_000;

/** KV event batches being applied at once (over all workers) before the consumer stops reading. */
const MAX_BATCHES_IN_FLIGHT = 256;
/** Events of one worker merged into one indexer call at most (batches waiting behind an earlier call). */
const MAX_MERGED_EVENTS = 4096;

/** Batches of one worker not handed to the indexer yet, and their messages (acked once applied). */
interface WaitingBatch {
  readonly events: KvCacheEvent[];
  readonly msgs: { ack(): void }[];
}

/** What the consumer needs of the kv-router's KvIndexer. */
export interface KvIndexerPort {
  /** Apply one worker's batch (resyncing on a gap). Resolves with the number of events applied. */
  apply(worker: WorkerId, events: readonly KvCacheEvent[]): Promise<unknown>;
  resync(worker: WorkerId): Promise<unknown>;
  forget(worker: WorkerId): Promise<unknown>;
}

export interface KvEventConsumerOptions {
  readonly eventPlane: EventPlane;
  readonly requestPlane: RequestPlane;
  readonly registry: ModelRegistry;
  readonly indexer: KvIndexerPort;
  readonly namespace: Namespace;
  /** Names the durables: `router_kv_<routerId>`, `router_load_<routerId>` (cut to 63 characters). */
  readonly routerId: string;
  readonly stats: RouterStatsRecorder;
  readonly logger: Logger;
  /** Whole-snapshot deadline; default 30 s. */
  readonly snapshotTimeoutMs?: number;
}

export const DEFAULT_SNAPSHOT_TIMEOUT_MS = 30_000;

/** Split `<instanceId>/<model>` (model names may contain `/`; instance ids never do). */
export function splitWorkerId(worker: WorkerId): { readonly instanceId: string; readonly model: string } {
  const i = worker.indexOf('/');
  return { instanceId: worker.slice(0, i), model: worker.slice(i + 1) };
}

export class KvEventConsumer {
  private readonly abort = new AbortController();
  private readonly loads = new Map<WorkerId, WireLoad>();
  private readonly chains = new Map<WorkerId, Promise<void>>();
  private readonly loops: Promise<void>[];
  private readonly unsubscribe: () => void;
  /** Resolves once the KV durable exists (or its subscription ended/failed): resyncs wait for it. */
  private markKvReady!: () => void;
  private readonly kvReady = new Promise<void>((resolve) => (this.markKvReady = resolve));

  constructor(private readonly options: KvEventConsumerOptions) {
    this.unsubscribe = options.registry.onChange((c) => this.onRegistryChange(c));
    this.loops = [this.keepSubscribed('KV event', () => this.consumeKvEvents()), this.keepSubscribed('load', () => this.consumeLoads())];
  }

  /** The latest load sample of a worker. */
  loadOf(worker: WorkerId): WireLoad | undefined {
    return this.loads.get(worker);
  }

  /** Latest load sample of every live worker. */
  allLoads(): ReadonlyMap<WorkerId, WireLoad> {
    return this.loads;
  }

  /** The worker's snapshot, assembled from its `kv_snapshot` chunks (KvIndexer's fetchSnapshot). */
  async fetchSnapshot(worker: WorkerId): Promise<KvSnapshot> {
    const { instanceId, model } = splitWorkerId(worker);
    const card = this.options.registry.model(model)?.instances.get(instanceId as never);
    const component = card?.component ?? componentName(WORKER_COMPONENT);
    const target = instanceAddress(endpointAddress(this.options.namespace, component, KV_SNAPSHOT_ENDPOINT), instanceId);
    const request: WireSnapshotRequest = { v: 1, model };
    const blocks: SnapshotBlock[] = [];
    const stream = this.options.requestPlane.request(target, toJson(request), {
      signal: this.abort.signal,
      timeoutMs: this.options.snapshotTimeoutMs ?? DEFAULT_SNAPSHOT_TIMEOUT_MS,
    });
    for await (const payload of stream) {
      const chunk = decodeWireSnapshotChunk(payload);
      for (const b of chunk.blocks) blocks.push(b);
      if (chunk.done) return { last_event_id: chunk.last_event_id, blocks, partial_blocks: chunk.partial_blocks };
    }
    throw unavailable(`KV snapshot of ${worker} ended without its last chunk`);
  }

  /** Stop both subscriptions and wait for queued indexer work. Idempotent. */
  async close(): Promise<void> {
    this.unsubscribe();
    this.abort.abort();
    await Promise.all(this.loops);
    await Promise.all([...this.chains.values()]);
  }

  private durable(kind: string): string {
    return `router_${kind}_${this.options.routerId.toLowerCase().replace(/[^a-z0-9_-]/g, '_')}`.slice(0, 63);
  }

  /** Is the worker serving, and does its model publish events (not approximate)? */
  private eventfulWorker(instanceId: string, model: string): boolean {
    const e = this.options.registry.model(model);
    return e !== undefined && e.kind === 'llm' && e.llm?.kvEvents !== false && e.instances.has(instanceId as never);
  }

  private onRegistryChange(change: RegistryChange): void {
    if (change.type === 'synced') return;
    if (change.card.kind !== 'llm') return;
    const worker = workerId(change.instanceId, change.model);
    if (change.type === 'instance-added') {
      if (change.card.metadata['kvEvents'] === false) return;
      void this.enqueue(worker, async () => {
        // snapshot only once the subscription is live: no event can fall between the two
        await this.kvReady;
        if (this.abort.signal.aborted) return;
        this.options.stats.kvEvents.resyncs++;
        await this.options.indexer.resync(worker);
      });
    } else {
      this.loads.delete(worker);
      void this.enqueue(worker, async () => {
        await this.options.indexer.forget(worker);
      });
    }
  }

  /** Run `task` after every earlier task of the worker; failures are logged, never thrown. */
  private enqueue(worker: WorkerId, task: () => Promise<void>): Promise<void> {
    const prev = this.chains.get(worker) ?? Promise.resolve();
    const next = prev.then(task).catch((err: unknown) => {
      if (!this.abort.signal.aborted) this.options.logger.warn({ err, worker }, 'router: KV index update failed');
    });
    this.chains.set(worker, next);
    void next.then(() => {
      if (this.chains.get(worker) === next) this.chains.delete(worker);
    });
    return next;
  }

  /**
   * Run a subscription for as long as the consumer lives: one that fails (JetStream unavailable when
   * the router starts, say) is started again after SUBSCRIBE_RETRY_MS. KV events missed meanwhile
   * show as event id gaps at each worker's next event, which resyncs it.
   */
  private async keepSubscribed(what: string, subscription: () => Promise<void>): Promise<void> {
    const signal = this.abort.signal;
    for (let failures = 0; !signal.aborted; ) {
      try {
        await subscription();
        if (signal.aborted) return;
        throw unavailable('the subscription ended');
      } catch (err) {
        if (signal.aborted) return;
        if (failures++ === 0) this.options.logger.error({ err }, `router: ${what} subscription failed; retrying every ${SUBSCRIBE_RETRY_MS} ms`);
        this.options.stats.kvEvents.subscriptionFailures++;
        await pauseUnlessAborted(SUBSCRIBE_RETRY_MS, signal);
      }
    }
  }

  private async consumeKvEvents(): Promise<void> {
    const inflight = new Set<Promise<void>>();
    const waitingByWorker = new Map<WorkerId, WaitingBatch>();
    const { eventPlane, namespace, stats, logger } = this.options;
    try {
      const subject = kvEventsSubject(namespace, componentName(WORKER_COMPONENT));
      const subscription = eventPlane.subscribe({
        subject,
        durable: this.durable('kv'),
        startAt: 'new',
        onReady: () => this.markKvReady(),
        signal: this.abort.signal,
      });
      for await (const msg of subscription) {
        let batch;
        try {
          batch = decodeWireKvEvents(msg.payload);
        } catch (err) {
          stats.kvEvents.invalid++;
          logger.warn({ err, seq: msg.seq }, 'router: dropping an undecodable KV event batch');
          msg.ack();
          continue;
        }
        stats.kvEvents.batches++;
        if (batch.events.length > 0 && this.eventfulWorker(batch.instanceId, batch.model)) {
          const worker = workerId(batch.instanceId, batch.model);
          // A batch whose worker already has one waiting (behind an apply or a resync in flight) joins
          // it: one indexer call for both, events still in order. So a worker's batches that arrive
          // faster than the table answers cost one call per round trip, not one each.
          const waiting = waitingByWorker.get(worker);
          if (waiting !== undefined && waiting.events.length + batch.events.length <= MAX_MERGED_EVENTS) {
            for (const e of batch.events) waiting.events.push(e);
            waiting.msgs.push(msg);
            continue;
          }
          const entry: WaitingBatch = { events: [...batch.events], msgs: [msg] };
          waitingByWorker.set(worker, entry);
          // Workers apply in parallel, each in order: one worker's resync (a snapshot fetch that can
          // take seconds) does not hold back every other worker's events. Acked once applied.
          const applied = this.enqueue(worker, async () => {
            if (waitingByWorker.get(worker) === entry) waitingByWorker.delete(worker); // from here on, batches wait for the next call
            const result = await this.options.indexer.apply(worker, entry.events);
            stats.kvEvents.applied += appliedCount(result, entry.events.length);
            if (isGap(result)) {
              stats.kvEvents.gaps++;
              stats.kvEvents.resyncs++;
            }
          }).then(() => {
            for (const m of entry.msgs) m.ack();
          });
          inflight.add(applied);
          void applied.finally(() => inflight.delete(applied));
          if (inflight.size >= MAX_BATCHES_IN_FLIGHT) await Promise.race(inflight);
          continue;
        }
        msg.ack();
      }
    } finally {
      this.markKvReady();
    }
  }

  private async consumeLoads(): Promise<void> {
    const { eventPlane, namespace, logger } = this.options;
    const subject = loadSubject(namespace, componentName(WORKER_COMPONENT));
    for await (const msg of eventPlane.subscribe({ subject, durable: this.durable('load'), startAt: 'new', signal: this.abort.signal })) {
      try {
        const load = decodeWireLoad(msg.payload);
        const e = this.options.registry.model(load.model);
        const worker = workerId(load.instanceId, load.model);
        const prev = this.loads.get(worker);
        // only live workers; never go back in time on a redelivery
        if (e?.instances.has(load.instanceId as never) === true && (prev === undefined || prev.ts <= load.ts)) this.loads.set(worker, load);
      } catch (err) {
        this.options.stats.kvEvents.invalid++;
        logger.warn({ err, seq: msg.seq }, 'router: dropping an undecodable load sample');
      }
      msg.ack();
    }
  }
}

/** Events applied, from whatever the indexer reports (an ApplyResult-like `{applied}` or a number). */
function appliedCount(result: unknown, fallback: number): number {
  if (typeof result === 'number') return result;
  if (typeof result === 'object' && result !== null && typeof (result as { applied?: unknown }).applied === 'number') return (result as { applied: number }).applied;
  return fallback;
}

function isGap(result: unknown): boolean {
  return typeof result === 'object' && result !== null && ((result as { status?: unknown }).status === 'gap' || (result as { resynced?: unknown }).resynced === true);
}
