// KvBlockManager: the engine's paged KV cache bookkeeping (vLLM v1 KVCacheManager / Dynamo mocker
// kv_manager.rs, shared/reference/dynamo-design.md §6.2). Pure: no IO, no timers, synchronous.
//
// Model. `numBlocks` physical slots (0..numBlocks-1, where an executor keeps each block's KV). A slot is
// free, or holds a block that is
//   - active: refCount > 0 (some sequence, or a pin, uses it);
//   - inactive: refCount == 0, a full block kept in an LRU pool — this pool IS the prefix cache; its
//     blocks are evicted (least recently freed first) only when a new block needs a slot.
// Full blocks are identified by their SequenceHash (block-hash.ts) and shared between sequences. Partial
// (tail) blocks get a unique PartialBlockId, are never shared and never announced; at refCount 0 they are
// simply freed. active + inactive + free == numBlocks, always.
//
// Ownership. The scheduler owns the BlockRefs it received and must `free` each exactly once (a double
// free of a shared block steals another owner's reference and cannot be detected). Running out of blocks
// is a value (`allocate` returns null, nothing changed); misuse (unknown block, refCount below zero)
// throws `internal`.
//
// KV validity. A full block handed to `allocate` is treated as holding valid KV at once: it becomes a
// prefix-cache hit for others and a `stored` event goes out. So callers hand over as full only blocks
// whose KV exists (prefix-cache hits, imported blocks); LlmScheduler allocates not-yet-computed blocks
// as partial and `promote`s each one after the forward pass that filled it.
//
// Seam for disaggregation (ARCHITECTURE.md flow 5), used by KvExchange (kv-exchange.ts):
//   - pin:    `pin(hashes)` takes an extra reference on resident full blocks so they cannot be evicted
//             while another worker pulls them; `free(refs)` unpins. LlmScheduler pins a prefill-only
//             request's prompt blocks before it frees the request's own, in one synchronous call.
//   - export: the engine reads the KV of the pinned refs' `slot`s.
//   - import: `allocate({ parent, full })` with the remote block hashes gives fresh slots (and `stored`
//             events); the engine writes the received bytes into those slots in the same synchronous
//             step, before any other sequence can be scheduled onto them.

import { internal, invalidArgument } from '@switchyard/common';
import type { LocalBlockHash, SequenceHash } from './block-hash.js';
import type { KvCacheEvent, KvCacheEventData, KvEventSink, KvSnapshot, SnapshotBlock, StoredBlock } from './kv-events.js';

/** Identity of a partial block; never 16 hex digits, so it cannot collide with a SequenceHash. */
export type PartialBlockId = string & { readonly __brand: 'PartialBlockId' };
export type BlockId = SequenceHash | PartialBlockId;

/** One block a sequence holds. A value: the manager never mutates it. */
export interface BlockRef {
  readonly id: BlockId;
  /** Physical slot 0..numBlocks-1 where the executor keeps this block's KV. */
  readonly slot: number;
  /** True for a full block (id is a SequenceHash), false for a partial one. */
  readonly full: boolean;
}

/** A full block to acquire: both hashes from `hashTokenBlocks`. */
export interface FullBlockSpec {
  readonly sequenceHash: SequenceHash;
  readonly localHash: LocalBlockHash;
}

export interface AllocationRequest {
  /** Full blocks in sequence order (a chain). */
  readonly full?: readonly FullBlockSpec[];
  /** The block before `full[0]` in its sequence; null or absent: `full` starts the sequence. */
  readonly parent?: SequenceHash | null;
  /** Fresh partial blocks to append after the full ones. */
  readonly partial?: number;
}

/** What `allocate` hands the scheduler (vLLM's KVCacheBlocks): the only thing crossing the boundary. */
export interface KVCacheBlocks {
  /** The full blocks in request order, then the partial blocks. */
  readonly blocks: readonly BlockRef[];
  /** How many of the full blocks were already resident (prefix-cache or shared hits). */
  readonly cachedBlocks: number;
}

