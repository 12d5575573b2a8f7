/**
 * RedisRoutingTable: the RoutingTable role (@switchyard/kv-router) on Redis, shared by every router
 * replica. Each operation that must be atomic is one Lua script (redis-routing-scripts.ts), so
 * `selectAndReserve` matches, scores, picks and reserves without another replica interleaving.
 *
 * Key layout (prefix `{sy:<namespace>}:v2:`; the braces are a Redis Cluster hash tag, so every key of
 * a table is in one slot and every script may touch any of them; `v2` is ROUTING_LAYOUT_VERSION):
 *
 * ```
 * w:<worker>   STRING  the worker's record: its current generation id (-1: none), then the load
 *                      reserved on it: active blocks, pending prefill tokens, requests (4 little-endian
 *                      doubles, 32 bytes; selectAndReserve reads every candidate's in one MGET).
 *                      Absent: no generation and no load.
 * ws           SET     workers that have a record (loads)
 * last         HASH    worker → last applied event id (absent: -1)
 * seq          STRING  generation ids allocated so far (INCR; ids are 0-based bit offsets)
 * free         ZSET    collected generation ids, reused smallest first
 * g:<gen>      SET     block hashes indexed under the generation (= the worker's blocks)
 * b:<hash>     STRING  bitmap: bit <gen> set for each generation holding the block
 * dead         SET     retired generations, unindexed a bounded batch per call (gc)
 * stg          ZSET    generations being staged by replaceWorker → abandon deadline (epoch ms)
 * stgo         HASH    generation being staged → the token of the replaceWorker call that owns it
 * ax:<gen>     ZSET    approximate-mode blocks of the generation → expiry (epoch ms)
 * axq          ZSET    generation → earliest approximate expiry (lazy pruning queue)
 * r:<rid>      STRING  the reservation of request <rid>: "<activeBlocks>\n<prefillTokens>\n<expiry>\n<worker>"
 * resx         ZSET    request id → reservation expiry (epoch ms)
 * rw:<worker>  SET     request ids reserved on the worker (removeWorker drops them)
 * ```
 *
 * Why generations: a worker's blocks are a generation, and matching only counts generations that
 * its record points to. `cleared`, `removeWorker` and the swap that ends `replaceWorker` are then O(1)
 * whatever the worker holds; the retired generation is unindexed later, `DEFAULT_GC_BUDGET` blocks
 * per applyEvents / replaceWorker / removeWorker call.
 *
 * What is atomic: applyEvents (one batch), removeWorker, selectAndReserve, markPrefillDone, release,
 * loads — one script each (markPrefillDone and release: one script with whatever carries them).
 *
 * Round trips: one per decision. markPrefillDone and release (the other two table calls of an LLM
 * request, neither awaited by the router) are queued and ride on this table's next script call,
 * usually the next decision, which applies them first; with nothing to ride on they go on their own
 * after `settleDelayMs` (DEFAULT_SETTLE_DELAY_MS), so other routers see a release at most that much
 * later. Their promises resolve once applied, and reject `unavailable` with the call that carried
 * them (a duplicate request id failing the decision does not fail them: they were applied first).
 * A settlement rejected `unavailable` is kept and sent again with the next calls, or on its own every
 * `SETTLEMENT_RETRY_MS`, until Redis answers: a short outage does not leave its load counted until the
 * reservation expires (300 s). At most `maxRetainedSettlements` are kept; past that the oldest are
 * dropped, counted (`droppedSettlements`) and logged. replaceWorker stages the snapshot in chunks of `SNAPSHOT_CHUNK` blocks
 * under a fresh generation nobody reads, then the last chunk's script swaps it in: readers see either
 * the whole old index or the whole new one, never a mix. Events applied for the worker while its
 * snapshot is staged land in the old generation and are dropped by the swap (as the contract says:
 * apply events above `last_event_id` after replaceWorker returns). A staging whose client died is
 * retired after `STAGING_TTL_MS`.
 *
 * Expired reservations and approximate-mode entries (expiry <= now) are pruned lazily, at most
 * `DEFAULT_PRUNE_BUDGET` of each per selectAndReserve (reservations also per loads). Beyond that
 * budget an expired entry may count until a later call removes it.
 *
 * Connection: ioredis with no offline queue and no resend: while Redis is unreachable every call
 * rejects `unavailable` at once (and a call whose reply is lost rejects, it is not replayed — a
 * script like selectAndReserve is not idempotent). ioredis reconnects by itself; scripts are sent
 * by EVALSHA and reloaded on NOSCRIPT, so a Redis restart or SCRIPT FLUSH is invisible. A flush
 * (FLUSHALL, restart without persistence) makes every worker unknown (lastEventId -1): the KV-event
 * consumer sees a gap on the next batch and resyncs.
 */
