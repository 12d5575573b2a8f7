/**
 * MemoryRoutingTable: the RoutingTable role in one process (unit tests, the routing benchmark, a single
 * router without Redis). Same contract and same selection math (selector.ts) as RedisRoutingTable;
 * both pass `routingTableConformance`. Every method completes synchronously inside its promise, so
 * each call is atomic with respect to the others.
 *
 * Cost: applyEvents O(blocks in the events); selectAndReserve O(matched depth × candidates) plus at
 * most APPROX_PRUNE_BASE + 2 × request blocks expired approximate entries (so a mass expiry, e.g. 1M
 * approximate blocks after an idle spell, is spread over many decisions instead of stalling one) plus
 * the expired reservations; removeWorker O(the worker's blocks + reservations).
 *
 * Approximate entries past their expiry but not yet pruned are ignored by matching; until pruned they
 * still count in `blockCount` (the tie-break tree size), which the contract allows (it is a size hint).
 */
import { invalidArgument } from '@switchyard/common';
import type { KvCacheEvent, KvSnapshot, SequenceHash } from '@switchyard/llm';
import { MinHeap } from './min-heap.js';
import {
  DEFAULT_RESERVATION_TTL_MS,
  checkEvents,
  checkRouteRequest,
  checkSnapshot,
  type ApplyResult,
  type RouteDecision,
  type RouteRequest,
  type RoutingTable,
  type WorkerEvents,
  type WorkerId,
  type WorkerLoad,
} from './routing-table.js';
import { type CandidateState, chooseCandidate, scoreCandidate } from './selector.js';

interface WorkerState {
  lastEventId: number;
  readonly hashes: Set<SequenceHash>;
  /** Approximate-mode entries: hash → expiry (epoch ms). A block stored by an event is not in here. */
  readonly approx: Map<SequenceHash, number>;
}

interface Reservation {
  readonly worker: WorkerId;
  readonly blocks: number;
  prefillTokens: number;
  readonly expiry: number;
}

/** Expired approximate entries pruned per selectAndReserve, on top of 2 × the request's blocks. */
const APPROX_PRUNE_BASE = 64;

interface MutableLoad {
  activeBlocks: number;
  prefillTokens: number;
  requests: number;
}

export class MemoryRoutingTable implements RoutingTable {
  private readonly index = new Map<SequenceHash, Set<WorkerId>>();
  private readonly workers = new Map<WorkerId, WorkerState>();
  /** Workers with at least one indexed block (the shared-prefix shortcut of `match`). */
  private nonEmptyWorkers = 0;
  private readonly reservations = new Map<string, Reservation>();
  private readonly load = new Map<WorkerId, MutableLoad>();
  /** Lazy: entries of released reservations stay until they surface; rebuilt when mostly stale. */
  private reservationExpiry = new MinHeap<string>();
  private approxExpiry = new MinHeap<{ worker: WorkerId; hash: SequenceHash }>();

  async applyEventBatches(batches: readonly WorkerEvents[]): Promise<ApplyResult[]> {
    for (const b of batches) checkEvents(b.events);
    const out: ApplyResult[] = [];
    for (const b of batches) out.push(await this.applyEvents(b.worker, b.events));
    return out;
  }

  async applyEvents(worker: WorkerId, events: readonly KvCacheEvent[]): Promise<ApplyResult> {
    checkEvents(events);
    const known = this.workers.get(worker);
    let last = known?.lastEventId ?? -1;
    let applied = 0;
    for (const e of events) {
      if (e.event_id <= last) continue; // applied before: a redelivery
      if (e.event_id !== last + 1) return { status: 'gap', applied, lastEventId: last, expected: last + 1, got: e.event_id };
      this.applyOne(this.stateOf(worker), e);
      last = e.event_id;
      applied++;
    }
    return { status: 'ok', applied, lastEventId: last };
  }

  async replaceWorker(worker: WorkerId, snapshot: KvSnapshot): Promise<void> {
    checkSnapshot(snapshot);
    this.dropBlocks(worker);
    const state = this.stateOf(worker);
    for (const b of snapshot.blocks) this.add(worker, state, b.block_hash);
    state.lastEventId = snapshot.last_event_id;
  }

  async removeWorker(worker: WorkerId): Promise<void> {
    this.dropBlocks(worker);
    this.workers.delete(worker);
    this.load.delete(worker);
    for (const [id, r] of this.reservations) if (r.worker === worker) this.reservations.delete(id);
  }

  async lastEventId(worker: WorkerId): Promise<number> {
    return this.workers.get(worker)?.lastEventId ?? -1;
  }