export interface KvBlockStats {
  readonly numBlocks: number;
  readonly active: number;
  readonly inactive: number;
  readonly free: number;
  /** active / numBlocks. */
  readonly usage: number;
  /** Full blocks asked for by `allocate` and `promote` since creation; how many were resident. */
  readonly queriedBlocks: number;
  readonly hitBlocks: number;
  /** hitBlocks / queriedBlocks; 0 before any query. */
  readonly hitRate: number;
}

export interface KvBlockManagerOptions {
  readonly numBlocks: number;
  /** Tokens per block; the manager only records it (hashing is the caller's), for consumers. */
  readonly blockSize: number;
  /** Default true. False: a full block whose last reference goes is dropped (`removed`), not cached. */
  readonly enablePrefixCaching?: boolean;
  /** Receives every KV event; default none. */
  readonly onEvent?: KvEventSink;
}

/** A resident block: the manager's own record (holders see only its `ref`). */
class Block {
  readonly id: BlockId;
  readonly slot: number;
  readonly full: boolean;
  readonly localHash: LocalBlockHash | null;
  readonly parent: SequenceHash | null;
  refCount = 1;
  /** The one BlockRef handed out for this block (a value: every holder shares it). */
  readonly ref: BlockRef;
  /** Neighbours in the inactive pool's LRU list while refCount is 0 (null otherwise, and at the ends). */
  older: Block | null = null;
  newer: Block | null = null;

  /** A block with refCount 1 and its ref. */
  constructor(id: BlockId, slot: number, full: boolean, localHash: LocalBlockHash | null, parent: SequenceHash | null) {
    this.id = id;
    this.slot = slot;
    this.full = full;
    this.localHash = localHash;
    this.parent = parent;
    this.ref = { id, slot, full };
  }
}

const NO_SPECS: readonly FullBlockSpec[] = Object.freeze([]);
/** What `allocate` finds for each full block it is asked for: resident, new, or new earlier in the same request. */
const RESIDENT = 0;
const NEW = 1;
/** A later occurrence, in the same request, of a block the request creates. */
const REPEAT = 2;

export class KvBlockManager {
  readonly numBlocks: number;
  readonly blockSize: number;
  private readonly prefixCaching: boolean;
  private readonly sink: KvEventSink | undefined;
  /** Resident full blocks, active and inactive, in creation order (snapshot order). */
  private readonly fullBlocks = new Map<SequenceHash, Block>();
  /**
   * The block in each used slot (undefined: free), so a ref is resolved by its slot and checked by its
   * id without hashing. Grows as slots are first used.
   */
  private readonly bySlot: (Block | undefined)[] = [];
  private numPartial = 0;
  /**
   * The inactive pool (refCount-0 full blocks) as a list through the blocks themselves, least recently
   * freed first (`oldest` is the next victim): joining, leaving and eviction are O(1), with no hashing.
   */
  private oldest: Block | null = null;
  private newest: Block | null = null;
  private numInactive = 0;
  /** Slots freed after use, most recently freed last (taken first). */
  private readonly freeSlots: number[] = [];
  /** Slots numbered `fresh`..numBlocks-1 were never used: handed out in order after `freeSlots`, so nothing is allocated per slot up front. */
  private fresh = 0;
  private nextPartial = 0;
  private nextEventId = 0;
  private pending: KvCacheEventData[] = [];
  private queried = 0;
  private hits = 0;
  /** `allocate`'s scratch sets (empty between calls; allocate is synchronous and not re-entrant). */
  private readonly scratchMissing = new Set<SequenceHash>();
  private readonly scratchInactiveHits = new Set<SequenceHash>();
  /** `allocate`'s state per full block (RESIDENT / NEW / REPEAT); grown as needed. */
  private scratchState = new Uint8Array(64);
  /** `allocate`'s resident block per full block (RESIDENT entries only; emptied before it returns). */
  private readonly scratchBlocks: (Block | undefined)[] = [];

