/**
 * KvIndexer: feeds a RoutingTable from workers' KV event batches and keeps it recoverable. IO is
 * injected: the table (memory or Redis) and `fetchSnapshot` (the router asks the worker's
 * `kv_snapshot` endpoint over the request plane).
 *
 * Per worker, calls are serialised (a promise chain), so a resync and the batches behind it never
 * interleave. A batch goes to the table with every other worker's batch that reaches the indexer in
 * the same event-loop turn, in one `table.applyEventBatches` call (one Redis round trip instead of one
 * per batch; a call holds at most MAX_HASHES_PER_TABLE_CALL block hashes, so one script never blocks
 * Redis long; a larger batch goes alone). Batches come in bursts: a router's JetStream consumer
 * receives many in one read when many workers publish. On a gap (events lost, table flushed, worker never
 * seen by this table) the worker's snapshot replaces its state and the batch's events above the
 * snapshot's `last_event_id` are applied after it. A failed snapshot fetch is logged and counted, never
 * thrown: the worker stays behind until its next batch, which meets the gap again and retries.
 */
import { type Logger, silentLogger } from '@switchyard/common';
import type { KvCacheEvent, KvSnapshot } from '@switchyard/llm';
import { type ApplyResult, type RoutingTable, type WorkerId, checkEvents } from './routing-table.js';

/** Block hashes one gathered table call carries at most (a single larger batch goes alone). */
export const MAX_HASHES_PER_TABLE_CALL = 8192;

/** A batch waiting for the turn's table call. */
interface Gathered {
  readonly worker: WorkerId;
  readonly events: readonly KvCacheEvent[];
  readonly resolve: (r: ApplyResult) => void;
  readonly reject: (e: unknown) => void;
}

export interface KvIndexerOptions {
  readonly table: RoutingTable;
  /** The worker's current snapshot (its blocks and the last event id they reflect). */
  readonly fetchSnapshot: (worker: WorkerId) => Promise<KvSnapshot>;
  readonly logger?: Logger;
}

/** What one `apply` did. */
export interface IndexerApplyResult {
  /** Events newly applied (from the batch, after a resync included). */
  readonly applied: number;
  /** The table reported a gap for this batch. */
  readonly gap: boolean;
  /** A snapshot replaced the worker's state. */
  readonly resynced: boolean;
}

export interface KvIndexerStats {
  readonly batches: number;
  readonly eventsApplied: number;
  readonly duplicatesSkipped: number;
  readonly gaps: number;
  readonly resyncs: number;
  readonly resyncFailures: number;
  /** Table calls that applied batches (gathered: at most one per batch). */
  readonly tableCalls: number;
}

export class KvIndexer {
  private readonly table: RoutingTable;
  private readonly fetchSnapshot: (worker: WorkerId) => Promise<KvSnapshot>;
  private readonly logger: Logger;
  private readonly chains = new Map<WorkerId, Promise<unknown>>();
  private readonly counters = { batches: 0, eventsApplied: 0, duplicatesSkipped: 0, gaps: 0, resyncs: 0, resyncFailures: 0, tableCalls: 0 };
  private gathering: Gathered[] = [];
  private gatherScheduled = false;

  constructor(options: KvIndexerOptions) {
    this.table = options.table;
    this.fetchSnapshot = options.fetchSnapshot;
    this.logger = options.logger ?? silentLogger;
  }

  /** Called by the event consumer per batch of one worker's events, in event-id order. Never rejects for a failed resync. */
  apply(worker: WorkerId, events: readonly KvCacheEvent[]): Promise<IndexerApplyResult> {
    return this.serial(worker, () => this.applyNow(worker, events));
  }

  /** Replace the worker's state by its snapshot now (first seen, or a flush suspected). Resolves false if the fetch failed. */
  resync(worker: WorkerId): Promise<boolean> {
    return this.serial(worker, () => this.resyncNow(worker));
  }

  /** The worker left: drop everything the table holds for it. */
  forget(worker: WorkerId): Promise<void> {
    return this.serial(worker, () => this.table.removeWorker(worker));
  }

  stats(): KvIndexerStats {
    return { ...this.counters };
  }