import { type Logger, SwitchyardError, internal, invalidArgument, silentLogger, unavailable } from '@switchyard/common';
import {
  type ApplyResult,
  DEFAULT_RESERVATION_TTL_MS,
  type RouteDecision,
  type RouteRequest,
  type RoutingTable,
  type WorkerId,
  type WorkerLoad,
  type WorkerEvents,
  type WorkerScore,
  checkEvents,
  checkRouteRequest,
  checkSnapshot,
  scoreCandidate,
} from '@switchyard/kv-router';
import { randomUUID } from 'node:crypto';
// first: ioredis must find its VerbatimString module already loaded (see the file)
import './ioredis-string-guard.js';
import { Redis, ReplyError } from 'ioredis';
import { NAME_PATTERN } from './addressing.js';
import { ROUTING_SCRIPTS, type RoutingScriptName } from './redis-routing-scripts.js';

/** Blocks per replaceWorker script call (each call blocks Redis for roughly 5–10 ms). */
export const SNAPSHOT_CHUNK = 10_000;
/** A snapshot staging not committed within this time (its client died) is garbage-collected. */
export const STAGING_TTL_MS = 600_000;
/** Retired-generation blocks unindexed per applyEvents / replaceWorker / removeWorker call. */
export const DEFAULT_GC_BUDGET = 4096;
/** Expired reservations and approximate entries dropped per selectAndReserve / loads call. */
export const DEFAULT_PRUNE_BUDGET = 1024;
/**
 * How long a `markPrefillDone` / `release` may wait for a script call to ride on (the next decision,
 * usually) before it is sent on its own. Other routers see a release at most this much later.
 */
export const DEFAULT_SETTLE_DELAY_MS = 2;
/** Settlements queued at most: one more sends them at once. Also the most kept ones one call carries. */
export const MAX_QUEUED_SETTLEMENTS = 256;
/**
 * Settlements kept, by default, after failing `unavailable` (Redis unreachable), to be sent again; past
 * this the oldest are dropped (counted and logged): their reservations then expire after their TTL.
 */
export const DEFAULT_MAX_RETAINED_SETTLEMENTS = 8192;
/** How often kept settlements are sent again while no other call carries them (ms). */
export const SETTLEMENT_RETRY_MS = 250;
/** Default per-command deadline: a call never waits longer for Redis. */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 5_000;

export interface RedisRoutingTableOptions {
  /** `redis://host:port[/db]`. */
  readonly url: string;
  /** The table's name: its keys are `{sy:<namespace>}:…`. Same pattern as runtime names (`NAME_PATTERN`). */
  readonly namespace: string;
  readonly logger?: Logger;
  /** Deadline of one Redis call (ms, default DEFAULT_REDIS_COMMAND_TIMEOUT_MS). */
  readonly commandTimeoutMs?: number;
  /** Deadline of the initial connection (ms, default 5000). */
  readonly connectTimeoutMs?: number;
  /** How long markPrefillDone / release wait for a call to ride on (ms, >= 0, default DEFAULT_SETTLE_DELAY_MS). */
  readonly settleDelayMs?: number;
  /** Failed settlements kept to be sent again, at most (>= 0, default DEFAULT_MAX_RETAINED_SETTLEMENTS). */
  readonly maxRetainedSettlements?: number;
}