  constructor(options: KvBlockManagerOptions) {
    const { numBlocks, blockSize } = options;
    for (const [k, v] of [['numBlocks', numBlocks], ['blockSize', blockSize]] as const) {
      if (!Number.isSafeInteger(v) || v <= 0) throw invalidArgument(`${k} must be a positive integer, got ${v}`);
    }
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.prefixCaching = options.enablePrefixCaching ?? true;
    this.sink = options.onEvent;
  }

  /** Number of leading `hashes` resident (active or inactive). Pure: does not touch LRU order. */
  findCachedPrefix(hashes: readonly SequenceHash[]): number {
    let n = 0;
    while (n < hashes.length && this.fullBlocks.has(hashes[n]!)) n++;
    return n;
  }

  /** `findCachedPrefix` over the specs' sequence hashes. */
  findCachedSpecs(specs: readonly FullBlockSpec[]): number {
    let n = 0;
    while (n < specs.length && this.fullBlocks.has(specs[n]!.sequenceHash)) n++;
    return n;
  }

  /** Active blocks / numBlocks (`stats().usage`, without building the stats). */
  get usage(): number {
    return (this.numBlocks - this.numInactive - this.freeCount) / this.numBlocks;
  }

  /** Free slots: freed ones plus never-used ones. */
  private get freeCount(): number {
    return this.freeSlots.length + (this.numBlocks - this.fresh);
  }

  /** Blocks obtainable for new data right now: free slots plus evictable inactive blocks. */
  get available(): number {
    return this.freeCount + this.numInactive;
  }

  /**
   * Admission check: can `n` new blocks be taken while still leaving floor(watermark * numBlocks)
   * obtainable? `watermark` in [0, 1); vLLM and the mocker default to 0.01. Counts inactive blocks as
   * obtainable, so it is conservative about prefix hits (they would need fewer new blocks).
   */
  canAllocate(n: number, watermark = 0): boolean {
    return this.available - n >= Math.floor(watermark * this.numBlocks);
  }

  /**
   * Acquire the requested blocks, all or nothing. Resident full blocks gain a reference (an inactive one
   * leaves the LRU pool); missing full blocks and the partial blocks take free slots, evicting LRU
   * inactive blocks as needed (`removed`). Each contiguous run of newly stored full blocks emits one
   * `stored` event whose parent is the block before the run. Returns null, changing nothing, when not
   * enough blocks are obtainable.
   */
  allocate(request: AllocationRequest): KVCacheBlocks | null {
    const full = request.full ?? NO_SPECS;
    const numPartial = request.partial ?? 0;
    if (!Number.isSafeInteger(numPartial) || numPartial < 0) throw internal(`partial must be a non-negative integer, got ${numPartial}`);
    // Pass 1, read-only: which full blocks are new, and is there room?
    if (this.scratchState.length < full.length) this.scratchState = new Uint8Array(Math.max(full.length, 2 * this.scratchState.length));
    const state = this.scratchState;
    const found = this.scratchBlocks;
    let numMissing = 0;
    let numInactiveHits = 0;
    if (full.length > 0) {
      const missing = this.scratchMissing;
      const inactiveHits = this.scratchInactiveHits;
      for (let i = 0; i < full.length; i++) {
        const h = full[i]!.sequenceHash;
        const b = this.fullBlocks.get(h);
        if (b === undefined) {
          state[i] = missing.has(h) ? REPEAT : NEW;
          missing.add(h);
        } else {
          state[i] = RESIDENT;
          found[i] = b;
          if (b.refCount === 0) inactiveHits.add(h);
        }
      }
      numMissing = missing.size;
      numInactiveHits = inactiveHits.size;
      missing.clear();
      inactiveHits.clear();
    }
    if (numMissing + numPartial > this.available - numInactiveHits) {
      found.length = 0;
      return null;
    }

    // Pass 2: hits first, so eviction below can never take a block this request uses.
    let cached = 0;
    for (let i = 0; i < full.length; i++) {
      if (state[i] !== RESIDENT) continue;
      this.acquire(found[i]!);
      cached++;
    }
    this.queried += full.length;
    this.hits += cached;
    const refs: BlockRef[] = new Array(full.length + numPartial);
    /** The current run of new blocks (null: none open; a list is made only when a run starts). */
    let run: StoredBlock[] | null = null;
    let runParent: SequenceHash | null = null;
    let prev = request.parent ?? null;
    for (let i = 0; i < full.length; i++) {
      const spec = full[i]!;
      const st = state[i];
      let b: Block;
      if (st === NEW) {
        b = this.newBlock(spec.sequenceHash, true, spec.localHash, prev);
        this.fullBlocks.set(spec.sequenceHash, b);
        if (run === null) {
          run = [];
          runParent = prev;
        }
        run.push({ block_hash: spec.sequenceHash, tokens_hash: spec.localHash });
      } else {
        if (run !== null) this.pending.push({ type: 'stored', parent_hash: runParent, blocks: run });
        run = null;
        if (st === RESIDENT) {
          b = found[i]!;
        } else {
          // A later duplicate of a block created earlier in this request: one more reference.
          b = this.fullBlocks.get(spec.sequenceHash)!;
          b.refCount++;
        }
      }
      refs[i] = b.ref;
      prev = spec.sequenceHash;
    }
    if (run !== null) this.pending.push({ type: 'stored', parent_hash: runParent, blocks: run });
    found.length = 0; // (holds no block between calls)
    for (let j = 0; j < numPartial; j++) {
      const id = `p${this.nextPartial++}` as PartialBlockId;
      const b = this.newBlock(id, false, null, null);
      this.numPartial++;
      refs[full.length + j] = b.ref;
    }
    this.flush();
    return { blocks: refs, cachedBlocks: cached };
  }