  private async applyNow(worker: WorkerId, events: readonly KvCacheEvent[]): Promise<IndexerApplyResult> {
    this.counters.batches++;
    const r = await this.gathered(worker, events);
    this.counters.eventsApplied += r.applied;
    if (r.status === 'ok') {
      this.counters.duplicatesSkipped += events.length - r.applied;
      return { applied: r.applied, gap: false, resynced: false };
    }
    this.counters.gaps++;
    this.logger.warn({ worker, expected: r.expected, got: r.got }, 'KV events: gap in event ids; resyncing the worker from its snapshot');
    const snapshot = await this.tryFetch(worker);
    if (snapshot === undefined) return { applied: r.applied, gap: true, resynced: false };
    await this.table.replaceWorker(worker, snapshot);
    this.counters.resyncs++;
    const rest = events.filter((e) => e.event_id > snapshot.last_event_id);
    let applied = r.applied;
    if (rest.length > 0) {
      const again = await this.table.applyEvents(worker, rest);
      applied += again.applied;
      this.counters.eventsApplied += again.applied;
      // A gap right after a fresh snapshot means the batch skips ids the snapshot does not cover
      // (events lost between the snapshot and the batch): the next batch will meet it and resync.
      if (again.status === 'gap') this.counters.gaps++;
    }
    return { applied, gap: true, resynced: true };
  }

  /** Apply `events` in this turn's table call. */
  private gathered(worker: WorkerId, events: readonly KvCacheEvent[]): Promise<ApplyResult> {
    return new Promise<ApplyResult>((resolve, reject) => {
      this.gathering.push({ worker, events, resolve, reject });
      if (this.gatherScheduled) return;
      this.gatherScheduled = true;
      setImmediate(() => this.sendGathered());
    });
  }

  private sendGathered(): void {
    this.gatherScheduled = false;
    const all = this.gathering;
    this.gathering = [];
    let call: Gathered[] = [];
    let hashes = 0;
    for (const g of all) {
      try {
        checkEvents(g.events); // a malformed batch fails alone, not the call it would have joined
      } catch (e) {
        g.reject(e);
        continue;
      }
      const n = hashCount(g.events);
      if (call.length > 0 && hashes + n > MAX_HASHES_PER_TABLE_CALL) {
        this.send(call);
        call = [];
        hashes = 0;
      }
      call.push(g);
      hashes += n;
    }
    if (call.length > 0) this.send(call);
  }

  private send(call: readonly Gathered[]): void {
    this.counters.tableCalls++;
    const fail = (err: unknown): void => call.forEach((g) => g.reject(err));
    let applied: Promise<ApplyResult[]>;
    try {
      applied = this.table.applyEventBatches(call.map(({ worker, events }) => ({ worker, events })));
    } catch (e) {
      fail(e); // (a table that throws instead of rejecting must not escape this setImmediate)
      return;
    }
    applied.then((results) => {
      if (results.length !== call.length) return fail(new Error(`routing table answered ${results.length} results for ${call.length} batches`));
      call.forEach((g, i) => g.resolve(results[i]!));
    }, fail);
  }

  private async resyncNow(worker: WorkerId): Promise<boolean> {
    const snapshot = await this.tryFetch(worker);
    if (snapshot === undefined) return false;
    await this.table.replaceWorker(worker, snapshot);
    this.counters.resyncs++;
    return true;
  }

  private async tryFetch(worker: WorkerId): Promise<KvSnapshot | undefined> {
    try {
      return await this.fetchSnapshot(worker);
    } catch (err) {
      this.counters.resyncFailures++;
      this.logger.warn({ worker, err }, 'KV events: snapshot fetch failed; the worker is resynced at its next batch');
      return undefined;
    }
  }

  private serial<T>(worker: WorkerId, task: () => Promise<T>): Promise<T> {
    const prev = this.chains.get(worker) ?? Promise.resolve();
    const run = prev.then(task, task);
    const tail = run.catch(() => undefined);
    this.chains.set(worker, tail);
    void tail.then(() => {
      if (this.chains.get(worker) === tail) this.chains.delete(worker);
    });
    return run;
  }
}

function hashCount(events: readonly KvCacheEvent[]): number {
  let n = 0;
  for (const e of events) n += e.data.type === 'stored' ? e.data.blocks.length : e.data.type === 'removed' ? e.data.block_hashes.length : 0;
  return n + events.length;
}