/** The event and snapshot types, as the role declares them (@switchyard/llm's, without depending on it). */
type KvCacheEvent = Parameters<RoutingTable['applyEvents']>[1][number];
type KvSnapshot = Parameters<RoutingTable['replaceWorker']>[1];

type Reply = string | number | null | Reply[];
type ScriptFn = (key: string, ...args: (string | number)[]) => Promise<Reply>;

/**
 * Version of the key layout, part of every key (`{sy:<ns>}:<version>:`). A layout change gets a new
 * version, so a router of one layout never reads another's keys: upgraded against a Redis holding the
 * old layout, it starts from an empty table (every worker unknown, as after a flush: the KV-event
 * consumer sees a gap and resyncs each worker from a snapshot). The old keys are left as they are
 * (replicas not yet upgraded still use them); once none is left, `redis-cli --scan --pattern
 * '{sy:<ns>}:*'` lists them for deletion (every key not under `{sy:<ns>}:v2:`).
 *  - v1 (unversioned `{sy:<ns>}:`): `gen` and `ld` hashes, `res` hash of reservations.
 *  - v2: one `w:<worker>` record holds a worker's generation and load; reservations are `r:<rid>`.
 */
export const ROUTING_LAYOUT_VERSION = 'v2';

/** The `{sy:<ns>}:v2:` prefix of a table's keys. */
export function routingKeyPrefix(namespace: string): string {
  return `{sy:${namespace}}:${ROUTING_LAYOUT_VERSION}:`;
}

/** Someone awaiting a queued settlement. */
interface SettleWaiter {
  readonly resolve: () => void;
  readonly reject: (err: SwitchyardError) => void;
}

export class RedisRoutingTable implements RoutingTable {
  private closed = false;
  private readonly seqKey: string;
  /**
   * Settlements (markPrefillDone, release) not sent yet: kind ('p' | 'r') and request id, in the order
   * they were made, and who awaits each. They go first in the next script call (selectAndReserve
   * applies them before deciding), or on their own after `settleDelayMs`.
   */
  private queued: string[] = [];
  private waiters: SettleWaiter[] = [];
  private settleTimer: ReturnType<typeof setTimeout> | undefined;
  /**
   * Settlements whose call failed `unavailable` (kind and request id, oldest first; their callers were
   * told): they go again, ahead of the queued ones, with the next script calls, at most
   * MAX_QUEUED_SETTLEMENTS a call, and every SETTLEMENT_RETRY_MS while none is made. Sending one twice
   * is harmless (a second release or prefill done of a request is a no-op; request ids are unique).
   */
  private retained: string[] = [];
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private dropped = 0;
  private droppedNotLogged = 0;

  private constructor(
    private readonly redis: Redis,
    readonly prefix: string,
    private readonly log: Logger,
    private readonly settleDelayMs: number,
    private readonly maxRetained: number,
  ) {
    this.seqKey = `${prefix}seq`;
  }

  /** Failed settlements dropped so far because more than `maxRetainedSettlements` were kept. */
  get droppedSettlements(): number {
    return this.dropped;
  }