  /**
   * Take an extra reference on resident full blocks (pin for export; inactive ones are reactivated), all
   * or nothing: null if any is not resident. Release with `free`.
   */
  pin(hashes: readonly SequenceHash[]): BlockRef[] | null {
    const blocks: Block[] = [];
    for (const h of hashes) {
      const b = this.fullBlocks.get(h);
      if (b === undefined) return null;
      blocks.push(b);
    }
    for (const b of blocks) this.acquire(b);
    return blocks.map((b) => b.ref);
  }

  /**
   * Drop one reference per ref. Released in reverse order, so when a sequence frees its chain the tail
   * blocks become least recently used and are evicted before the shared prefix (vLLM does the same).
   * A full block at refCount 0 joins the prefix cache (or is dropped with `removed` when caching is
   * off); a partial block at 0 is freed.
   */
  free(refs: readonly BlockRef[]): void {
    for (let i = refs.length - 1; i >= 0; i--) {
      const b = this.resolve(refs[i]!);
      if (b.refCount <= 0) throw internal(`KV block ${b.id} freed more often than acquired`);
      if (--b.refCount > 0) continue;
      if (!b.full) {
        this.numPartial--;
        this.freeSlot(b.slot);
      } else if (this.prefixCaching) {
        this.joinInactive(b);
      } else {
        this.fullBlocks.delete(b.id as SequenceHash);
        this.freeSlot(b.slot);
        this.pending.push({ type: 'removed', block_hashes: [b.id as SequenceHash] });
      }
    }
    this.flush();
  }

  /**
   * A partial block `ref` has been filled: it becomes the full block `spec` whose parent is `parent`.
   * If that full block is already resident, the caller's reference moves to it and the partial's slot
   * is freed (the returned ref then has a different slot; its KV is identical by construction);
   * otherwise the partial's slot is kept and `stored` is emitted. Returns the ref that replaces `ref`.
   */
  promote(ref: BlockRef, spec: FullBlockSpec, parent: SequenceHash | null): BlockRef {
    const p = this.resolve(ref);
    if (p.full) throw internal(`KV block ${p.id} is already full`);
    if (p.refCount !== 1) throw internal(`partial KV block ${p.id} has refCount ${p.refCount}, expected 1`);
    this.numPartial--;
    let b = this.fullBlocks.get(spec.sequenceHash);
    this.queried++;
    if (b !== undefined) {
      this.hits++;
      this.acquire(b);
      this.freeSlot(p.slot);
    } else {
      b = new Block(spec.sequenceHash, p.slot, true, spec.localHash, parent);
      this.bySlot[p.slot] = b;
      this.fullBlocks.set(spec.sequenceHash, b);
      this.pending.push({ type: 'stored', parent_hash: parent, blocks: [{ block_hash: spec.sequenceHash, tokens_hash: spec.localHash }] });
    }
    this.flush();
    return b.ref;
  }

