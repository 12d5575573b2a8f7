// KvExchange: an LlmEngine's side of KV transfer (LlmKvTransfer, kv-transfer.ts) over its
// KvBlockManager and Executor: leases on a prefill-only request's prompt blocks (export) and imports of
// another engine's blocks (decode side). Synchronous and single-threaded like the block manager; the
// only IO is one unref'd timer that expires leases when no traffic does.
//
// Ownership. A lease holds one `pin` reference per prompt block, granted by the engine in the same
// synchronous turn as the request's own blocks were freed (LlmScheduler pins before it frees), so
// nothing can evict them in between. It ends exactly once: `releaseLease`, expiry (checked lazily on
// every lease access, on every engine step — the only check a VirtualClock sees — and by the timer),
// or `close`. An import holds a `pin` on each leading block already resident and the `allocate`
// reference of each block written, until `release` (its request finishing, the caller, or `close`).
//
// Writing. `BlockImport.write` checks every block of the call (its hash is the next missing one, the
// executor accepts its payload) before it allocates anything, then allocates the blocks as full ones
// (`stored` events: they are prefix-cache hits at once) and writes the bytes into their slots in the
// same synchronous turn — the seam of kv-block-manager.ts — so no step can read a slot before it holds
// its KV. A block that became resident meanwhile (computed here by another request) is shared, not
// overwritten: full blocks are immutable.

import { randomUUID } from 'node:crypto';
import { capacityExhausted, describeValue, internal, invalidArgument, notFound } from '@switchyard/common';
import { hashTokenBlocks, type SequenceHash } from './block-hash.js';
import type { Executor } from './executor.js';
import type { BlockRef, FullBlockSpec, KvBlockManager } from './kv-block-manager.js';
import { kvLayoutMismatch, type KvBlockData, type KvImport, type KvLayout, type KvTransferLease, type LlmKvTransfer } from './kv-transfer.js';
import type { Clock } from './timing-model.js';

/** Default lease lifetime (`--kv-transfer-ttl-secs` 30). */
export const DEFAULT_KV_TRANSFER_TTL_MS = 30_000;
/** Longest timer delay Node accepts. */
const MAX_TIMER_MS = 0x7fff_ffff;

export interface KvExchangeOptions {
  readonly kv: KvBlockManager;
  /** Must implement the executor's KV transfer methods (checked by the engine). */
  readonly executor: Executor;
  readonly layout: KvLayout;
  readonly clock: Clock;
  /** Lease lifetime in ms on `clock`; > 0. */
  readonly ttlMs: number;
  /** Longest prompt an import accepts (the engine's max_model_len). */
  readonly maxPromptTokens: number;
}

interface Lease {
  readonly id: string;
  readonly refs: readonly BlockRef[];
  readonly byHash: ReadonlyMap<string, BlockRef>;
  readonly expiresAt: number;
}

export class KvExchange implements LlmKvTransfer {
  readonly layout: KvLayout;
  private readonly kv: KvBlockManager;
  private readonly executor: Executor;
  private readonly clock: Clock;
  private readonly ttlMs: number;
  private readonly maxPromptTokens: number;
  /** Insertion order is expiry order (one TTL, a monotonic clock): the first entry expires first. */
  private readonly leases = new Map<string, Lease>();
  private readonly imports = new Set<BlockImport>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(options: KvExchangeOptions) {
    const { executor } = options;
    if (executor.checkBlock === undefined || executor.readBlock === undefined || executor.writeBlock === undefined) {
      throw internal('KvExchange: the executor does not implement KV block transfer');
    }
    if (!(Number.isFinite(options.ttlMs) && options.ttlMs > 0)) throw invalidArgument(`kvTransferTtlMs must be a number > 0, got ${options.ttlMs}`);
    if (options.layout.blockSize !== options.kv.blockSize) {
      throw invalidArgument(`the executor's KV layout has block size ${options.layout.blockSize}, the engine ${options.kv.blockSize}`);
    }
    this.layout = Object.freeze({ ...options.layout });
    this.kv = options.kv;
    this.executor = executor;
    this.clock = options.clock;
    this.ttlMs = options.ttlMs;
    this.maxPromptTokens = options.maxPromptTokens;
  }