  /** Connect (fails `unavailable` if Redis does not answer within `connectTimeoutMs`). */
  static async connect(options: RedisRoutingTableOptions): Promise<RedisRoutingTable> {
    if (!NAME_PATTERN.test(options.namespace)) {
      throw invalidArgument(`invalid routing table namespace '${options.namespace}' (must match ${String(NAME_PATTERN)})`);
    }
    const settleDelayMs = options.settleDelayMs ?? DEFAULT_SETTLE_DELAY_MS;
    if (!Number.isFinite(settleDelayMs) || settleDelayMs < 0) throw invalidArgument(`settleDelayMs must be >= 0, got ${settleDelayMs}`);
    const maxRetained = options.maxRetainedSettlements ?? DEFAULT_MAX_RETAINED_SETTLEMENTS;
    if (!Number.isInteger(maxRetained) || maxRetained < 0) throw invalidArgument(`maxRetainedSettlements must be an integer >= 0, got ${maxRetained}`);
    const log = (options.logger ?? silentLogger).child({ component: 'redis-routing-table', namespace: options.namespace });
    const redis = new Redis(options.url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
      connectTimeout: options.connectTimeoutMs ?? 5000,
      retryStrategy: (times) => Math.min(times * 100, 1000),
    });
    let down = false;
    redis.on('error', (err: Error) => {
      if (!down) log.warn({ err: err.message }, 'redis connection error');
      down = true;
    });
    redis.on('ready', () => {
      if (down) log.info('redis connection ready again');
      down = false;
    });
    for (const [name, lua] of Object.entries(ROUTING_SCRIPTS)) redis.defineCommand(name, { numberOfKeys: 1, lua });
    try {
      await redis.connect();
    } catch (e) {
      redis.disconnect();
      throw unavailable(`cannot connect to Redis at ${options.url}: ${(e as Error).message}`, e);
    }
    return new RedisRoutingTable(redis, routingKeyPrefix(options.namespace), log, settleDelayMs, maxRetained);
  }

  async applyEvents(worker: WorkerId, events: readonly KvCacheEvent[]): Promise<ApplyResult> {
    return (await this.applyEventBatches([{ worker, events }]))[0]!;
  }

  /** One script call (one round trip) for every batch; each batch as `applyEvents` would apply it. */
  async applyEventBatches(batches: readonly WorkerEvents[]): Promise<ApplyResult[]> {
    if (batches.length === 0) return [];
    const args: (string | number)[] = [Date.now(), DEFAULT_GC_BUDGET];
    for (const { worker, events } of batches) {
      checkEvents(events);
      const at = args.length;
      args.push(worker, 0);
      for (const e of events) {
        const d = e.data;
        if (d.type === 'stored') {
          args.push(e.event_id, 's', d.blocks.length);
          for (const b of d.blocks) args.push(b.block_hash);
        } else if (d.type === 'removed') {
          args.push(e.event_id, 'r', d.block_hashes.length);
          for (const h of d.block_hashes) args.push(h);
        } else {
          args.push(e.event_id, 'c', 0);
        }
      }
      args[at + 1] = args.length - at - 2;
    }
    const replies = (await this.call('syApplyEvents', args)) as [string, number, number, number?, number?][];
    if (!Array.isArray(replies) || replies.length !== batches.length) throw internal(`redis syApplyEvents: ${batches.length} batches, ${Array.isArray(replies) ? replies.length : typeof replies} results`);
    return replies.map((r) => (r[0] === 'ok' ? { status: 'ok', applied: r[1], lastEventId: r[2] } : { status: 'gap', applied: r[1], lastEventId: r[2], expected: r[3]!, got: r[4]! }));
  }

  async replaceWorker(worker: WorkerId, snapshot: KvSnapshot): Promise<void> {
    checkSnapshot(snapshot);
    const last = snapshot.last_event_id;
    const blocks = snapshot.blocks;
    let gen = '';
    let start = 0;
    const token = randomUUID(); // owns the staging (redis-routing-scripts.ts, STAGE)
    // At least one call (an empty snapshot still swaps); every call but the last only stages.
    do {
      const end = Math.min(start + SNAPSHOT_CHUNK, blocks.length);
      const commit = end >= blocks.length;
      const args: (string | number)[] = [gen, Date.now(), STAGING_TTL_MS, commit ? 1 : 0, worker, last, DEFAULT_GC_BUDGET, token];
      for (let i = start; i < end; i++) args.push(blocks[i]!.block_hash);
      gen = String(await this.call('syStage', args));
      start = end;
    } while (start < blocks.length);
  }

  async removeWorker(worker: WorkerId): Promise<void> {
    await this.call('syRemoveWorker', [worker, Date.now(), DEFAULT_GC_BUDGET]);
  }

  async lastEventId(worker: WorkerId): Promise<number> {
    return ((await this.call('syWorkerState', [worker])) as [number, number])[0];
  }

  async blockCount(worker: WorkerId): Promise<number> {
    return ((await this.call('syWorkerState', [worker])) as [number, number])[1];
  }

  async selectAndReserve(request: RouteRequest): Promise<RouteDecision> {
    checkRouteRequest(request);
    const { candidates, blockSize, promptTokens } = request;
    const ttl = request.reservationTtlMs ?? DEFAULT_RESERVATION_TTL_MS;
    const approx = request.approximate === undefined ? -1 : request.approximate.ttlMs;
    // the queued settlements ride along (applied first, so this decision sees this router's releases)
    const { args, waiters, sent } = this.takeQueued();
    args.push(
      request.requestId,
      promptTokens,
      blockSize,
      request.overlapWeight,
      request.scoring ?? 'kv',
      request.temperature,
      request.random,
      Math.floor(request.now),
      Math.floor(ttl),
      Math.floor(approx),
      DEFAULT_PRUNE_BUDGET,
      candidates.length,
    );
    // The candidates' record keys and the bitmap keys go packed (two strings, each key preceded by its
    // length in one byte) unless a key is 128 bytes or longer or not ASCII: hundreds of arguments cost
    // the client far more to encode. Keys are built here, where strings are cheap, not in Lua.
    const hashes = request.blockHashes;
    const records = packKeys(`${this.prefix}w:`, candidates);
    const blocks = records === undefined ? undefined : packKeys(`${this.prefix}b:`, hashes);
    if (records !== undefined && blocks !== undefined) {
      args.push('L', hashes.length, records, blocks);
    } else {
      args.push('', hashes.length);
      for (const c of candidates) args.push(`${this.prefix}w:${c}`);
      for (const hash of hashes) args.push(`${this.prefix}b:${hash}`);
    }
    // The reply is two strings of little-endian doubles: the chosen index and every candidate's overlap,
    // then every candidate's record (generation, active, pending, requests). The (fractional) scores come
    // from the selector the memory twin uses, fed the same inputs: the same doubles the script compared.
    const n = candidates.length;
    let reply: Buffer[];
    try {
      reply = (await this.call('sySelectAndReserveBuffer', args)) as unknown as Buffer[];
    } catch (e) {
      this.settled(waiters, sent, e as SwitchyardError);
      throw e;
    }
    this.settled(waiters, sent, undefined);
    const [r, recs] = Array.isArray(reply) ? reply : [];
    if (!Buffer.isBuffer(r) || !Buffer.isBuffer(recs) || r.length !== 8 * (1 + n) || recs.length !== 32 * n) {
      throw internal(`redis sySelectAndReserve: unexpected reply (${Array.isArray(reply) ? reply.map((x) => (Buffer.isBuffer(x) ? x.length : typeof x)).join(', ') : typeof reply})`);
    }
    const input = { promptTokens, blockSize, overlapWeight: request.overlapWeight, scoring: request.scoring ?? 'kv' } as const;
    const scores: WorkerScore[] = candidates.map((worker, i) =>
      scoreCandidate(
        { worker, overlapBlocks: r.readDoubleLE(8 + 8 * i), activeBlocks: recs.readDoubleLE(8 + 32 * i), prefillTokens: recs.readDoubleLE(16 + 32 * i), treeSize: 0 },
        input,
      ),
    );
    const chosen = scores[r.readDoubleLE(0) - 1]!;
    return { worker: chosen.worker, overlapBlocks: chosen.overlapBlocks, scores };
  }

  /** Queued: applied with this router's next script call, or on its own within `settleDelayMs`. */
  markPrefillDone(requestId: string): Promise<void> {
    return this.enqueue('p', requestId);
  }

  /** Queued like markPrefillDone. */
  release(requestId: string): Promise<void> {
    return this.enqueue('r', requestId);
  }

  async loads(now: number): Promise<ReadonlyMap<WorkerId, WorkerLoad>> {
    const ld = (await this.call('syLoads', [Math.floor(now), DEFAULT_PRUNE_BUDGET])) as string[];
    const out = new Map<WorkerId, WorkerLoad>();
    for (let i = 0; i < ld.length; i += 2) {
      const [activeBlocks, prefillTokens, requests] = ld[i + 1]!.split(' ').map(Number) as [number, number, number];
      out.set(ld[i]!, { activeBlocks, prefillTokens, requests });
    }
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // what is queued (and a batch of what is kept) goes out before the connection closes (its callers
    // are told how it went); what is kept after that is left to expire
    const settled = this.flush();
    this.closed = true;
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    if (this.retained.length > 0) {
      this.log.warn({ dropped: this.retained.length / 2 }, 'routing table closed with settlements that could not reach Redis: their reservations count until they expire');
    }
    try {
      await this.redis.quit();
    } catch {
      this.redis.disconnect();
    }
    await settled;
  }

  private enqueue(kind: 'p' | 'r', requestId: string): Promise<void> {
    if (this.closed) return Promise.reject(unavailable('routing table is closed'));
    return new Promise<void>((resolve, reject) => {
      this.queued.push(kind, requestId);
      this.waiters.push({ resolve, reject });
      if (this.waiters.length >= MAX_QUEUED_SETTLEMENTS) void this.flush();
      else this.settleTimer ??= setTimeout(() => void this.flush(), this.settleDelayMs);
    });
  }

  /**
   * The settlements to send as the leading script arguments (count, then kind and request id each):
   * up to MAX_QUEUED_SETTLEMENTS kept ones, then every queued one; the queue is left empty. `waiters`
   * await the queued ones; `sent` is every pair sent (kept again if the call fails `unavailable`).
   */
  private takeQueued(): { args: (string | number)[]; waiters: SettleWaiter[]; sent: string[] } {
    const retry = this.retained.splice(0, 2 * MAX_QUEUED_SETTLEMENTS);
    const sent = retry.length === 0 ? this.queued : retry.concat(this.queued);
    const args: (string | number)[] = [sent.length / 2, ...sent];
    const waiters = this.waiters;
    this.queued = [];
    this.waiters = [];
    if (this.settleTimer !== undefined) clearTimeout(this.settleTimer);
    this.settleTimer = undefined;
    return { args, waiters, sent };
  }

  /**
   * How the call carrying settlements went. A script that ran applied them first, whatever failed
   * after (a duplicate request id, a script error): only a call that may not have reached Redis
   * (`unavailable`) fails their waiters, and they are kept to be sent again (a retry after one that
   * did reach Redis is a no-op).
   */
  private settled(waiters: readonly SettleWaiter[], sent: string[], err: SwitchyardError | undefined): void {
    if (err === undefined || err.code !== 'unavailable') {
      for (const w of waiters) w.resolve();
      return;
    }
    for (const w of waiters) w.reject(err);
    if (sent.length === 0 || this.closed) return;
    // older than anything kept meanwhile: back in front
    this.retained = this.retained.length === 0 ? sent : sent.concat(this.retained);
    const excess = this.retained.length / 2 - this.maxRetained;
    if (excess > 0) {
      this.retained.splice(0, 2 * excess);
      this.dropped += excess;
      this.droppedNotLogged += excess;
    }
    this.retryTimer ??= setTimeout(() => {
      this.retryTimer = undefined;
      if (this.droppedNotLogged > 0) {
        this.log.warn(
          { dropped: this.droppedNotLogged, droppedTotal: this.dropped, kept: this.retained.length / 2 },
          'routing table: settlements that could not reach Redis dropped (the oldest, past maxRetainedSettlements): their reservations count until they expire',
        );
        this.droppedNotLogged = 0;
      }
      void this.flush();
    }, SETTLEMENT_RETRY_MS);
    this.retryTimer.unref?.();
  }

  /** Send the queued and kept settlements on their own (nothing to ride on); never rejects. */
  private async flush(): Promise<void> {
    if (this.waiters.length === 0 && this.retained.length === 0) return;
    const { args, waiters, sent } = this.takeQueued();
    try {
      await this.call('sySettle', args);
      this.settled(waiters, sent, undefined);
    } catch (e) {
      this.settled(waiters, sent, e as SwitchyardError);
    }
    // more kept than one call carries: the next batch
    if (this.retained.length > 0 && !this.closed && this.retryTimer === undefined) void this.flush();
  }

  /** Run one script; every failure leaves here classified. Queued settlements go out first. */
  private async call(name: RoutingScriptName | `${RoutingScriptName}Buffer`, args: (string | number)[]): Promise<Reply> {
    if (this.closed) throw unavailable('routing table is closed');
    // one connection runs commands in order: these are applied before the call that follows
    if (this.waiters.length > 0 || this.retained.length > 0) void this.flush();
    const fn = (this.redis as unknown as Record<string, ScriptFn>)[name]!;
    try {
      return await fn.call(this.redis, this.seqKey, ...args);
    } catch (e) {
      throw classify(e, name, this.log);
    }
  }
}