  /**
   * Drop every block and emit `cleared` (cache reset). Only when nothing is active: returns false and
   * changes nothing if some block is still referenced.
   */
  reset(): boolean {
    if (this.fullBlocks.size - this.numInactive + this.numPartial > 0) return false;
    this.fullBlocks.clear();
    this.bySlot.length = 0;
    this.oldest = this.newest = null;
    this.numInactive = 0;
    this.freeSlots.length = 0;
    this.fresh = 0;
    this.pending.push({ type: 'cleared' });
    this.flush();
    return true;
  }

  /** Every resident full block, for consumers that lost events (see KvSnapshot). */
  snapshot(): KvSnapshot {
    const blocks: SnapshotBlock[] = [];
    for (const b of this.fullBlocks.values()) {
      blocks.push({ block_hash: b.id as SequenceHash, tokens_hash: b.localHash!, parent_hash: b.parent });
    }
    return { last_event_id: this.nextEventId - 1, blocks, partial_blocks: this.numPartial };
  }

  stats(): KvBlockStats {
    const inactive = this.numInactive;
    const free = this.freeCount;
    const active = this.numBlocks - inactive - free;
    return {
      numBlocks: this.numBlocks,
      active,
      inactive,
      free,
      usage: this.usage,
      queriedBlocks: this.queried,
      hitBlocks: this.hits,
      hitRate: this.queried === 0 ? 0 : this.hits / this.queried,
    };
  }

  /** Reference count of a resident block (0: inactive), or undefined if not resident. For tests. */
  refCount(id: BlockId): number | undefined {
    return (this.fullBlocks.get(id as SequenceHash) ?? this.bySlot.find((b) => b?.id === id))?.refCount;
  }

  /** Inactive full blocks, next victim first. For tests and diagnostics. */
  lruOrder(): SequenceHash[] {
    const out: SequenceHash[] = [];
    for (let b = this.oldest; b !== null; b = b.newer) out.push(b.id as SequenceHash);
    return out;
  }

  /** Check every internal invariant; throws `internal` on the first broken one. For tests. */
  assertInvariants(): void {
    const slots = new Set<number>(this.freeSlots);
    if (slots.size !== this.freeSlots.length) throw internal('duplicate free slot');
    for (const s of this.freeSlots) {
      if (s >= this.fresh) throw internal(`free slot ${s} was never used`);
      if (this.bySlot[s] !== undefined) throw internal(`free slot ${s} holds block ${this.bySlot[s]!.id}`);
    }
    const lru = new Set<Block>();
    for (let b = this.oldest, older: Block | null = null; b !== null; older = b, b = b.newer) {
      if (b.older !== older || lru.has(b)) throw internal(`inactive list broken at ${b.id}`);
      lru.add(b);
    }
    if (lru.size !== this.numInactive) throw internal(`inactive count ${this.numInactive} != ${lru.size} listed`);
    const check = (b: Block): void => {
      if (slots.has(b.slot)) throw internal(`slot ${b.slot} used twice`);
      slots.add(b.slot);
      if (this.bySlot[b.slot] !== b) throw internal(`slot ${b.slot} does not record block ${b.id}`);
      if (b.refCount < 0) throw internal(`negative refCount on ${b.id}`);
    };
    for (const b of this.fullBlocks.values()) {
      check(b);
      if ((b.refCount === 0) !== lru.has(b)) throw internal(`block ${b.id} inactive state wrong`);
    }
    let partial = 0;
    for (const b of this.bySlot) {
      if (b === undefined || b.full) continue;
      partial++;
      check(b);
      if (b.refCount === 0) throw internal(`partial block ${b.id} unreferenced`);
    }
    if (partial !== this.numPartial) throw internal(`partial count ${this.numPartial} != ${partial} held`);
    for (const s of slots) if (s >= this.fresh) throw internal(`slot ${s} beyond the used ones`);
    if (slots.size !== this.fresh) throw internal(`slots accounted ${slots.size} != ${this.fresh} used`);
  }

