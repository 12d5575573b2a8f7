import { describe, expect, it } from 'vitest';
import { hashTokenBlocks, type SequenceHash } from './block-hash.js';
import { KvBlockManager, type BlockRef, type FullBlockSpec, type KvBlockManagerOptions } from './kv-block-manager.js';
import { applyKvEvent, type KvCacheEvent, type SnapshotBlock } from './kv-events.js';

const BS = 4;

/** Full-block specs of a token sequence `[base, base+1, ...]` of `blocks` blocks. */
function specs(base: number, blocks: number): FullBlockSpec[] {
  const toks = Array.from({ length: blocks * BS }, (_, i) => base + i);
  const h = hashTokenBlocks(toks, BS);
  return h.sequenceHashes.map((sequenceHash, i) => ({ sequenceHash, localHash: h.localHashes[i]! }));
}

function setup(numBlocks: number, extra: Partial<KvBlockManagerOptions> = {}) {
  const events: KvCacheEvent[] = [];
  const m = new KvBlockManager({ numBlocks, blockSize: BS, onEvent: (e) => events.push(e), ...extra });
  return { m, events };
}

const hashes = (s: FullBlockSpec[]): SequenceHash[] => s.map((x) => x.sequenceHash);

describe('KvBlockManager', () => {
  it('holds a billion blocks without allocating them: slots are numbered as they are first used', () => {
    const { m } = setup(1_000_000_000);
    const a = m.allocate({ full: specs(0, 2), partial: 1 })!;
    expect(a.blocks.map((b) => b.slot)).toEqual([0, 1, 2]);
    expect(m.stats()).toMatchObject({ numBlocks: 1_000_000_000, active: 3, inactive: 0, free: 999_999_997 });
    m.free(a.blocks);
    // The freed partial slot is reused before a never-used one, as before.
    expect(m.allocate({ partial: 1 })!.blocks[0]!.slot).toBe(2);
    m.assertInvariants();
    expect(m.canAllocate(999_999_000, 0.01)).toBe(false);
    expect(m.canAllocate(900_000_000, 0.01)).toBe(true);
  });

  it('never exceeds capacity; running out is null and changes nothing', () => {
    const { m, events } = setup(5);
    const a = m.allocate({ full: specs(0, 3), partial: 1 });
    expect(a?.blocks.map((b) => b.slot)).toEqual([0, 1, 2, 3]);
    expect(m.stats()).toMatchObject({ active: 4, inactive: 0, free: 1 });
    const before = { stats: m.stats(), events: events.length, snap: m.snapshot() };
    expect(m.allocate({ full: specs(100, 2) })).toBeNull();
    expect(m.allocate({ partial: 2 })).toBeNull();
    expect({ stats: m.stats(), events: events.length, snap: m.snapshot() }).toEqual(before);
    expect(m.allocate({ partial: 1 })).not.toBeNull();
    m.assertInvariants();
  });

  it('shares full blocks by hash with reference counts; the last free makes them inactive', () => {
    const { m } = setup(10);
    const s = specs(0, 3);
    const a = m.allocate({ full: s })!;
    const b = m.allocate({ full: s.slice(0, 2), partial: 1 })!;
    expect(b.cachedBlocks).toBe(2);
    expect(b.blocks.slice(0, 2)).toEqual(a.blocks.slice(0, 2));
    expect(s.map((x) => m.refCount(x.sequenceHash))).toEqual([2, 2, 1]);
    m.free(a.blocks);
    expect(s.map((x) => m.refCount(x.sequenceHash))).toEqual([1, 1, 0]);
    m.free(b.blocks);
    expect(s.map((x) => m.refCount(x.sequenceHash))).toEqual([0, 0, 0]);
    expect(m.refCount(b.blocks[2]!.id)).toBeUndefined(); // the partial block is gone
    expect(m.stats()).toMatchObject({ active: 0, inactive: 3, free: 7 });
    expect(() => m.free(a.blocks)).toThrow(/freed more often|unknown/);
    m.assertInvariants();
  });

  it('evicts least recently freed first, a freed chain tail before its prefix', () => {
    const { m, events } = setup(6);
    const a = specs(0, 3);
    const b = specs(100, 3);
    const ra = m.allocate({ full: a })!;
    const rb = m.allocate({ full: b })!;
    m.free(ra.blocks);
    m.free(rb.blocks);
    expect(m.lruOrder()).toEqual([a[2], a[1], a[0], b[2], b[1], b[0]].map((x) => x!.sequenceHash));
    events.length = 0;
    m.allocate({ partial: 4 });
    expect(events).toEqual([{ event_id: 2, data: { type: 'removed', block_hashes: [a[2], a[1], a[0], b[2]].map((x) => x!.sequenceHash) } }]);
    expect(m.findCachedPrefix(hashes(b))).toBe(2);
    expect(m.findCachedPrefix(hashes(a))).toBe(0);
    m.assertInvariants();
  });

  it('a re-used block moves to the most recently used end', () => {
    const { m } = setup(4);
    const a = specs(0, 1);
    const b = specs(50, 1);
    m.free(m.allocate({ full: a })!.blocks);
    m.free(m.allocate({ full: b })!.blocks);
    m.free(m.allocate({ full: a })!.blocks); // a hit: a is now the newest
    expect(m.lruOrder()).toEqual([b[0]!.sequenceHash, a[0]!.sequenceHash]);
  });

  it('emits stored only for new blocks, with parents, and strictly increasing ids', () => {
    const { m, events } = setup(20);
    const s = specs(0, 4);
    m.allocate({ full: s.slice(0, 2) });
    m.allocate({ full: s }); // blocks 0,1 are re-hits: only 2,3 are stored, under parent 1
    m.allocate({ full: s }); // all hits: nothing
    expect(events.map((e) => e.data)).toEqual([
      { type: 'stored', parent_hash: null, blocks: s.slice(0, 2).map((x) => ({ block_hash: x.sequenceHash, tokens_hash: x.localHash })) },
      { type: 'stored', parent_hash: s[1]!.sequenceHash, blocks: s.slice(2).map((x) => ({ block_hash: x.sequenceHash, tokens_hash: x.localHash })) },
    ]);
    expect(events.map((e) => e.event_id)).toEqual([0, 1]);
    expect(m.stats()).toMatchObject({ queriedBlocks: 10, hitBlocks: 6 });
  });

  it('splits stored events around a resident block in the middle of a chain', () => {
    const { m, events } = setup(20);
    const s = specs(0, 5);
    m.allocate({ full: [s[2]!], parent: s[1]!.sequenceHash });
    events.length = 0;
    const r = m.allocate({ full: s })!;
    expect(r.cachedBlocks).toBe(1);
    expect(events.map((e) => [e.data.type === 'stored' && e.data.parent_hash, e.data.type === 'stored' && e.data.blocks.length])).toEqual([
      [null, 2],
      [s[2]!.sequenceHash, 2],
    ]);
  });

  it('counts a block repeated within one request twice but stores it once', () => {
    const { m, events } = setup(4);
    const [x] = specs(0, 1);
    const r = m.allocate({ full: [x!, x!] })!;
    expect(r.blocks[0]).toEqual(r.blocks[1]);
    expect(m.refCount(x!.sequenceHash)).toBe(2);
    expect(events.map((e) => e.data.type === 'stored' && e.data.blocks.length)).toEqual([1]);
    m.free(r.blocks);
    expect(m.stats()).toMatchObject({ active: 0, inactive: 1 });
  });

  it('finds a cached prefix after the owner frees it, and re-hits it without events', () => {
    const { m, events } = setup(8);
    const s = specs(7, 3);
    m.free(m.allocate({ full: s, partial: 1 })!.blocks);
    expect(m.findCachedPrefix(hashes(specs(7, 5)))).toBe(3);
    const n = events.length;
    const again = m.allocate({ full: s })!;
    expect(again.cachedBlocks).toBe(3);
    expect(events.length).toBe(n);
    expect(m.stats()).toMatchObject({ active: 3, inactive: 0 });
  });

  it('promotes a filled partial block: new → stored keeping its slot; existing → ref moves, slot freed', () => {
    const { m, events } = setup(8);
    const s = specs(0, 2);
    const r = m.allocate({ full: [s[0]!], partial: 1 })!;
    const p = r.blocks[1]!;
    const full = m.promote(p, s[1]!, s[0]!.sequenceHash);
    expect(full).toEqual({ id: s[1]!.sequenceHash, slot: p.slot, full: true });
    expect(events.at(-1)!.data).toEqual({ type: 'stored', parent_hash: s[0]!.sequenceHash, blocks: [{ block_hash: s[1]!.sequenceHash, tokens_hash: s[1]!.localHash }] });
    const other = m.allocate({ full: [s[0]!], partial: 1 })!;
    const n = events.length;
    const moved = m.promote(other.blocks[1]!, s[1]!, s[0]!.sequenceHash);
    expect(moved.slot).toBe(p.slot);
    expect(events.length).toBe(n);
    expect(m.refCount(s[1]!.sequenceHash)).toBe(2);
    expect(m.stats().free).toBe(6);
    expect(() => m.promote(moved, s[1]!, null)).toThrow(/already full/);
    m.assertInvariants();
  });

  it('applies the watermark to admission', () => {
    const { m } = setup(100);
    expect(m.canAllocate(99, 0.01)).toBe(true);
    expect(m.canAllocate(100, 0.01)).toBe(false);
    m.free(m.allocate({ full: specs(0, 50) })!.blocks); // inactive blocks are still obtainable
    expect(m.canAllocate(99, 0.01)).toBe(true);
  });

  it('pins resident blocks against eviction, all or nothing', () => {
    const { m } = setup(3);
    const s = specs(0, 3);
    m.free(m.allocate({ full: s })!.blocks);
    expect(m.pin([...hashes(s), ...hashes(specs(99, 1))])).toBeNull();
    const pinned = m.pin(hashes(s).slice(0, 2))!;
    expect(m.allocate({ partial: 2 })).toBeNull(); // only s[2] is evictable
    expect(m.allocate({ partial: 1 })).not.toBeNull();
    m.free(pinned);
    expect(m.findCachedPrefix(hashes(s))).toBe(2);
    m.assertInvariants();
  });

  it('reset clears only an idle cache and emits cleared', () => {
    const { m, events } = setup(4);
    const r = m.allocate({ full: specs(0, 2) })!;
    expect(m.reset()).toBe(false);
    m.free(r.blocks);
    expect(m.reset()).toBe(true);
    expect(events.at(-1)!.data).toEqual({ type: 'cleared' });
    expect(m.snapshot()).toEqual({ last_event_id: events.at(-1)!.event_id, blocks: [], partial_blocks: 0 });
    m.assertInvariants();
  });

  it('with prefix caching off, a full block is removed when its last reference goes', () => {
    const { m, events } = setup(4, { enablePrefixCaching: false });
    const s = specs(0, 2);
    m.free(m.allocate({ full: s })!.blocks);
    expect(events.at(-1)!.data).toEqual({ type: 'removed', block_hashes: [s[1]!.sequenceHash, s[0]!.sequenceHash] });
    expect(m.stats()).toMatchObject({ active: 0, inactive: 0, free: 4 });
  });

  it('snapshot equals the events replayed, through a random workload', () => {
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const { m, events } = setup(40);
    const live: BlockRef[][] = [];
    let lastId = -1;
    for (let step = 0; step < 3000; step++) {
      const op = rand(10);
      if (op < 5) {
        // prompts drawn from 6 shared prefixes of random length
        const prefix = specs(1000 * rand(6), 1 + rand(6));
        const r = m.allocate({ full: prefix, partial: rand(2) });
        if (r !== null) live.push([...r.blocks]);
      } else if (op < 8 && live.length > 0) {
        const [refs] = live.splice(rand(live.length), 1);
        m.free(refs!);
      } else if (op === 8 && live.length > 0) {
        const refs = live[rand(live.length)]!;
        const i = refs.findIndex((b) => !b.full);
        if (i >= 0) refs[i] = m.promote(refs[i]!, specs(50_000 + rand(30), 1)[0]!, null);
      } else if (op === 9 && live.length === 0) {
        m.reset();
      }
      m.assertInvariants();
      for (const e of events.slice(lastId + 1)) {
        expect(e.event_id).toBe(lastId + 1);
        lastId = e.event_id;
      }
    }
    const view = new Map<SequenceHash, SnapshotBlock>();
    for (const e of events) applyKvEvent(view, e);
    const snap = m.snapshot();
    expect(snap.last_event_id).toBe(events.length - 1);
    const byHash = (a: SnapshotBlock, b: SnapshotBlock): number => a.block_hash.localeCompare(b.block_hash);
    expect([...view.values()].sort(byHash)).toEqual([...snap.blocks].sort(byHash));
    expect(events.length).toBeGreaterThan(100);
    expect(m.stats().hitRate).toBeGreaterThan(0);
  });
});
