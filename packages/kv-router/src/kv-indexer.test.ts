import { describe, expect, it } from 'vitest';
import { applyKvEvent, type KvCacheEvent, type KvSnapshot, type LocalBlockHash, type SequenceHash, type SnapshotBlock } from '@switchyard/llm';
import { KvIndexer, MAX_HASHES_PER_TABLE_CALL } from './kv-indexer.js';
import { MemoryRoutingTable } from './memory-routing-table.js';
import { stored } from './testing/conformance.js';

describe('KvIndexer', () => {
  it("gathers the batches of a turn into one table call; each worker gets its own result, a gap resyncs only its worker", async () => {
    const table = new MemoryRoutingTable();
    const calls: number[] = [];
    const many = table.applyEventBatches.bind(table);
    table.applyEventBatches = (batches) => (calls.push(batches.length), many(batches));
    const h = (n: number) => n.toString(16).padStart(16, '0') as never;
    let fetches = 0;
    const indexer = new KvIndexer({ table, fetchSnapshot: async () => (fetches++, { last_event_id: 3, blocks: [], partial_blocks: 0 }) });
    const results = await Promise.all([
      indexer.apply('a', [stored(0, [h(1)])]),
      indexer.apply('b', [stored(0, [h(2)]), stored(1, [h(3)], h(2))]),
      indexer.apply('c', [stored(2, [h(4)])]), // a gap: c is resynced (snapshot up to 3), nothing else is
      indexer.apply('a', [stored(1, [h(5)], h(1))]), // a's second batch waits for its first (same worker, next call)
    ]);
    expect(results).toEqual([
      { applied: 1, gap: false, resynced: false },
      { applied: 2, gap: false, resynced: false },
      { applied: 0, gap: true, resynced: true },
      { applied: 1, gap: false, resynced: false },
    ]);
    expect(calls).toEqual([3, 1]);
    expect(fetches).toBe(1);
    expect(await table.lastEventId('a')).toBe(1);
    expect(await table.lastEventId('c')).toBe(3);
    expect(indexer.stats()).toMatchObject({ batches: 4, tableCalls: 2, gaps: 1, resyncs: 1 });
    // a malformed batch fails alone; a failed call fails each batch it carried, and the next turn works
    const bad = indexer.apply('d', [stored(-1, [h(6)])]);
    const good = indexer.apply('e', [stored(0, [h(6)])]);
    await expect(bad).rejects.toThrow(/event_id/);
    expect(await good).toMatchObject({ applied: 1 });
    table.applyEventBatches = async () => {
      throw new Error('redis down');
    };
    await expect(Promise.all([indexer.apply('f', [stored(0, [h(7)])]), indexer.apply('g', [stored(0, [h(7)])])])).rejects.toThrow('redis down');
    table.applyEventBatches = () => {
      throw new Error('thrown, not rejected');
    };
    await expect(indexer.apply('f', [stored(0, [h(7)])])).rejects.toThrow('thrown, not rejected');
    table.applyEventBatches = async () => [];
    await expect(indexer.apply('f', [stored(0, [h(7)])])).rejects.toThrow('0 results for 1 batches');
    table.applyEventBatches = (batches) => (calls.push(batches.length), many(batches));
    expect(await indexer.apply('f', [stored(0, [h(7)])])).toMatchObject({ applied: 1 });
  });

  it('a turn with more block hashes than one call carries is split; a batch larger than that goes alone', async () => {
    const table = new MemoryRoutingTable();
    const calls: number[] = [];
    const many = table.applyEventBatches.bind(table);
    table.applyEventBatches = (batches) => (calls.push(batches.length), many(batches));
    const indexer = new KvIndexer({ table, fetchSnapshot: async () => ({ last_event_id: -1, blocks: [], partial_blocks: 0 }) });
    const blocks = (from: number, n: number) => Array.from({ length: n }, (_, i) => (from + i).toString(16).padStart(16, '0') as never);
    const third = Math.floor(MAX_HASHES_PER_TABLE_CALL / 3);
    await Promise.all([
      indexer.apply('a', [stored(0, blocks(0, third))]),
      indexer.apply('b', [stored(0, blocks(0, third))]),
      indexer.apply('c', [stored(0, blocks(0, third))]), // the third does not fit with the other two
      indexer.apply('d', [stored(0, blocks(0, MAX_HASHES_PER_TABLE_CALL + 10))]),
      indexer.apply('e', [stored(0, blocks(0, 1))]),
    ]);
    expect(calls).toEqual([2, 1, 1, 1]);
    expect(await table.blockCount('d')).toBe(MAX_HASHES_PER_TABLE_CALL + 10);
  });

  it('applies batches, skips redeliveries, resyncs a gap from the snapshot', async () => {
    const table = new MemoryRoutingTable();
    let fetches = 0;
    const snap: { current: KvSnapshot } = { current: { last_event_id: -1, blocks: [], partial_blocks: 0 } };
    const indexer = new KvIndexer({ table, fetchSnapshot: async () => (fetches++, snap.current) });
    const h = (n: number) => n.toString(16).padStart(16, '0') as never;

    expect(await indexer.apply('w', [stored(0, [h(1)]), stored(1, [h(2)], h(1))])).toEqual({ applied: 2, gap: false, resynced: false });
    expect(await indexer.apply('w', [stored(1, [h(2)], h(1))])).toEqual({ applied: 0, gap: false, resynced: false });
    // Events 2..4 lost; the worker's snapshot reflects up to 4; the batch carries 4 and 5.
    snap.current = { last_event_id: 4, blocks: [h(1), h(7)].map((b: never) => ({ block_hash: b, tokens_hash: b, parent_hash: null })), partial_blocks: 0 };
    expect(await indexer.apply('w', [stored(4, [h(7)]), stored(5, [h(8)])])).toEqual({ applied: 1, gap: true, resynced: true });
    expect(fetches).toBe(1);
    expect(await table.lastEventId('w')).toBe(5);
    expect(await table.blockCount('w')).toBe(3);
    expect(indexer.stats()).toMatchObject({ batches: 3, gaps: 1, resyncs: 1, duplicatesSkipped: 1, resyncFailures: 0 });
  });

  it('a flushed table resyncs at the next batch; a failed fetch is counted and retried later', async () => {
    let table = new MemoryRoutingTable();
    let fail = true;
    const h = (n: number) => n.toString(16).padStart(16, '0') as never;
    const snapshot: KvSnapshot = { last_event_id: 9, blocks: [{ block_hash: h(1), tokens_hash: h(1), parent_hash: null }], partial_blocks: 0 };
    const make = () =>
      new KvIndexer({
        table,
        fetchSnapshot: async () => {
          if (fail) throw new Error('worker unreachable');
          return snapshot;
        },
      });
    let indexer = make();
    expect(await indexer.apply('w', [stored(10, [h(2)], h(1))])).toEqual({ applied: 0, gap: true, resynced: false });
    expect(indexer.stats().resyncFailures).toBe(1);
    fail = false;
    expect(await indexer.apply('w', [stored(11, [h(3)], h(2))])).toEqual({ applied: 0, gap: true, resynced: true });
    // Event 10 was lost with the failed attempt: the table now waits for 10 and the next batch resyncs again.
    table = new MemoryRoutingTable(); // "FLUSHALL"
    indexer = make();
    const r = await indexer.apply('w', [stored(12, [h(4)])]);
    expect(r.resynced).toBe(true);
    expect(await table.lastEventId('w')).toBe(9);
  });

  it('serialises per worker: a resync and the batches behind it never interleave', async () => {
    const table = new MemoryRoutingTable();
    const h = (n: number) => n.toString(16).padStart(16, '0') as never;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const indexer = new KvIndexer({
      table,
      fetchSnapshot: async () => {
        await gate;
        return { last_event_id: 0, blocks: [{ block_hash: h(1), tokens_hash: h(1), parent_hash: null }], partial_blocks: 0 };
      },
    });
    const resync = indexer.resync('w');
    const batch = indexer.apply('w', [stored(1, [h(2)], h(1))]);
    release();
    expect(await resync).toBe(true);
    expect(await batch).toEqual({ applied: 1, gap: false, resynced: false });
    expect(await table.blockCount('w')).toBe(2);
    await indexer.forget('w');
    expect(await table.lastEventId('w')).toBe(-1);
  });
});