  /**
   * Put `refs` (pins on a finished prefill-only request's prompt blocks, now owned by the exchange)
   * under a new lease. After `close`, the pins are dropped and undefined is returned.
   */
  grant(refs: readonly BlockRef[], seed: number): KvTransferLease | undefined {
    if (this.closed) {
      this.kv.free(refs);
      return undefined;
    }
    this.expire();
    const id = randomUUID();
    const expiresAt = this.clock.now() + this.ttlMs;
    this.leases.set(id, { id, refs, byHash: new Map(refs.map((r) => [r.id, r])), expiresAt });
    this.arm();
    return { leaseId: id, blockHashes: refs.map((r) => r.id), layout: this.layout, seed, expiresAt };
  }

  readBlocks(leaseId: string, hashes: readonly string[]): KvBlockData[] {
    const lease = this.lease(leaseId);
    if (!Array.isArray(hashes)) throw invalidArgument('the block hashes to read must be an array');
    // Each read copies a block: more than the lease holds would only repeat some (and cost memory).
    if (hashes.length > lease.refs.length) throw invalidArgument(`${hashes.length} blocks asked of a lease of ${lease.refs.length}`);
    const refs = hashes.map((h) => {
      const ref = typeof h === 'string' ? lease.byHash.get(h) : undefined;
      if (ref === undefined) throw invalidArgument(`KV transfer lease '${leaseId}' holds no block ${describeValue(h)}`);
      return ref;
    });
    return refs.map((r) => ({ hash: r.id, data: this.executor.readBlock!(r.slot, r.id) }));
  }

  releaseLease(leaseId: string): boolean {
    this.expire();
    const lease = typeof leaseId === 'string' ? this.leases.get(leaseId) : undefined;
    if (lease === undefined) return false;
    this.drop(lease);
    return true;
  }

  beginImport(promptTokenIds: readonly number[], layout: KvLayout): KvImport {
    if (this.closed) throw invalidArgument('the LLM engine is shutting down');
    if (typeof layout !== 'object' || layout === null) throw invalidArgument('a KV layout is required to import blocks');
    const why = kvLayoutMismatch(this.layout, layout);
    if (why !== undefined) throw invalidArgument(why);
    if (!Array.isArray(promptTokenIds) || promptTokenIds.length === 0) throw invalidArgument('the prompt to import blocks for is empty');
    if (promptTokenIds.length >= this.maxPromptTokens) {
      throw invalidArgument(`the prompt to import blocks for has ${promptTokenIds.length} tokens, the context length is ${this.maxPromptTokens}`);
    }
    for (const t of promptTokenIds) {
      if (!Number.isSafeInteger(t) || t < 0) throw invalidArgument(`prompt token ids must be non-negative integers, got ${describeValue(t)}`);
    }
    const h = hashTokenBlocks(promptTokenIds, this.kv.blockSize, null);
    const specs: FullBlockSpec[] = h.sequenceHashes.map((sequenceHash, i) => ({ sequenceHash, localHash: h.localHashes[i]! }));
    const cached = this.kv.findCachedPrefix(h.sequenceHashes);
    const pins = cached === 0 ? [] : this.kv.pin(h.sequenceHashes.slice(0, cached));
    if (pins === null) throw internal('KvExchange: a resident prefix could not be pinned');
    const imp = new BlockImport(this, specs, cached, pins);
    this.imports.add(imp);
    return imp;
  }

  pinnedBlocks(): number {
    this.expire();
    let n = 0;
    for (const l of this.leases.values()) n += l.refs.length;
    for (const i of this.imports) n += i.pinned;
    return n;
  }

  simulatedTransferMs(blocks: number): number {
    return this.executor.simulatedTransferMs?.(blocks) ?? 0;
  }

  /** `x` is a live import of this exchange (not released), so a request may take it over. */
  owns(x: unknown): x is BlockImport {
    return x instanceof BlockImport && this.imports.has(x);
  }

  /** Drop every lease whose time has come (lazily on access, on every engine step, and by the timer). */
  expire(): void {
    const now = this.clock.now();
    for (const lease of this.leases.values()) {
      if (lease.expiresAt > now) break;
      this.drop(lease);
    }
  }