  async blockCount(worker: WorkerId): Promise<number> {
    return this.workers.get(worker)?.hashes.size ?? 0;
  }

  async selectAndReserve(request: RouteRequest): Promise<RouteDecision> {
    checkRouteRequest(request);
    const { candidates, requestId, now } = request;
    this.pruneReservations(now);
    this.pruneApprox(now, APPROX_PRUNE_BASE + 2 * request.blockHashes.length);
    if (this.reservations.has(requestId)) throw invalidArgument(`selectAndReserve: request '${requestId}' is already reserved`);

    const overlap = this.match(request.blockHashes, candidates, now);
    const input = { promptTokens: request.promptTokens, blockSize: request.blockSize, overlapWeight: request.overlapWeight, scoring: request.scoring ?? 'kv' } as const;
    const scores = candidates.map((worker, i) => {
      const l = this.load.get(worker);
      const c: CandidateState = {
        worker,
        overlapBlocks: overlap[i]!,
        activeBlocks: l?.activeBlocks ?? 0,
        prefillTokens: l?.prefillTokens ?? 0,
        treeSize: this.workers.get(worker)?.hashes.size ?? 0,
      };
      return scoreCandidate(c, input);
    });
    const trees = candidates.map((w) => this.workers.get(w)?.hashes.size ?? 0);
    const chosen = chooseCandidate(scores, trees, request.temperature, request.random);
    const worker = candidates[chosen]!;
    const overlapBlocks = overlap[chosen]!;

    // "Assume KV reuse" (Dynamo): blocks the worker already caches are shared, not new load.
    const blocks = Math.max(Math.ceil(request.promptTokens / request.blockSize) - overlapBlocks, 0);
    const prefillTokens = Math.max(request.promptTokens - overlapBlocks * request.blockSize, 0);
    const expiry = now + (request.reservationTtlMs ?? DEFAULT_RESERVATION_TTL_MS);
    this.reservations.set(requestId, { worker, blocks, prefillTokens, expiry });
    this.reservationExpiry.push(expiry, requestId);
    if (this.reservationExpiry.size > 2 * this.reservations.size + 1024) this.compactReservationExpiry();
    const l = this.loadOf(worker);
    l.activeBlocks += blocks;
    l.prefillTokens += prefillTokens;
    l.requests++;

    if (request.approximate !== undefined) {
      const state = this.stateOf(worker);
      const until = now + request.approximate.ttlMs;
      for (const h of request.blockHashes) {
        if (state.hashes.has(h) && !state.approx.has(h)) continue; // stored by an event: not approximate
        this.add(worker, state, h);
        state.approx.set(h, until);
        this.approxExpiry.push(until, { worker, hash: h });
      }
    }
    return { worker, overlapBlocks, scores };
  }

  async markPrefillDone(requestId: string): Promise<void> {
    const r = this.reservations.get(requestId);
    if (r === undefined || r.prefillTokens === 0) return;
    const l = this.load.get(r.worker);
    if (l !== undefined) l.prefillTokens -= r.prefillTokens;
    r.prefillTokens = 0;
  }

  async release(requestId: string): Promise<void> {
    const r = this.reservations.get(requestId);
    if (r === undefined) return;
    this.reservations.delete(requestId);
    this.unload(r);
  }

  async loads(now: number): Promise<ReadonlyMap<WorkerId, WorkerLoad>> {
    this.pruneReservations(now);
    const out = new Map<WorkerId, WorkerLoad>();
    for (const [w, l] of this.load) if (l.requests > 0) out.set(w, { ...l });
    return out;
  }

  async close(): Promise<void> {}

  /** Forget everything: blocks, event ids, load (the twin of flushing Redis; conformance `flush`). */
  clear(): void {
    this.index.clear();
    this.workers.clear();
    this.nonEmptyWorkers = 0;
    this.reservations.clear();
    this.load.clear();
    this.reservationExpiry = new MinHeap<string>();
    this.approxExpiry = new MinHeap<{ worker: WorkerId; hash: SequenceHash }>();
  }

  // ---- internals ------------------------------------------------------------------------------

