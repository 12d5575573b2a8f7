/**
 * The RoutingTable conformance suite: every implementation (MemoryRoutingTable here,
 * RedisRoutingTable in @switchyard/runtime) runs it, so the two cannot drift. It uses the interface
 * only, and `now` values instead of real time.
 *
 *   routingTableConformance('MemoryRoutingTable', async () => ({ table: new MemoryRoutingTable() }));
 *
 * `open` is called before each test and must return an empty table; `close()` is called after it.
 * `flush`, when given, empties the table's storage behind its back (Redis: FLUSHDB; memory: `clear()`)
 * so the suite can check that a flushed table surfaces as gaps; the flush tests skip without it.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { KvCacheEvent, LocalBlockHash, SequenceHash } from '@switchyard/llm';
import type { RouteRequest, RoutingTable } from '../routing-table.js';

export interface ConformanceTable {
  readonly table: RoutingTable;
  /** Lose everything the table stores (every worker's blocks, event ids and load). */
  readonly flush?: () => Promise<void>;
}

/** A 16-hex-digit hash for test block n. */
export const hashOf = (n: number): SequenceHash => n.toString(16).padStart(16, '0') as SequenceHash;
const hashes = (from: number, count: number): SequenceHash[] => Array.from({ length: count }, (_, i) => hashOf(from + i));

export const stored = (id: number, blocks: readonly SequenceHash[], parent: SequenceHash | null = null): KvCacheEvent => ({
  event_id: id,
  data: { type: 'stored', parent_hash: parent, blocks: blocks.map((h) => ({ block_hash: h, tokens_hash: h as string as LocalBlockHash })) },
});
export const removed = (id: number, blocks: readonly SequenceHash[]): KvCacheEvent => ({ event_id: id, data: { type: 'removed', block_hashes: blocks } });
export const cleared = (id: number): KvCacheEvent => ({ event_id: id, data: { type: 'cleared' } });

const BS = 16;
let seq = 0;
function req(overrides: Partial<RouteRequest> & { blockHashes: readonly SequenceHash[]; candidates: readonly string[] }): RouteRequest {
  return {
    requestId: `req-${++seq}`,
    promptTokens: overrides.blockHashes.length * BS,
    blockSize: BS,
    overlapWeight: 1,
    temperature: 0,
    random: 0,
    now: 1_000_000,
    ...overrides,
  };
}

