/**
 * The RoutingTable role: the cluster's shared routing state for KV-aware routing, split the way
 * Dynamo splits it (shared/reference/dynamo-design.md §10.4):
 *
 * - the **cached-prefix index** — which worker holds which block (by chained sequence hash), built
 *   from the workers' KV events, eventually consistent and recoverable: every worker's events carry
 *   ids 0, 1, 2…, the table remembers the last id applied per worker, and a jump is reported as a gap
 *   so the caller resyncs that worker from its snapshot;
 * - the **active load** — per worker, the KV blocks and the uncached prompt tokens of the requests
 *   routers have sent it and not yet released, shared by every router replica.
 *
 * `selectAndReserve` matches a request's block hashes against the index, scores every candidate,
 * picks one and reserves the request's load on it **in one atomic step**, so two router replicas
 * deciding at the same moment see each other's reservations and do not stampede one worker.
 *
 * Implementations: `MemoryRoutingTable` (this package; unit tests, standalone, one router) and
 * `RedisRoutingTable` (@switchyard/runtime; Lua scripts, shared by router replicas). Both pass the
 * same conformance suite (`internal.ts`: `routingTableConformance`).
 *
 * Worker ids are opaque strings chosen by the caller. The cluster uses `<instanceId>/<model>` (one
 * engine per model per worker process), so blocks of different models never match each other.
 */
import { invalidArgument } from '@switchyard/common';
import type { KvCacheEvent, KvSnapshot, SequenceHash } from '@switchyard/llm';

/** Opaque worker id (the cluster uses `<instanceId>/<model>`). Never contains a newline. */
export type WorkerId = string;

/** Defaults, Dynamo's (dynamo-design.md §2.5–2.7). */
export const DEFAULT_OVERLAP_WEIGHT = 1;
export const DEFAULT_ROUTER_TEMPERATURE = 0;
/** A reservation not released within this time is dropped (Dynamo's EXPIRY_DURATION, 300 s). */
export const DEFAULT_RESERVATION_TTL_MS = 300_000;
/** Approximate mode: how long a routed prompt is assumed cached on its worker (Dynamo: 120 s). */
export const DEFAULT_APPROX_TTL_MS = 120_000;

/** What applying a batch of one worker's events did. */
export type ApplyResult =
  /** Every event was applied or was already applied (ids at or below the last one: redelivery). */
  | { readonly status: 'ok'; readonly applied: number; readonly lastEventId: number }
  /**
   * The first unapplied event's id is not `lastEventId + 1` (events were lost, the table was flushed,
   * or the table has never seen this worker and the first id is not 0). Events from the gap on are
   * NOT applied: resync the worker with `replaceWorker(worker, snapshot)` and then apply the events
   * with ids above the snapshot's `last_event_id`. `lastEventId` is -1 when the table does not know
   * the worker.
   */
  | { readonly status: 'gap'; readonly applied: number; readonly lastEventId: number; readonly expected: number; readonly got: number };

/** One worker's batch of events, in id order (`RoutingTable.applyEventBatches`). */
export interface WorkerEvents {
  readonly worker: WorkerId;
  readonly events: readonly KvCacheEvent[];
}

/** One routing decision's input. */
export interface RouteRequest {
  /** Unique per request across routers; the reservation is released under this id. */
  readonly requestId: string;
  /** The prompt's full blocks, chained sequence hashes in order (block-hash.ts). */
  readonly blockHashes: readonly SequenceHash[];
  /** Prompt length in tokens (the partial last block counts here, not in `blockHashes`). */
  readonly promptTokens: number;
  readonly blockSize: number;
  /** Workers that may take the request (serving the model, alive, not inhibited). Non-empty. */
  readonly candidates: readonly WorkerId[];
  /** Weight of uncached prefill blocks against active blocks. */
  readonly overlapWeight: number;
  /**
   * `kv` (default): cost = overlapWeight × prefillBlocks + decodeBlocks (WorkerScore).
   * `load`: cost = the worker's reserved active blocks + pending prefill tokens / blockSize, ignoring
   * the cache (the `least-loaded` router mode). Overlap is still reported in the scores.
   */
  readonly scoring?: 'kv' | 'load';
  /** 0 = lowest cost wins (ties: fewest indexed blocks, then `random`); > 0 = softmax over normalised costs. */
  readonly temperature: number;
  /** Uniform in [0, 1), drawn by the caller: the only randomness (ties, softmax), so a decision is reproducible. */
  readonly random: number;
  /** Epoch ms, the caller's clock: reservation expiry and approximate-mode TTLs are measured from it. */
  readonly now: number;
  /**
   * Approximate mode (the chosen worker publishes no KV events): record the request's blocks as cached
   * on the chosen worker until `now + approxTtlMs`, refreshed by reuse.
   */
  readonly approximate?: { readonly ttlMs: number };
  /** Reservation lifetime; default DEFAULT_RESERVATION_TTL_MS. */
  readonly reservationTtlMs?: number;
}

/** How one candidate scored. */
export interface WorkerScore {
  readonly worker: WorkerId;
  /** Leading blocks of the prompt the worker holds. */
  readonly overlapBlocks: number;
  /** Uncached prompt work in blocks: (pending prefill tokens + this prompt's uncached tokens) / blockSize. */
  readonly prefillBlocks: number;
  /** Active blocks before this request + this request's blocks not already cached there. */
  readonly decodeBlocks: number;
  /** overlapWeight × prefillBlocks + decodeBlocks. */
  readonly cost: number;
}

export interface RouteDecision {
  readonly worker: WorkerId;
  readonly overlapBlocks: number;
  /** Every candidate's score, in `candidates` order. */
  readonly scores: readonly WorkerScore[];
}