  /**
   * Leading blocks each candidate holds, in candidate order. An approximate entry expired at `now`
   * (not yet pruned) is a miss.
   */
  private match(hashes: readonly SequenceHash[], candidates: readonly WorkerId[], now: number): number[] {
    const overlap = new Array<number>(candidates.length).fill(0);
    const approx = candidates.map((w) => this.workers.get(w)?.approx);
    const anyApprox = approx.some((a) => a !== undefined && a.size > 0);
    const alive: number[] = candidates.map((_, i) => i);
    let depth = 0;
    for (; depth < hashes.length && alive.length > 0; depth++) {
      const h = hashes[depth]!;
      const holders = this.index.get(h);
      if (holders === undefined) break;
      // Every worker with blocks holds this one, so every candidate still matching (it holds the
      // previous block) does: a prefix shared by the whole fleet costs O(1) per block.
      if (depth > 0 && !anyApprox && holders.size === this.nonEmptyWorkers) continue;
      let kept = 0;
      for (const i of alive) {
        if (holders.has(candidates[i]!) && !expired(approx[i], h, now)) alive[kept++] = i;
        else overlap[i] = depth;
      }
      alive.length = kept;
    }
    for (const i of alive) overlap[i] = depth;
    return overlap;
  }

  private applyOne(state: WorkerState, e: KvCacheEvent): void {
    const worker = this.workerOf(state);
    const d = e.data;
    switch (d.type) {
      case 'stored':
        for (const b of d.blocks) {
          this.add(worker, state, b.block_hash);
          state.approx.delete(b.block_hash);
        }
        break;
      case 'removed':
        for (const h of d.block_hashes) this.remove(worker, state, h);
        break;
      case 'cleared':
        for (const h of [...state.hashes]) this.remove(worker, state, h);
        break;
    }
    state.lastEventId = e.event_id;
  }

  private add(worker: WorkerId, state: WorkerState, h: SequenceHash): void {
    if (state.hashes.size === 0) this.nonEmptyWorkers++;
    state.hashes.add(h);
    let set = this.index.get(h);
    if (set === undefined) {
      set = new Set();
      this.index.set(h, set);
    }
    set.add(worker);
  }

  private remove(worker: WorkerId, state: WorkerState, h: SequenceHash): void {
    if (state.hashes.delete(h) && state.hashes.size === 0) this.nonEmptyWorkers--;
    state.approx.delete(h);
    const set = this.index.get(h);
    if (set === undefined) return;
    set.delete(worker);
    if (set.size === 0) this.index.delete(h);
  }

  private dropBlocks(worker: WorkerId): void {
    const state = this.workers.get(worker);
    if (state === undefined) return;
    for (const h of [...state.hashes]) this.remove(worker, state, h);
  }

  private readonly owners = new WeakMap<WorkerState, WorkerId>();

  private stateOf(worker: WorkerId): WorkerState {
    let s = this.workers.get(worker);
    if (s === undefined) {
      s = { lastEventId: -1, hashes: new Set(), approx: new Map() };
      this.workers.set(worker, s);
      this.owners.set(s, worker);
    }
    return s;
  }

  private workerOf(state: WorkerState): WorkerId {
    return this.owners.get(state)!;
  }

  private loadOf(worker: WorkerId): MutableLoad {
    let l = this.load.get(worker);
    if (l === undefined) {
      l = { activeBlocks: 0, prefillTokens: 0, requests: 0 };
      this.load.set(worker, l);
    }
    return l;
  }

  private unload(r: Reservation): void {
    const l = this.load.get(r.worker);
    if (l === undefined) return;
    l.activeBlocks -= r.blocks;
    l.prefillTokens -= r.prefillTokens;
    l.requests--;
    if (l.requests <= 0) this.load.delete(r.worker);
  }

  private pruneReservations(now: number): void {
    for (;;) {
      const top = this.reservationExpiry.peek();
      if (top === undefined || top.key > now) return;
      this.reservationExpiry.pop();
      const r = this.reservations.get(top.value);
      if (r !== undefined && r.expiry <= now) {
        this.reservations.delete(top.value);
        this.unload(r);
      }
    }
  }

  private compactReservationExpiry(): void {
    const heap = new MinHeap<string>();
    for (const [id, r] of this.reservations) heap.push(r.expiry, id);
    this.reservationExpiry = heap;
  }

  /** Drop up to `budget` approximate entries expired at `now`; the rest go on later calls. */
  private pruneApprox(now: number, budget: number): void {
    for (let n = 0; n < budget; n++) {
      const top = this.approxExpiry.peek();
      if (top === undefined || top.key > now) return;
      this.approxExpiry.pop();
      const { worker, hash } = top.value;
      const state = this.workers.get(worker);
      const until = state?.approx.get(hash);
      if (state !== undefined && until !== undefined && until <= now) this.remove(worker, state, hash);
    }
  }
}

function expired(approx: Map<SequenceHash, number> | undefined, h: SequenceHash, now: number): boolean {
  if (approx === undefined || approx.size === 0) return false;
  const until = approx.get(h);
  return until !== undefined && until <= now;
}