  /** Release every lease and import; later grants are refused (engine shutdown). */
  close(): void {
    this.closed = true;
    for (const lease of [...this.leases.values()]) this.drop(lease);
    for (const imp of [...this.imports]) imp.release();
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  // ---- for BlockImport ----

  /** @internal */ kvManager(): KvBlockManager {
    return this.kv;
  }

  /** @internal */ blockExecutor(): Executor {
    return this.executor;
  }

  /** @internal */ forget(imp: BlockImport): void {
    this.imports.delete(imp);
  }

  private lease(leaseId: string): Lease {
    this.expire();
    const lease = typeof leaseId === 'string' ? this.leases.get(leaseId) : undefined;
    if (lease === undefined) throw notFound(`unknown or expired KV transfer lease ${describeValue(leaseId)}`);
    return lease;
  }

  private drop(lease: Lease): void {
    this.leases.delete(lease.id);
    this.kv.free(lease.refs);
    if (this.leases.size === 0 && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** One timer, for the earliest lease, so pins expire with no traffic at all. */
  private arm(): void {
    if (this.timer !== undefined) return;
    const first = this.leases.values().next();
    if (first.done === true) return;
    const delay = Math.min(Math.max(first.value.expiresAt - this.clock.now(), 0) + 1, MAX_TIMER_MS);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.expire();
      this.arm();
    }, delay);
    this.timer.unref();
  }
}

/** KvImport of one engine (see the file header). */
export class BlockImport implements KvImport {
  readonly missing: readonly string[];
  readonly cachedBlocks: number;
  written = 0;
  /** A request took the import over (LlmEngine.generate): no more writes. */
  inUse = false;
  private released = false;
  private readonly refs: BlockRef[];

  constructor(
    private readonly exchange: KvExchange,
    /** Specs of every full prompt block. */
    private readonly specs: readonly FullBlockSpec[],
    cachedBlocks: number,
    pins: readonly BlockRef[],
  ) {
    this.cachedBlocks = cachedBlocks;
    this.missing = Object.freeze(specs.slice(cachedBlocks).map((s) => s.sequenceHash as string));
    this.refs = [...pins];
  }

  /** References held now. */
  get pinned(): number {
    return this.refs.length;
  }

  get isReleased(): boolean {
    return this.released;
  }

  write(blocks: readonly KvBlockData[]): void {
    if (this.released) throw invalidArgument('the KV import was released');
    if (this.inUse) throw invalidArgument('the KV import was handed to a request: no more blocks can be written');
    if (!Array.isArray(blocks)) throw invalidArgument('the blocks to import must be an array');
    if (blocks.length === 0) return;
    if (this.written + blocks.length > this.missing.length) {
      throw invalidArgument(`${blocks.length} blocks written after ${this.written}, only ${this.missing.length} are missing`);
    }
    const executor = this.exchange.blockExecutor();
    const first = this.cachedBlocks + this.written;
    blocks.forEach((b, i) => {
      const want = this.specs[first + i]!.sequenceHash;
      const hash: unknown = b?.hash;
      if (hash !== want) throw invalidArgument(`imported block ${this.written + i} is ${describeValue(hash)}, expected ${want}`);
      const why = executor.checkBlock!(want, b.data);
      if (why !== undefined) throw invalidArgument(`imported block ${want}: ${why}`);
    });
    // Checked: from here on one synchronous turn, allocate + write (the file header's seam).
    const kv = this.exchange.kvManager();
    const specs = this.specs.slice(first, first + blocks.length);
    const resident = specs.map((s) => kv.findCachedPrefix([s.sequenceHash]) === 1);
    const parent: SequenceHash | null = first === 0 ? null : this.specs[first - 1]!.sequenceHash;
    const got = kv.allocate({ parent, full: specs });
    if (got === null) throw capacityExhausted(`no free KV blocks for ${blocks.length} imported blocks (${kv.available} obtainable)`);
    got.blocks.forEach((ref, i) => {
      if (!resident[i]) executor.writeBlock!(ref.slot, ref.id, blocks[i]!.data);
    });
    this.refs.push(...got.blocks);
    this.written += blocks.length;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.exchange.forget(this);
    this.exchange.kvManager().free(this.refs);
    this.refs.length = 0;
  }
}