/** A worker's load as routers track it (reservations not yet released). */
export interface WorkerLoad {
  readonly activeBlocks: number;
  /** Prompt tokens not yet prefilled (released from the count at the first output token). */
  readonly prefillTokens: number;
  readonly requests: number;
}

export interface RoutingTable {
  /**
   * Called by the KV-event consumer, per worker, with events in id order. Idempotent under
   * redelivery (ids at or below the worker's last applied id are skipped). Atomic per call.
   */
  applyEvents(worker: WorkerId, events: readonly KvCacheEvent[]): Promise<ApplyResult>;
  /**
   * `applyEvents` for several batches at once (workers may repeat; applied in the given order), one
   * result per batch, a gap stopping only its own batch. A shared table makes it one round trip
   * (RedisRoutingTable: one script call), which is why the KV indexer gathers batches that arrive
   * together. Throws invalid_argument (applying nothing) if any batch's events are malformed.
   */
  applyEventBatches(batches: readonly WorkerEvents[]): Promise<ApplyResult[]>;
  /**
   * Replace everything indexed for `worker` by a snapshot (after a gap, a flush, or when a worker is
   * first seen), and set its last applied event id to `snapshot.last_event_id`. Atomic.
   */
  replaceWorker(worker: WorkerId, snapshot: KvSnapshot): Promise<void>;
  /** Forget a worker (it left discovery): its blocks, last event id and load. Absent is not an error. */
  removeWorker(worker: WorkerId): Promise<void>;
  /** Last applied event id; -1 when the table does not know the worker (never seen, or flushed). */
  lastEventId(worker: WorkerId): Promise<number>;
  /** Number of blocks indexed for the worker (0 when unknown). */
  blockCount(worker: WorkerId): Promise<number>;

  /**
   * Score the candidates, pick one, reserve the request's load on it — one atomic step. The
   * reservation adds the prompt's blocks not already cached there (`ceil(promptTokens / blockSize) −
   * overlapBlocks`, Dynamo's "assume KV reuse": cached blocks are shared) as active blocks and the uncached prompt tokens
   * (`promptTokens − overlapBlocks × blockSize`, at least 0) as pending prefill to the chosen worker;
   * expired reservations (older than their TTL) are dropped on the way. Throws
   * invalid_argument for an empty candidate list or a request id already reserved.
   */
  selectAndReserve(request: RouteRequest): Promise<RouteDecision>;
  /**
   * Called at the request's first output token: its prompt no longer counts as pending prefill. No-op if unknown.
   * Resolves once applied. A shared table may hold it back briefly to send it with this table's next
   * call (RedisRoutingTable: one round trip per decision), but always applies it before any later call
   * of this table — its next decision sees it — and other routers see it within milliseconds. A shared
   * table that cannot reach its storage rejects `unavailable` and keeps it (bounded) to apply once the
   * storage answers again, so a short outage does not leave the load counted until the reservation expires.
   */
  markPrefillDone(requestId: string): Promise<void>;
  /** Called when the request ends (any way): its load leaves the worker. No-op if unknown (expired, released). Timing as markPrefillDone. */
  release(requestId: string): Promise<void>;
  /** Current tracked load of each worker with load (workers with no reservation may be absent). */
  loads(now: number): Promise<ReadonlyMap<WorkerId, WorkerLoad>>;

  /** Release the connection (Redis) or nothing (memory). Idempotent. */
  close(): Promise<void>;
}

/**
 * The input checks every RoutingTable makes first (one place, so the memory twin and the Redis table
 * refuse the same inputs): `invalid_argument` naming the field.
 */
export function checkEvents(events: readonly KvCacheEvent[]): void {
  for (const e of events) {
    if (!Number.isSafeInteger(e.event_id) || e.event_id < 0) throw invalidArgument(`event_id must be a non-negative integer, got ${e.event_id}`);
  }
}

export function checkSnapshot(snapshot: KvSnapshot): void {
  const last = snapshot.last_event_id;
  if (!Number.isSafeInteger(last) || last < -1) throw invalidArgument(`last_event_id must be an integer >= -1, got ${last}`);
}

export function checkRouteRequest(request: RouteRequest): void {
  const { candidates, blockSize, promptTokens } = request;
  if (candidates.length === 0) throw invalidArgument('selectAndReserve: empty candidate list');
  if (!Number.isSafeInteger(blockSize) || blockSize <= 0) throw invalidArgument(`blockSize must be a positive integer, got ${blockSize}`);
  if (!Number.isSafeInteger(promptTokens) || promptTokens < 0) throw invalidArgument(`promptTokens must be a non-negative integer, got ${promptTokens}`);
  if (!(request.random >= 0 && request.random < 1)) throw invalidArgument(`random must be in [0, 1), got ${request.random}`);
  if (!Number.isFinite(request.temperature) || request.temperature < 0) throw invalidArgument(`temperature must be >= 0, got ${request.temperature}`);
  if (!Number.isFinite(request.overlapWeight)) throw invalidArgument(`overlapWeight must be finite, got ${request.overlapWeight}`);
  if (!Number.isFinite(request.now)) throw invalidArgument(`now must be finite, got ${request.now}`);
  const ttl = request.reservationTtlMs ?? DEFAULT_RESERVATION_TTL_MS;
  if (!Number.isFinite(ttl) || ttl < 0) throw invalidArgument(`reservationTtlMs must be >= 0, got ${ttl}`);
  if (request.approximate !== undefined && !(Number.isFinite(request.approximate.ttlMs) && request.approximate.ttlMs >= 0)) {
    throw invalidArgument(`approximate.ttlMs must be >= 0, got ${request.approximate.ttlMs}`);
  }
}