/** One-character strings of the codes 0..127: a packed key's length (one byte in UTF-8). */
const LENGTH_CHARS = Array.from({ length: 128 }, (_, i) => String.fromCharCode(i));

/**
 * The keys `prefix + id` for each id, each preceded by its length in one byte (the script's 'Bc0'
 * struct.unpack format); undefined if one is 128 bytes or longer, or not ASCII (its length in
 * characters would not be its length in bytes): those go unpacked.
 */
export function packKeys(prefix: string, ids: readonly string[]): string | undefined {
  if (ids.length === 0) return '';
  const first = ids[0]!.length;
  let out = '';
  if (ids.every((id) => id.length === first)) {
    // one length (block hashes; a model's worker ids): one join
    if (prefix.length + first > 127) return undefined;
    const head = LENGTH_CHARS[prefix.length + first]! + prefix;
    out = head + ids.join(head);
  } else {
    for (const id of ids) {
      const length = prefix.length + id.length;
      if (length > 127) return undefined;
      out += LENGTH_CHARS[length]! + prefix + id;
    }
  }
  return Buffer.byteLength(out) === out.length ? out : undefined;
}

/** Redis reply prefixes meaning "not now" rather than "wrong". */
const TRANSIENT_REPLIES = ['LOADING', 'BUSY', 'MASTERDOWN', 'READONLY', 'CLUSTERDOWN', 'TRYAGAIN', 'OOM', 'NOREPLICAS', 'SY_STAGE_LOST'];

function classify(e: unknown, op: string, log: Logger): SwitchyardError {
  if (e instanceof SwitchyardError) return e;
  const message = e instanceof Error ? e.message : String(e);
  if (e instanceof ReplyError) {
    // script errors arrive as "ERR user_script:…: SY_INVALID …" or plain "SY_INVALID …"
    const m = /\b(SY_[A-Z_]+) (.*)$/.exec(message);
    if (m?.[1] === 'SY_INVALID') return invalidArgument(m[2]!, e);
    if (TRANSIENT_REPLIES.some((p) => message.startsWith(p) || m?.[1] === p)) return unavailable(`redis ${op}: ${message}`, e);
    log.error({ err: message, op }, 'redis routing script failed');
    return internal(`redis ${op}: ${message}`, e);
  }
  // connection closed, not writeable (offline), command timeout, max retries: all "try later"
  return unavailable(`redis ${op}: ${message}`, e);
}