export function routingTableConformance(name: string, open: () => Promise<ConformanceTable>): void {
  describe(`${name} (RoutingTable conformance)`, () => {
    let t: RoutingTable;
    let flush: (() => Promise<void>) | undefined;
    beforeEach(async () => {
      ({ table: t, flush } = await open());
    });
    afterEach(async () => {
      await t.close();
    });

    describe('events', () => {
      it('applies events in order and remembers the last id; an unknown worker is -1', async () => {
        expect(await t.lastEventId('w1')).toBe(-1);
        const r = await t.applyEvents('w1', [stored(0, hashes(1, 3)), stored(1, hashes(4, 2), hashOf(3))]);
        expect(r).toEqual({ status: 'ok', applied: 2, lastEventId: 1 });
        expect(await t.lastEventId('w1')).toBe(1);
        expect(await t.blockCount('w1')).toBe(5);
      });

      it('skips redelivered events', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 2)), removed(1, [hashOf(2)])]);
        const r = await t.applyEvents('w1', [stored(0, hashes(1, 2)), removed(1, [hashOf(2)]), stored(2, [hashOf(9)])]);
        expect(r).toEqual({ status: 'ok', applied: 1, lastEventId: 2 });
        expect(await t.blockCount('w1')).toBe(2);
      });

      it('reports a gap and applies nothing from the gap on', async () => {
        await t.applyEvents('w1', [stored(0, [hashOf(1)])]);
        const r = await t.applyEvents('w1', [stored(1, [hashOf(2)]), stored(3, [hashOf(3)]), stored(4, [hashOf(4)])]);
        expect(r).toEqual({ status: 'gap', applied: 1, lastEventId: 1, expected: 2, got: 3 });
        expect(await t.blockCount('w1')).toBe(2);
        expect(await t.lastEventId('w1')).toBe(1);
      });

      it('applyEventBatches: one result per batch, as applyEvents in order; a gap stops only its batch', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 2))]);
        const r = await t.applyEventBatches([
          { worker: 'w1', events: [stored(0, hashes(1, 2)), stored(1, hashes(3, 1), hashOf(2))] }, // a redelivery, then one new
          { worker: 'w2', events: [stored(3, [hashOf(1)])] }, // unknown worker not starting at 0: a gap
          { worker: 'w3', events: [stored(0, hashes(1, 4)), removed(1, [hashOf(4)])] },
          { worker: 'w1', events: [stored(2, hashes(4, 1), hashOf(3)), stored(4, [hashOf(9)]), stored(5, [hashOf(8)])] }, // same worker again: continues, then a gap
          { worker: 'w4', events: [] },
        ]);
        expect(r).toEqual([
          { status: 'ok', applied: 1, lastEventId: 1 },
          { status: 'gap', applied: 0, lastEventId: -1, expected: 0, got: 3 },
          { status: 'ok', applied: 2, lastEventId: 1 },
          { status: 'gap', applied: 1, lastEventId: 2, expected: 3, got: 4 },
          { status: 'ok', applied: 0, lastEventId: -1 },
        ]);
        expect(await t.blockCount('w1')).toBe(4);
        expect(await t.blockCount('w2')).toBe(0);
        expect(await t.blockCount('w3')).toBe(3);
        expect(await t.lastEventId('w1')).toBe(2);
        expect(await t.applyEventBatches([])).toEqual([]);
        // a malformed batch refuses the call and applies nothing of it
        await expect(t.applyEventBatches([{ worker: 'w1', events: [stored(3, [hashOf(7)])] }, { worker: 'w3', events: [stored(-1, [hashOf(7)])] }])).rejects.toThrow(/event_id/);
        expect(await t.lastEventId('w1')).toBe(2);
      });

      it('an unknown worker must start at event 0', async () => {
        const r = await t.applyEvents('w9', [stored(5, [hashOf(1)])]);
        expect(r).toEqual({ status: 'gap', applied: 0, lastEventId: -1, expected: 0, got: 5 });
        expect(await t.blockCount('w9')).toBe(0);
      });

      it('removed and cleared take blocks out of the index', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 4))]);
        await t.applyEvents('w2', [stored(0, hashes(1, 4))]);
        await t.applyEvents('w1', [removed(1, [hashOf(3)])]);
        await t.applyEvents('w2', [cleared(1)]);
        expect(await t.blockCount('w1')).toBe(3);
        expect(await t.blockCount('w2')).toBe(0);
        const d = await t.selectAndReserve(req({ blockHashes: hashes(1, 4), candidates: ['w1', 'w2'] }));
        expect(d.scores.map((s) => s.overlapBlocks)).toEqual([2, 0]);
      });

      it('replaceWorker installs a snapshot and its last event id', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 3))]);
        await t.replaceWorker('w1', {
          last_event_id: 41,
          blocks: hashes(100, 2).map((h, i) => ({ block_hash: h, tokens_hash: h as string as LocalBlockHash, parent_hash: i === 0 ? null : hashOf(100) })),
          partial_blocks: 0,
        });
        expect(await t.lastEventId('w1')).toBe(41);
        expect(await t.blockCount('w1')).toBe(2);
        expect((await t.applyEvents('w1', [stored(41, [hashOf(7)])])).applied).toBe(0);
        expect(await t.applyEvents('w1', [stored(42, [hashOf(7)])])).toEqual({ status: 'ok', applied: 1, lastEventId: 42 });
        const d = await t.selectAndReserve(req({ blockHashes: hashes(1, 3), candidates: ['w1'] }));
        expect(d.overlapBlocks).toBe(0);
      });

      it('a flushed table knows no worker: the next batch is a gap from -1', async (ctx) => {
        if (flush === undefined) return ctx.skip('no flush given');
        await t.applyEvents('w1', [stored(0, hashes(1, 3)), stored(1, hashes(4, 1), hashOf(3))]);
        await t.selectAndReserve(req({ requestId: 'f', blockHashes: hashes(1, 4), candidates: ['w1'] }));
        await flush();
        expect(await t.lastEventId('w1')).toBe(-1);
        expect(await t.blockCount('w1')).toBe(0);
        expect((await t.loads(1_000_000)).size).toBe(0);
        expect(await t.applyEvents('w1', [stored(2, [hashOf(9)])])).toEqual({ status: 'gap', applied: 0, lastEventId: -1, expected: 0, got: 2 });
      });

      it('removeWorker forgets blocks, event id and load', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 3))]);
        await t.selectAndReserve(req({ requestId: 'a', blockHashes: hashes(1, 3), candidates: ['w1'] }));
        await t.removeWorker('w1');
        expect(await t.lastEventId('w1')).toBe(-1);
        expect(await t.blockCount('w1')).toBe(0);
        expect((await t.loads(1_000_000)).get('w1')).toBeUndefined();
        await t.removeWorker('never-seen');
      });
    });

    describe('selection', () => {
      it('counts only leading blocks as overlap', async () => {
        await t.applyEvents('w1', [stored(0, [hashOf(1), hashOf(3), hashOf(4)])]);
        const d = await t.selectAndReserve(req({ blockHashes: hashes(1, 4), candidates: ['w1'] }));
        expect(d.overlapBlocks).toBe(1);
      });

      it('counts each worker\'s leading blocks under a prefix every worker holds', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 3))]);
        await t.applyEvents('w2', [stored(0, hashes(1, 5))]);
        await t.applyEvents('w3', [stored(0, [...hashes(1, 3), hashOf(5)])]);
        const d = await t.selectAndReserve(req({ blockHashes: hashes(1, 6), candidates: ['w3', 'w0', 'w2', 'w1'] }));
        expect(d.scores.map((s) => s.overlapBlocks)).toEqual([3, 0, 5, 3]);
        await t.applyEvents('w1', [cleared(1)]);
        const e = await t.selectAndReserve(req({ blockHashes: hashes(1, 6), candidates: ['w1', 'w2', 'w3'] }));
        expect(e.scores.map((s) => s.overlapBlocks)).toEqual([0, 5, 3]);
      });

      it('prefers the worker holding the prefix, and scores every candidate in order', async () => {
        await t.applyEvents('w2', [stored(0, hashes(1, 6))]);
        const d = await t.selectAndReserve(req({ blockHashes: hashes(1, 8), candidates: ['w1', 'w2', 'w3'] }));
        expect(d.worker).toBe('w2');
        expect(d.overlapBlocks).toBe(6);
        expect(d.scores.map((s) => s.worker)).toEqual(['w1', 'w2', 'w3']);
        expect(d.scores[1]).toMatchObject({ overlapBlocks: 6, prefillBlocks: 2, decodeBlocks: 2, cost: 4 });
        expect(d.scores[0]).toMatchObject({ overlapBlocks: 0, prefillBlocks: 8, decodeBlocks: 8, cost: 16 });
      });

      it("reproduces Dynamo's worked example: (5, 5) = 10 beats (2, 9) = 11", async () => {
        // A 10-block prompt. b holds 5 blocks and is idle: prefill 5, decode 5. c holds 8 and runs a
        // 7-block request whose prefill is done: prefill 2, decode 7 + 2 = 9. a holds nothing: 10 + 10.
        await t.applyEvents('b', [stored(0, hashes(1, 5))]);
        await t.applyEvents('c', [stored(0, hashes(1, 8))]);
        await t.selectAndReserve(req({ requestId: 'load-c', blockHashes: hashes(500, 7), candidates: ['c'] }));
        await t.markPrefillDone('load-c');
        const d = await t.selectAndReserve(req({ blockHashes: hashes(1, 10), promptTokens: 10 * BS, candidates: ['a', 'b', 'c'] }));
        expect(d.scores.map((s) => [s.prefillBlocks, s.decodeBlocks, s.cost])).toEqual([
          [10, 10, 20],
          [5, 5, 10],
          [2, 9, 11],
        ]);
        expect(d.worker).toBe('b');
      });

      it('overlap weight 0 scores load only', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 4))]);
        const d = await t.selectAndReserve(req({ blockHashes: hashes(1, 4), candidates: ['w1', 'w2'], overlapWeight: 0 }));
        expect(d.scores.map((s) => s.cost)).toEqual([0, 4]);
      });

      it('breaks cost ties by the smaller index, then by random among equals', async () => {
        await t.applyEvents('big', [stored(0, hashes(900, 5))]);
        const d1 = await t.selectAndReserve(req({ requestId: 'tie-1', blockHashes: hashes(1, 2), candidates: ['big', 'x', 'y'], random: 0 }));
        expect(d1.worker).toBe('x');
        await t.release('tie-1');
        const d2 = await t.selectAndReserve(req({ requestId: 'tie-2', blockHashes: hashes(1, 2), candidates: ['big', 'x', 'y'], random: 0.99 }));
        expect(d2.worker).toBe('y');
      });

      it('load scoring ignores the cache and follows reservations', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 8))]);
        await t.selectAndReserve(req({ requestId: 'busy', blockHashes: hashes(50, 8), candidates: ['w1'] }));
        const d = await t.selectAndReserve(req({ blockHashes: hashes(1, 8), candidates: ['w1', 'w2'], scoring: 'load' }));
        expect(d.worker).toBe('w2');
        expect(d.scores[0]!.overlapBlocks).toBe(8);
        expect(d.scores[0]!.cost).toBe(16);
        expect(d.scores[1]!.cost).toBe(0);
      });

      it('a cached prompt adds only its new blocks to the load (assume KV reuse)', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 6))]);
        await t.selectAndReserve(req({ requestId: 'reuse', blockHashes: hashes(1, 8), candidates: ['w1'] }));
        expect((await t.loads(1_000_000)).get('w1')).toEqual({ activeBlocks: 2, prefillTokens: 2 * BS, requests: 1 });
      });

      it('temperature samples by softmax over normalised costs', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 8))]);
        const picks = new Map<string, number>();
        for (let i = 0; i < 40; i++) {
          const d = await t.selectAndReserve(req({ requestId: `temp-${i}`, blockHashes: hashes(1, 8), candidates: ['w1', 'w2'], temperature: 1, random: (i + 0.5) / 40 }));
          picks.set(d.worker, (picks.get(d.worker) ?? 0) + 1);
          await t.release(`temp-${i}`);
        }
        // costs 0 and 16: weights 1 and e^-1 → P(w1) = 1 / (1 + e^-1) ≈ 0.731.
        expect(picks.get('w1')).toBe(29);
        expect(picks.get('w2')).toBe(11);
      });

      it('temperature with equal costs is uniform in candidate order', async () => {
        const picks: string[] = [];
        for (const random of [0, 0.3, 0.4, 0.7, 0.99]) {
          const d = await t.selectAndReserve(req({ requestId: `u-${random}`, blockHashes: hashes(1, 2), candidates: ['a', 'b', 'c'], temperature: 0.5, random }));
          picks.push(d.worker);
          await t.release(`u-${random}`);
        }
        expect(picks).toEqual(['a', 'a', 'b', 'c', 'c']);
      });

      it('rejects an empty candidate list and a request id already reserved', async () => {
        await expect(t.selectAndReserve(req({ blockHashes: hashes(1, 1), candidates: [] }))).rejects.toMatchObject({ code: 'invalid_argument' });
        await t.selectAndReserve(req({ requestId: 'dup', blockHashes: hashes(1, 1), candidates: ['w1'] }));
        await expect(t.selectAndReserve(req({ requestId: 'dup', blockHashes: hashes(1, 1), candidates: ['w1'] }))).rejects.toMatchObject({ code: 'invalid_argument' });
      });

      it('refuses the same malformed inputs as every other table', async () => {
        const bad = { code: 'invalid_argument' };
        await expect(t.applyEvents('w1', [stored(-1, hashes(1, 1))])).rejects.toMatchObject(bad);
        await expect(t.replaceWorker('w1', { last_event_id: -2, blocks: [], partial_blocks: 0 })).rejects.toMatchObject(bad);
        for (const over of [{ random: 1 }, { random: -0.1 }, { blockSize: 0 }, { promptTokens: -1 }, { temperature: -1 }, { reservationTtlMs: -1 }, { approximate: { ttlMs: -1 } }]) {
          await expect(t.selectAndReserve(req({ blockHashes: hashes(1, 1), candidates: ['w1'], ...over }))).rejects.toMatchObject(bad);
        }
        expect(await t.lastEventId('w1')).toBe(-1); // nothing applied
      });
    });

    describe('reservations', () => {
      it('reserve, prefill done, release', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 2))]);
        await t.selectAndReserve(req({ requestId: 'r1', blockHashes: hashes(1, 4), promptTokens: 4 * BS + 3, candidates: ['w1'] }));
        expect((await t.loads(1_000_000)).get('w1')).toEqual({ activeBlocks: 3, prefillTokens: 2 * BS + 3, requests: 1 });
        await t.markPrefillDone('r1');
        await t.markPrefillDone('r1');
        expect((await t.loads(1_000_000)).get('w1')).toEqual({ activeBlocks: 3, prefillTokens: 0, requests: 1 });
        await t.release('r1');
        await t.release('r1');
        await t.markPrefillDone('unknown');
        expect((await t.loads(1_000_000)).get('w1')?.requests ?? 0).toBe(0);
      });

      it('prefill done and release not awaited are applied before the next decision and any later call', async () => {
        await t.selectAndReserve(req({ requestId: 'a', blockHashes: hashes(1, 2), promptTokens: 2 * BS, candidates: ['w1'] }));
        await t.selectAndReserve(req({ requestId: 'b', blockHashes: hashes(10, 1), promptTokens: BS, candidates: ['w1'] }));
        const settled = [t.markPrefillDone('a'), t.release('b')];
        const d = await t.selectAndReserve(req({ requestId: 'c', blockHashes: hashes(20, 1), promptTokens: BS, candidates: ['w1'] }));
        expect(d.scores[0]).toMatchObject({ decodeBlocks: 2 + 1, prefillBlocks: 1 });
        const done = t.release('a');
        expect((await t.loads(1_000_000)).get('w1')).toEqual({ activeBlocks: 1, prefillTokens: BS, requests: 1 });
        await Promise.all([...settled, done]);
      });

      it('reservations raise the cost of their worker', async () => {
        const first = await t.selectAndReserve(req({ blockHashes: hashes(1, 4), candidates: ['w1', 'w2'] }));
        const second = await t.selectAndReserve(req({ blockHashes: hashes(50, 4), candidates: ['w1', 'w2'] }));
        expect([first.worker, second.worker]).toEqual(['w1', 'w2']);
        expect(second.scores[0]!.decodeBlocks).toBe(8);
      });

      it('expired reservations leave the load', async () => {
        await t.selectAndReserve(req({ requestId: 'old', blockHashes: hashes(1, 4), candidates: ['w1'], now: 1000, reservationTtlMs: 500 }));
        expect((await t.loads(1400)).get('w1')?.activeBlocks).toBe(4);
        expect((await t.loads(1600)).get('w1')).toBeUndefined();
        await t.release('old');
        // The expired id may be reserved again.
        await t.selectAndReserve(req({ requestId: 'old', blockHashes: hashes(1, 4), candidates: ['w1'], now: 1700 }));
      });

      it('expired reservations never count, however many expire at once (a router replica died with them)', async () => {
        for (let i = 0; i < 1100; i++) {
          await t.selectAndReserve(req({ requestId: `dead-${i}`, blockHashes: hashes(1, 4), candidates: ['w1'], now: 0, reservationTtlMs: 10 }));
        }
        const d = await t.selectAndReserve(req({ blockHashes: hashes(500, 4), candidates: ['w1', 'w2'], now: 10_000 }));
        expect(d.scores.map((s) => s.decodeBlocks)).toEqual([4, 4]); // its own blocks only: nothing left of the dead reservations
      });
    });

    describe('approximate mode', () => {
      it('records routed blocks on the chosen worker until the TTL passes', async () => {
        const d1 = await t.selectAndReserve(req({ requestId: 'ap-1', blockHashes: hashes(1, 6), candidates: ['w1'], now: 10_000, approximate: { ttlMs: 1000 } }));
        expect(d1.overlapBlocks).toBe(0);
        await t.release('ap-1');
        const d2 = await t.selectAndReserve(req({ requestId: 'ap-2', blockHashes: hashes(1, 6), candidates: ['w1', 'w2'], now: 10_500, approximate: { ttlMs: 1000 } }));
        expect(d2.worker).toBe('w1');
        expect(d2.overlapBlocks).toBe(6);
        await t.release('ap-2');
        // Refreshed at 10 500: still cached at 11 200, gone after 11 500.
        const d3 = await t.selectAndReserve(req({ blockHashes: hashes(1, 6), candidates: ['w1'], now: 11_200 }));
        expect(d3.overlapBlocks).toBe(6);
        const d4 = await t.selectAndReserve(req({ blockHashes: hashes(1, 6), candidates: ['w1'], now: 11_600 }));
        expect(d4.overlapBlocks).toBe(0);
      });

      it('records on the chosen worker only, and its expiry never drops blocks stored by events', async () => {
        await t.applyEvents('w1', [stored(0, hashes(1, 2))]);
        const d = await t.selectAndReserve(req({ requestId: 'ap', blockHashes: hashes(1, 4), candidates: ['w1', 'w2'], now: 10_000, approximate: { ttlMs: 1000 } }));
        expect(d.worker).toBe('w1');
        await t.release('ap');
        const during = await t.selectAndReserve(req({ blockHashes: hashes(1, 4), candidates: ['w1', 'w2'], now: 10_500 }));
        expect(during.scores.map((s) => s.overlapBlocks)).toEqual([4, 0]);
        const after = await t.selectAndReserve(req({ blockHashes: hashes(1, 4), candidates: ['w1', 'w2'], now: 20_000 }));
        expect(after.scores.map((s) => s.overlapBlocks)).toEqual([2, 0]);
      });

      it('a stored event turns an approximate block into an indexed one that does not expire', async () => {
        await t.selectAndReserve(req({ requestId: 'ap', blockHashes: hashes(1, 3), candidates: ['w1'], now: 10_000, approximate: { ttlMs: 1000 } }));
        await t.applyEvents('w1', [stored(0, hashes(1, 2))]);
        const after = await t.selectAndReserve(req({ blockHashes: hashes(1, 3), candidates: ['w1'], now: 20_000 }));
        expect(after.overlapBlocks).toBe(2);
      });

      it('expired entries never match, however many expire at once (pruning may lag, matching may not)', async () => {
        const workers = Array.from({ length: 12 }, (_, i) => `w${i}`);
        for (const w of workers) {
          await t.selectAndReserve(req({ requestId: `ap-${w}`, blockHashes: hashes(1, 4), candidates: [w], now: 0, approximate: { ttlMs: 1000 } }));
          await t.release(`ap-${w}`);
        }
        await t.selectAndReserve(req({ requestId: 'ap-long', blockHashes: hashes(100, 1500), promptTokens: 1500 * 16, candidates: ['w0'], now: 0, approximate: { ttlMs: 1000 } }));
        await t.release('ap-long');
        const later = await t.selectAndReserve(req({ blockHashes: hashes(1, 4), candidates: workers, now: 10_000 }));
        expect(later.scores.map((s) => s.overlapBlocks)).toEqual(workers.map(() => 0));
        const tail = await t.selectAndReserve(req({ blockHashes: hashes(1599, 1), candidates: ['w0'], now: 10_000 }));
        expect(tail.overlapBlocks).toBe(0);
      });
    });

  });
}