describe('KvIndexer against a producer', () => {
  /** A worker's block manager in miniature: its event stream and the view it would snapshot. */
  function producer() {
    const view = new Map<SequenceHash, SnapshotBlock>();
    let next = 0;
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const h = (n: number) => n.toString(16).padStart(16, '0') as SequenceHash;
    const emit = (data: KvCacheEvent['data']): KvCacheEvent => {
      const e = { event_id: next++, data };
      applyKvEvent(view, e);
      return e;
    };
    return {
      view,
      batch(size: number): KvCacheEvent[] {
        return Array.from({ length: size }, () => {
          const r = rand(20);
          if (r === 0) return emit({ type: 'cleared' });
          if (r < 8 && view.size > 0) {
            const held = [...view.keys()];
            return emit({ type: 'removed', block_hashes: [held[rand(held.length)]!] });
          }
          const chain = rand(40) * 10;
          return emit({ type: 'stored', parent_hash: null, blocks: [0, 1, 2].map((i) => ({ block_hash: h(chain + i), tokens_hash: h(chain + i) as string as LocalBlockHash })) });
        });
      },
      snapshot: (): KvSnapshot => ({ last_event_id: next - 1, blocks: [...view.values()], partial_blocks: 0 }),
      lastId: () => next - 1,
    };
  }

  async function held(table: MemoryRoutingTable, hashes: Iterable<SequenceHash>): Promise<SequenceHash[]> {
    const out: SequenceHash[] = [];
    let i = 0;
    for (const h of hashes) {
      const d = await table.selectAndReserve({ requestId: `probe-${i++}`, blockHashes: [h], promptTokens: 16, blockSize: 16, candidates: ['w'], overlapWeight: 1, temperature: 0, random: 0, now: 0 });
      if (d.overlapBlocks === 1) out.push(h);
    }
    return out;
  }

  it('ends with the producer\'s state through lost batches, redeliveries and a flush', async () => {
    const p = producer();
    const table = new MemoryRoutingTable();
    const indexer = new KvIndexer({ table, fetchSnapshot: async () => p.snapshot() });
    let previous: KvCacheEvent[] = [];
    for (let round = 0; round < 60; round++) {
      const batch = p.batch(5);
      if (round % 7 === 3) continue; // lost on the way
      if (round % 11 === 5) await indexer.apply('w', previous); // redelivered
      if (round === 40) table.clear(); // the shared store was flushed
      await indexer.apply('w', batch);
      previous = batch;
    }
    await indexer.apply('w', p.batch(1));
    expect(await table.lastEventId('w')).toBe(p.lastId());
    expect(await table.blockCount('w')).toBe(p.view.size);
    const universe = Array.from({ length: 400 }, (_, i) => i.toString(16).padStart(16, '0') as SequenceHash);
    expect(await held(table, universe)).toEqual(universe.filter((h) => p.view.has(h)));
    const s = indexer.stats();
    expect(s.gaps).toBeGreaterThanOrEqual(9); // 8 lost batches + the flush
    expect(s.resyncs).toBe(s.gaps);
    expect(s.duplicatesSkipped).toBeGreaterThan(0);
  });
});