  private acquire(b: Block): void {
    if (b.refCount === 0) this.leaveInactive(b);
    b.refCount++;
  }

  /** A full block whose last reference went joins the inactive pool as its most recently freed. */
  private joinInactive(b: Block): void {
    b.older = this.newest;
    b.newer = null;
    if (this.newest === null) this.oldest = b;
    else this.newest.newer = b;
    this.newest = b;
    this.numInactive++;
  }

  private leaveInactive(b: Block): void {
    if (b.older === null) this.oldest = b.newer;
    else b.older.newer = b.newer;
    if (b.newer === null) this.newest = b.older;
    else b.newer.older = b.older;
    b.older = b.newer = null;
    this.numInactive--;
  }

  private freeSlot(slot: number): void {
    this.bySlot[slot] = undefined;
    this.freeSlots.push(slot);
  }

  /** Take a slot (evicting the LRU inactive block if none is free) and build a block with refCount 1. */
  private newBlock(id: BlockId, full: boolean, localHash: LocalBlockHash | null, parent: SequenceHash | null): Block {
    let slot = this.freeSlots.pop() ?? (this.fresh < this.numBlocks ? this.fresh++ : undefined);
    if (slot === undefined) {
      const victim = this.oldest;
      if (victim === null) throw internal('KV block manager: no slot although capacity was checked');
      this.leaveInactive(victim);
      const hash = victim.id as SequenceHash;
      this.fullBlocks.delete(hash);
      this.pending.push({ type: 'removed', block_hashes: [hash] });
      slot = victim.slot;
    }
    const b = new Block(id, slot, full, localHash, parent);
    this.bySlot[slot] = b;
    return b;
  }

  /** The block `ref` names: the one in its slot, with its id and kind (throws internal if there is none). */
  private resolve(ref: BlockRef): Block {
    const b = this.bySlot[ref.slot];
    if (b === undefined || (b.ref !== ref && (b.id !== ref.id || b.full !== ref.full))) {
      throw internal(`unknown KV block ${ref.id} (slot ${ref.slot})`);
    }
    return b;
  }

  /** Number the pending events and hand them to the sink, after all state changes of the call. */
  private flush(): void {
    const out = this.pending;
    if (out.length === 0) return;
    if (out.length === 1) {
      // the common case (one promotion, one admission): nothing to merge, and the list is kept for the
      // next call (emptied before the sink runs, so a sink that calls back in starts from nothing)
      const event: KvCacheEvent = { event_id: this.nextEventId++, data: out[0]! };
      out.length = 0;
      if (this.sink !== undefined) this.sink(event);
      return;
    }
    this.pending = [];
    // Consecutive evictions within one call travel as one `removed` event (its hashes gathered in one
    // list: linear in the evictions of the call).
    const merged: KvCacheEventData[] = [];
    let run: SequenceHash[] | undefined;
    for (const d of out) {
      if (d.type !== 'removed') {
        run = undefined;
        merged.push(d);
      } else if (run !== undefined) {
        for (const h of d.block_hashes) run.push(h);
      } else {
        run = [...d.block_hashes];
        merged.push({ type: 'removed', block_hashes: run });
      }
    }
    const events: KvCacheEvent[] = merged.map((data) => ({ event_id: this.nextEventId++, data }));
    if (this.sink !== undefined) for (const e of events) this.sink(e);
  }
}

