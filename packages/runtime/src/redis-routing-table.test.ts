import { randomBytes } from 'node:crypto';
import { SwitchyardError, silentLogger } from '@switchyard/common';
import type { RouteRequest, WorkerLoad } from '@switchyard/kv-router';
import { MemoryRoutingTable } from '@switchyard/kv-router';
import { routingTableConformance } from '@switchyard/kv-router/internal';
import { startRedis, type RedisServer } from '@switchyard/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisRoutingTable, SNAPSHOT_CHUNK, packKeys, routingKeyPrefix } from './redis-routing-table.js';

type KvCacheEvent = Parameters<RedisRoutingTable['applyEvents']>[1][number];
type SequenceHash = KvCacheEvent extends { data: infer D } ? (D extends { type: 'removed'; block_hashes: readonly (infer H)[] } ? H : never) : never;
type LocalBlockHash = KvCacheEvent extends { data: infer D }
  ? D extends { type: 'stored'; blocks: readonly { tokens_hash: infer L }[] }
    ? L
    : never
  : never;

const h = (i: number): SequenceHash => i.toString(16).padStart(16, '0') as SequenceHash;
const hashes = (from: number, n: number): SequenceHash[] => Array.from({ length: n }, (_, i) => h(from + i));
const stored = (event_id: number, hs: readonly SequenceHash[]): KvCacheEvent => ({
  event_id,
  data: { type: 'stored', parent_hash: null, blocks: hs.map((b) => ({ block_hash: b, tokens_hash: b as string as LocalBlockHash })) },
});
const removed = (event_id: number, hs: readonly SequenceHash[]): KvCacheEvent => ({ event_id, data: { type: 'removed', block_hashes: hs } });
const cleared = (event_id: number): KvCacheEvent => ({ event_id, data: { type: 'cleared' } });
const snapshot = (last: number, hs: readonly SequenceHash[]) => ({
  last_event_id: last,
  partial_blocks: 0,
  blocks: hs.map((b, i) => ({ block_hash: b, tokens_hash: b as string as LocalBlockHash, parent_hash: i === 0 ? null : hs[i - 1]! })),
});

let seq = 0;
const req = (over: Partial<RouteRequest> = {}): RouteRequest => ({
  requestId: `r${++seq}`,
  blockHashes: [],
  promptTokens: 64,
  blockSize: 16,
  candidates: ['w1', 'w2'],
  overlapWeight: 1,
  temperature: 0,
  random: 0,
  now: 1_000_000,
  ...over,
});

/** Poll until `ok` holds (every 50 ms, at most 15 s). */
async function waitFor(ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error('condition not reached within 15 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Until `t` cannot reach Redis (a restart's outage has begun). */
async function untilUnreachable(t: RedisRoutingTable): Promise<void> {
  await waitFor(async () => {
    try {
      await t.lastEventId('w1');
      return false;
    } catch {
      return true;
    }
  });
}

/** Until Redis answers `t` again and its loads satisfy `ok`. */
async function untilLoads(t: RedisRoutingTable, ok: (loads: ReadonlyMap<string, WorkerLoad>) => boolean): Promise<void> {
  await waitFor(async () => {
    try {
      return ok(await t.loads(1_000_000));
    } catch {
      return false;
    }
  });
}

async function rejection(p: Promise<unknown>): Promise<SwitchyardError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof SwitchyardError) return e;
    throw new Error(`not a SwitchyardError: ${String(e)}`, { cause: e });
  }
  throw new Error('expected a rejection');
}

let server: RedisServer;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.stop();
});

// The shared suite (MemoryRoutingTable runs the same one): a fresh namespace is an empty table.
routingTableConformance('RedisRoutingTable', async () => ({
  table: await RedisRoutingTable.connect({ url: server.url, namespace: `conf${randomBytes(4).toString('hex')}` }),
  flush: async () => {
    const raw = new Redis(server.url);
    try {
      await raw.flushall();
    } finally {
      raw.disconnect();
    }
  },
}));

describe('RedisRoutingTable (real Redis)', () => {
  let raw: Redis;
  const open: RedisRoutingTable[] = [];
  const table = async (ns = `t${randomBytes(4).toString('hex')}`, url = server.url): Promise<RedisRoutingTable> => {
    const t = await RedisRoutingTable.connect({ url, namespace: ns, commandTimeoutMs: 2000 });
    open.push(t);
    return t;
  };

  beforeAll(() => {
    raw = new Redis(server.url, { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    await Promise.all(open.map((t) => t.close()));
    raw.disconnect();
  });

  it('applies events in id order, skips redelivery and reports gaps (unknown worker: first id must be 0)', async () => {
    const t = await table();
    expect(await t.lastEventId('w1')).toBe(-1);
    expect(await t.applyEvents('w1', [stored(3, [h(1)])])).toEqual({ status: 'gap', applied: 0, lastEventId: -1, expected: 0, got: 3 });
    expect(await t.blockCount('w1')).toBe(0);
    expect(await t.applyEvents('w1', [stored(0, [h(1), h(2)]), stored(1, [h(3)])])).toEqual({ status: 'ok', applied: 2, lastEventId: 1 });
    // redelivery of 0..1 plus new 2, then a gap at 4: 2 is applied, 4 is not
    expect(await t.applyEvents('w1', [stored(0, [h(1)]), stored(1, [h(3)]), removed(2, [h(2)]), stored(4, [h(9)])])).toEqual({
      status: 'gap',
      applied: 1,
      lastEventId: 2,
      expected: 3,
      got: 4,
    });
    expect(await t.lastEventId('w1')).toBe(2);
    expect(await t.blockCount('w1')).toBe(2);
    expect(await t.applyEvents('w1', [cleared(3), stored(4, [h(7)])])).toEqual({ status: 'ok', applied: 2, lastEventId: 4 });
    expect(await t.blockCount('w1')).toBe(1);
    expect(await t.applyEvents('w1', [])).toEqual({ status: 'ok', applied: 0, lastEventId: 4 });
  });

  it('scores leading overlap and reserves load on the chosen worker', async () => {
    const t = await table();
    await t.applyEvents('w1', [stored(0, hashes(1, 3))]);
    await t.applyEvents('w2', [stored(0, [h(1)]), stored(1, [h(3), h(4)])]); // holds 1, 3, 4: leading overlap 1
    const d = await t.selectAndReserve(req({ blockHashes: hashes(1, 4), promptTokens: 70, candidates: ['w1', 'w2', 'w3'] }));
    // w1: overlap 3 → prefill (70-48)/16 = 1.375, decode ceil(70/16)=5 - 3 = 2, cost 3.375
    expect(d.scores).toEqual([
      { worker: 'w1', overlapBlocks: 3, prefillBlocks: 1.375, decodeBlocks: 2, cost: 3.375 },
      { worker: 'w2', overlapBlocks: 1, prefillBlocks: 54 / 16, decodeBlocks: 4, cost: 54 / 16 + 4 },
      { worker: 'w3', overlapBlocks: 0, prefillBlocks: 70 / 16, decodeBlocks: 5, cost: 70 / 16 + 5 },
    ]);
    expect(d.worker).toBe('w1');
    expect(d.overlapBlocks).toBe(3);
    // "assume KV reuse": the reservation holds only the 2 blocks w1 does not cache
    expect(await t.loads(1_000_000)).toEqual(new Map([['w1', { activeBlocks: 2, prefillTokens: 22, requests: 1 }]]));
    // the reservation now weighs on w1: with overlap weight 2 a fresh prompt goes elsewhere
    const d2 = await t.selectAndReserve(req({ blockHashes: hashes(100, 2), promptTokens: 32, candidates: ['w1', 'w2'], overlapWeight: 2 }));
    expect(d2.scores[0]).toEqual({ worker: 'w1', overlapBlocks: 0, prefillBlocks: (22 + 32) / 16, decodeBlocks: 4, cost: 2 * (54 / 16) + 4 });
    expect(d2.worker).toBe('w2');
  });

  it('matches any worker ids and hashes: packed (length-prefixed) or unpacked (a key not ASCII, or of 128 bytes or more)', async () => {
    const odd = ['\n', '\u0000', '\u0001', '\u007f', '\t'].join('');
    const cases: [string, string, SequenceHash[]][] = [
      ['plain', 'w1', hashes(1, 3)],
      ['control characters', `w\n1${odd}`, [h(1), `${h(2)}${odd}` as SequenceHash, `\n${h(3)}` as SequenceHash]],
      ['not ascii', 'wé', [h(1), 'ĥ2' as SequenceHash, h(3)]],
      ['long hash', 'w1', [h(1), 'x'.repeat(200) as SequenceHash, h(3)]],
      ['long worker id', 'w'.repeat(120), hashes(1, 3)],
      ['empty', '', ['' as SequenceHash, h(2), h(3)]],
    ];
    for (const [name, w1, hs] of cases) {
      const t = await table();
      const w2 = `w%${name}[`;
      await t.applyEvents(w1, [stored(0, hs)]);
      await t.applyEvents(w2, [stored(0, hs.slice(0, 2))]);
      const d = await t.selectAndReserve(req({ blockHashes: [...hs, h(99)], promptTokens: 64, candidates: [w2, 'other', w1, w2] }));
      expect(d.scores.map((x) => [x.worker, x.overlapBlocks]), name).toEqual([[w2, 2], ['other', 0], [w1, 3], [w2, 2]]);
      expect(d.worker, name).toBe(w1);
      const empty = await t.selectAndReserve(req({ blockHashes: [], promptTokens: 0, candidates: [w1] }));
      expect(empty.scores[0]!.overlapBlocks, name).toBe(0);
    }
  });

  it('packKeys: each key after its length in one byte; undefined when a key is not ASCII or 128 bytes or more', () => {
    expect(packKeys('p:', ['a', '', 'bc'])).toBe('\u0003p:a\u0002p:\u0004p:bc');
    expect(packKeys('p:', [])).toBe('');
    expect(packKeys('p:', ['x'.repeat(125)])).toBe(`\u007fp:${'x'.repeat(125)}`);
    expect(packKeys('p:', ['x'.repeat(126)])).toBeUndefined();
    expect(packKeys('p:', ['a', 'é'])).toBeUndefined();
    expect(packKeys('p:', ['\u{1F600}'])).toBeUndefined();
    expect(packKeys('p:', ['ab', 'cd'])).toBe('\u0004p:ab\u0004p:cd'); // one length: joined
    expect(packKeys('p:', ['x'.repeat(126), 'y'.repeat(126)])).toBeUndefined();
    expect(packKeys('p:', ['é', 'e'])).toBeUndefined();
  });

  it('load scoring ignores the cache; temperature 0 ties go to the fewest indexed blocks, then to random', async () => {
    const t = await table();
    await t.applyEvents('w1', [stored(0, hashes(1, 4))]);
    await t.applyEvents('w2', [stored(0, hashes(50, 2))]);
    const d = await t.selectAndReserve(req({ blockHashes: hashes(1, 4), scoring: 'load', candidates: ['w1', 'w2', 'w3'] }));
    expect(d.scores.map((s) => [s.overlapBlocks, s.cost])).toEqual([
      [4, 0],
      [0, 0],
      [0, 0],
    ]);
    expect(d.worker).toBe('w3'); // no indexed block
    await t.release(`r${seq}`);
    // equal cost, equal size: floor(random × 2) among [a, b]
    const tie = async (random: number) => {
      const id = `tie-${random}`;
      const x = await t.selectAndReserve(req({ requestId: id, candidates: ['a', 'b'], random }));
      await t.release(id);
      return x.worker;
    };
    expect([await tie(0), await tie(0.49), await tie(0.5), await tie(0.99)]).toEqual(['a', 'a', 'b', 'b']);
  });

  it('temperature > 0 walks the softmax CDF; equal costs are uniform', async () => {
    const t = await table();
    const pick = async (random: number, candidates = ['a', 'b', 'c', 'd']) => {
      const id = `soft-${random}-${candidates.join()}`;
      const d = await t.selectAndReserve(req({ requestId: id, candidates, random, temperature: 1 }));
      await t.release(id);
      return d.worker;
    };
    expect(await pick(0)).toBe('a');
    expect(await pick(0.26)).toBe('b');
    expect(await pick(0.51)).toBe('c');
    expect(await pick(0.999)).toBe('d');
    // a loaded worker (cost 4 vs 0: p = e^-1 / (1 + e^-1) ≈ 0.269 for the loaded one)
    const hold = await t.selectAndReserve(req({ requestId: 'hold', candidates: ['x'], promptTokens: 64 }));
    expect(hold.worker).toBe('x');
    expect(await pick(0.5, ['x', 'y'])).toBe('y');
    expect(await pick(0.2, ['x', 'y'])).toBe('x');
  });
  it('tracks prefill done, release, expiry and removeWorker; rejects duplicates and empty candidates', async () => {
    const t = await table();
    const a = await t.selectAndReserve(req({ requestId: 'a', candidates: ['w1'], promptTokens: 40, now: 1000, reservationTtlMs: 500 }));
    expect(a.worker).toBe('w1');
    await t.selectAndReserve(req({ requestId: 'b', candidates: ['w1'], promptTokens: 16, now: 1000 }));
    expect((await rejection(t.selectAndReserve(req({ requestId: 'a', candidates: ['w1'], now: 1000 })))).code).toBe('invalid_argument');
    expect((await rejection(t.selectAndReserve(req({ candidates: [] })))).code).toBe('invalid_argument');
    expect((await t.loads(1000)).get('w1')).toEqual({ activeBlocks: 4, prefillTokens: 56, requests: 2 });
    await t.markPrefillDone('a');
    await t.markPrefillDone('a');
    await t.markPrefillDone('nope');
    expect((await t.loads(1000)).get('w1')).toEqual({ activeBlocks: 4, prefillTokens: 16, requests: 2 });
    // a expires at 1500 (inclusive); b (default TTL) does not
    expect((await t.loads(1499)).get('w1')).toEqual({ activeBlocks: 4, prefillTokens: 16, requests: 2 });
    expect((await t.loads(1500)).get('w1')).toEqual({ activeBlocks: 1, prefillTokens: 16, requests: 1 });
    await t.release('a'); // expired: no-op
    await t.release('b');
    await t.release('b');
    expect(await t.loads(1500)).toEqual(new Map());
    // an expired id may be reused
    await t.selectAndReserve(req({ requestId: 'c', candidates: ['w2'], now: 2000 }));
    await t.applyEvents('w2', [stored(0, hashes(1, 3))]);
    await t.removeWorker('w2');
    await t.removeWorker('w2');
    expect(await t.loads(2000)).toEqual(new Map());
    expect(await t.lastEventId('w2')).toBe(-1);
    expect(await t.blockCount('w2')).toBe(0);
    await t.release('c');
    expect(await t.loads(2000)).toEqual(new Map());
  });

  it('settlements ride on the next decision: one script call per decision, applied before it, seen by another replica once resolved', async () => {
    const evalCalls = async (): Promise<number> => {
      const text = await raw.info('commandstats');
      let calls = 0;
      for (const m of text.matchAll(/cmdstat_eval(?:sha)?:calls=(\d+)/g)) calls += Number(m[1]);
      return calls;
    };
    const ns = `t${randomBytes(4).toString('hex')}`;
    const t = await RedisRoutingTable.connect({ url: server.url, namespace: ns, settleDelayMs: 60_000 });
    open.push(t);
    const other = await table(ns);
    await t.selectAndReserve(req({ requestId: 'a', candidates: ['w1'], promptTokens: 32 }));
    await t.selectAndReserve(req({ requestId: 'b', candidates: ['w1'], promptTokens: 16 }));
    const before = await evalCalls();
    const settled: string[] = [];
    const done = [t.markPrefillDone('a').then(() => settled.push('p:a')), t.release('b').then(() => settled.push('r:b'))];
    await new Promise((r) => setTimeout(r, 50));
    expect(settled).toEqual([]); // queued: no call of its own yet
    expect((await other.loads(1_000_000)).get('w1')).toEqual({ activeBlocks: 3, prefillTokens: 48, requests: 2 });
    // the next decision carries them, applied before it decides: it sees a's prefill done and b gone
    const d = await t.selectAndReserve(req({ requestId: 'c', candidates: ['w1'], promptTokens: 16 }));
    expect(d.scores[0]).toMatchObject({ decodeBlocks: 2 + 1, prefillBlocks: 1 });
    await Promise.all(done);
    expect(settled).toEqual(['p:a', 'r:b']);
    expect(await evalCalls()).toBe(before + 1 + 1); // the decision + other's loads
    expect((await other.loads(1_000_000)).get('w1')).toEqual({ activeBlocks: 3, prefillTokens: 16, requests: 2 });
    // a duplicate request id fails the decision, not the settlements that rode on it (they were applied)
    const rel = t.release('a');
    expect((await rejection(t.selectAndReserve(req({ requestId: 'c', candidates: ['w1'] })))).code).toBe('invalid_argument');
    await rel;
    expect((await other.loads(1_000_000)).get('w1')).toEqual({ activeBlocks: 1, prefillTokens: 16, requests: 1 });
    // any other call sends them first; with nothing to ride on they go on their own after settleDelayMs
    const rel2 = t.release('c');
    expect(await t.loads(1_000_000)).toEqual(new Map());
    await rel2;
    const quick = await table(ns);
    await quick.selectAndReserve(req({ requestId: 'q', candidates: ['w2'] }));
    await quick.release('q'); // DEFAULT_SETTLE_DELAY_MS
    expect(await other.loads(1_000_000)).toEqual(new Map());
  });

  it('more candidates than one unpack call takes (256, 1024): the same decisions as the memory table', async () => {
    const t = await table();
    const mem = new MemoryRoutingTable();
    const workers = Array.from({ length: 1100 }, (_, i) => `w${i}`);
    for (const [i, w] of workers.entries()) {
      const own = [...hashes(1, 4), ...hashes(1000 + i * 10, (i * 7) % 9)];
      for (const x of [t, mem]) await x.applyEvents(w, [stored(0, own)]);
    }
    let r = 0.37;
    for (let k = 0; k < 40; k++) {
      r = (r * 9301 + 0.49297) % 1;
      const i = (k * 131) % 1100;
      const over = req({
        requestId: `many${k}`,
        blockHashes: [...hashes(1, 4), ...hashes(1000 + i * 10, 9)],
        promptTokens: 13 * 16 + 3,
        candidates: k % 2 === 0 ? workers : [...workers].reverse().slice(0, 300 + k),
        random: r,
        temperature: k % 5 === 4 ? 0.5 : 0,
      });
      const [a, b] = [await t.selectAndReserve(over), await mem.selectAndReserve(over)];
      expect(a, `decision ${k}`).toEqual(b);
    }
  });

  it('makes the memory table’s decisions on random indexes, prompts, candidate lists and settlements', async () => {
    const t = await table();
    const mem = new MemoryRoutingTable();
    let state = 0x2545f491;
    const rnd = (): number => {
      // xorshift32: the same run every time
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      return (state >>> 0) / 2 ** 32;
    };
    const int = (n: number): number => Math.floor(rnd() * n);
    const workers = Array.from({ length: 20 }, (_, i) => `w${i}`);
    // chains: a shared prefix of 0..40 blocks, then one of three branches, each worker holding some leading
    // part of its chain, some with a hole (a removed block) — overlap stops at the first block not held
    const chain = (branch: number, len: number): SequenceHash[] => [...hashes(0, Math.min(len, 40)), ...hashes(10_000 * (branch + 1), Math.max(0, len - 40))];
    for (const [i, w] of workers.entries()) {
      if (i % 7 === 6) continue; // a few workers never indexed
      const held = chain(i % 3, int(200));
      const events = [stored(0, held)];
      if (held.length > 10 && i % 4 === 0) events.push(removed(1, [held[int(held.length)]!]));
      for (const x of [t, mem]) await x.applyEvents(w, events);
    }
    const live: string[] = [];
    for (let k = 0; k < 120; k++) {
      const candidates = Array.from({ length: 1 + int(workers.length + 4) }, () => workers[int(workers.length)]!);
      const blockHashes = chain(int(3), int(260));
      const over = req({
        requestId: `diff${k}`,
        blockHashes,
        promptTokens: blockHashes.length * 16 + int(16),
        candidates,
        overlapWeight: [0, 1, 2.5][int(3)]!,
        scoring: k % 9 === 8 ? 'load' : 'kv',
        temperature: k % 4 === 3 ? 0.5 : 0,
        random: rnd(),
      });
      const [a, b] = [await t.selectAndReserve(over), await mem.selectAndReserve(over)];
      expect(a, `decision ${k}`).toEqual(b);
      live.push(over.requestId);
      if (rnd() < 0.5) {
        const id = live[int(live.length)]!;
        for (const x of [t, mem]) void x.markPrefillDone(id);
      }
      if (live.length > 6) {
        const id = live.splice(int(live.length), 1)[0]!;
        for (const x of [t, mem]) void x.release(id);
      }
    }
    expect(await t.loads(1_000_000)).toEqual(await mem.loads(1_000_000));
  }, 60_000);

  it('approximate mode records the routed prompt on the chosen worker until its TTL', async () => {
    const t = await table();
    const ttl = { ttlMs: 1000 };
    const first = await t.selectAndReserve(req({ requestId: 'p1', blockHashes: hashes(1, 4), candidates: ['w1', 'w2'], approximate: ttl, now: 0 }));
    await t.release('p1');
    expect(await t.blockCount(first.worker)).toBe(4);
    expect(await t.lastEventId(first.worker)).toBe(-1);
    const again = await t.selectAndReserve(req({ requestId: 'p2', blockHashes: hashes(1, 2), candidates: ['w1', 'w2'], random: 0.99, approximate: ttl, now: 900 }));
    await t.release('p2');
    expect(again.worker).toBe(first.worker);
    expect(again.overlapBlocks).toBe(2);
    // blocks 1, 2 refreshed to 1900; blocks 3, 4 expire at 1000
    const later = await t.selectAndReserve(req({ requestId: 'p3', blockHashes: hashes(1, 4), candidates: [first.worker], now: 1500 }));
    await t.release('p3');
    expect(later.overlapBlocks).toBe(2);
    expect(await t.blockCount(first.worker)).toBe(2);
    const gone = await t.selectAndReserve(req({ requestId: 'p4', blockHashes: hashes(1, 4), candidates: [first.worker], now: 1900 }));
    expect(gone.overlapBlocks).toBe(0);
    expect(await t.blockCount(first.worker)).toBe(0);
  });

  it('a block a KV event stores is no longer subject to approximate-mode expiry', async () => {
    const t = await table();
    await t.selectAndReserve(req({ requestId: 'ap', blockHashes: hashes(1, 4), candidates: ['w1'], approximate: { ttlMs: 1000 }, now: 0 }));
    expect(await t.applyEvents('w1', [stored(0, [h(1)]), removed(1, [h(2)])])).toMatchObject({ status: 'ok', applied: 2 });
    expect(await t.blockCount('w1')).toBe(3);
    const d = await t.selectAndReserve(req({ requestId: 'ap2', blockHashes: hashes(1, 4), candidates: ['w1'], now: 5000 }));
    expect(d.overlapBlocks).toBe(1);
    expect(await t.blockCount('w1')).toBe(1);
  });

  it('two router replicas racing on the same prompt see each other’s reservations (no stampede)', async () => {
    const ns = `race${randomBytes(4).toString('hex')}`;
    const [r1, r2] = [await table(ns), await table(ns)];
    for (let round = 0; round < 20; round++) {
      const same = { blockHashes: hashes(1, 8), promptTokens: 128, candidates: ['w1', 'w2'], random: 0 };
      const [d1, d2] = await Promise.all([
        r1.selectAndReserve(req({ ...same, requestId: `x${round}` })),
        r2.selectAndReserve(req({ ...same, requestId: `y${round}` })),
      ]);
      expect(new Set([d1.worker, d2.worker])).toEqual(new Set(['w1', 'w2']));
      await Promise.all([r1.release(`x${round}`), r2.release(`y${round}`)]);
    }
    expect(await r1.loads(1_000_000)).toEqual(new Map());
  });

  it('FLUSHALL makes every worker unknown: the next batch is a gap', async () => {
    const t = await table();
    await t.applyEvents('w1', [stored(0, hashes(1, 2)), stored(1, hashes(3, 2))]);
    expect(await t.lastEventId('w1')).toBe(1);
    await raw.flushall();
    expect(await t.lastEventId('w1')).toBe(-1);
    expect(await t.blockCount('w1')).toBe(0);
    expect(await t.applyEvents('w1', [stored(2, [h(9)])])).toEqual({ status: 'gap', applied: 0, lastEventId: -1, expected: 0, got: 2 });
    await t.replaceWorker('w1', snapshot(2, hashes(1, 5)));
    expect(await t.applyEvents('w1', [stored(2, [h(9)]), stored(3, [h(10)])])).toEqual({ status: 'ok', applied: 1, lastEventId: 3 });
    expect(await t.blockCount('w1')).toBe(6);
  });

  it('survives SCRIPT FLUSH (NOSCRIPT → reload)', async () => {
    const t = await table();
    await t.applyEvents('w1', [stored(0, hashes(1, 2))]);
    await raw.script('FLUSH');
    expect(await t.applyEvents('w1', [stored(1, [h(3)])])).toEqual({ status: 'ok', applied: 1, lastEventId: 1 });
    expect((await t.selectAndReserve(req({ blockHashes: hashes(1, 3), candidates: ['w1'] }))).overlapBlocks).toBe(3);
  });

  it('replaceWorker swaps a large snapshot in (staged in chunks) and unindexes the old blocks', async () => {
    const ns = `big${randomBytes(4).toString('hex')}`;
    const t = await table(ns);
    const n = SNAPSHOT_CHUNK * 5 + 123;
    await t.applyEvents('w1', [stored(0, hashes(0, 10))]);
    await t.replaceWorker('w1', snapshot(41, hashes(1_000_000, n)));
    expect(await t.lastEventId('w1')).toBe(41);
    expect(await t.blockCount('w1')).toBe(n);
    const d = await t.selectAndReserve(req({ requestId: 'big1', blockHashes: hashes(1_000_000, 128), promptTokens: 2048, candidates: ['w1', 'w2'] }));
    expect(d.scores.map((s) => s.overlapBlocks)).toEqual([128, 0]);
    // a long prompt: its keys split and read in batches (up to 1024 a call)
    const long = await t.selectAndReserve(req({ requestId: 'big3', blockHashes: [...hashes(1_000_000, 3000), h(7)], promptTokens: 3001 * 16, candidates: ['w2', 'w1'] }));
    expect(long.scores.map((s) => s.overlapBlocks)).toEqual([0, 3000]);
    const old = await t.selectAndReserve(req({ requestId: 'big2', blockHashes: hashes(0, 10), candidates: ['w1'] }));
    expect(old.overlapBlocks).toBe(0);
    // a second, small replace; then gc (driven by later calls) removes every block key of the big one
    await t.replaceWorker('w1', snapshot(50, hashes(0, 3)));
    expect(await t.blockCount('w1')).toBe(3);
    for (let i = 0; i < 40; i++) await t.removeWorker('nobody');
    const p = routingKeyPrefix(ns);
    expect(await raw.scard(`${p}dead`)).toBe(0);
    expect(await raw.exists(`${p}b:${h(1_000_000)}`, `${p}b:${h(1_000_000 + n - 1)}`, `${p}b:${h(5)}`)).toBe(0);
    expect(await raw.exists(`${p}b:${h(0)}`)).toBe(1);
    // collected generation ids are reused, smallest first (they are bit offsets: bitmaps stay short)
    expect((await raw.getBuffer(`${p}w:w1`))!.readDoubleLE(0)).toBe(0); // w1's record: generation 0
    expect(await raw.zrange(`${p}free`, '0', '-1')).toEqual(['1']);
    expect(await raw.strlen(`${p}b:${h(0)}`)).toBe(1);
  }, 60_000);

  it('a flush between two replaceWorker chunks never lets another staging that reuses the generation id mix into it', async () => {
    const ns = `stg${randomBytes(4).toString('hex')}`;
    const [a, b] = [await table(ns), await table(ns)];
    // hold each table after its first staging chunk
    const pauseAfterFirstChunk = (t: RedisRoutingTable) => {
      const inner = t as unknown as { call(name: string, args: unknown[]): Promise<unknown> };
      const call = inner.call.bind(inner);
      let reached!: () => void;
      let release!: () => void;
      const atGate = new Promise<void>((r) => (reached = r));
      const gate = new Promise<void>((r) => (release = r));
      let first = true;
      inner.call = async (name, args) => {
        const out = await call(name, args);
        if (name === 'syStage' && first) {
          first = false;
          reached();
          await gate;
        }
        return out;
      };
      return { atGate, release };
    };
    const ga = pauseAfterFirstChunk(a);
    const gb = pauseAfterFirstChunk(b);
    const n = SNAPSHOT_CHUNK + 500; // two chunks each
    const pa = a.replaceWorker('w1', snapshot(10, hashes(1_000_000, n)));
    await ga.atGate;
    await raw.flushall(); // Redis emptied under the staging: generation ids start again at 0
    const pb = b.replaceWorker('w2', snapshot(20, hashes(2_000_000, n)));
    await gb.atGate; // b staged its first chunk under the reused id
    ga.release();
    expect((await rejection(pa)).code).toBe('unavailable'); // a's staging is gone: SY_STAGE_LOST
    gb.release();
    await pb;
    expect(await b.blockCount('w1')).toBe(0);
    expect(await b.blockCount('w2')).toBe(n);
    const d = await b.selectAndReserve(req({ requestId: 'stg1', blockHashes: hashes(2_000_000, 8), candidates: ['w1', 'w2'] }));
    expect(d.scores.map((x) => [x.worker, x.overlapBlocks])).toEqual([
      ['w1', 0],
      ['w2', 8],
    ]);
  }, 60_000);

  it('a router upgraded against keys of the previous layout reads none of them (empty table: resync), and they stay intact', async () => {
    const ns = `old${randomBytes(4).toString('hex')}`;
    const v1 = `{sy:${ns}}:`; // the unversioned layout: gen / ld hashes, w1 in generation 0 holding h(1), h(2)
    await raw.set(`${v1}seq`, '1');
    await raw.hset(`${v1}gen`, 'w1', '0');
    await raw.hset(`${v1}last`, 'w1', '7');
    await raw.sadd(`${v1}g:0`, h(1), h(2));
    await raw.setbit(`${v1}b:${h(1)}`, 0, 1);
    await raw.setbit(`${v1}b:${h(2)}`, 0, 1);
    const oldLoad = Buffer.alloc(24);
    oldLoad.writeDoubleLE(100, 0); // 100 active blocks, 0 prefill tokens, 1 request
    oldLoad.writeDoubleLE(1, 16);
    await raw.hset(`${v1}ld`, 'w2', oldLoad);
    const t = await table(ns);
    expect(routingKeyPrefix(ns)).not.toBe(v1);
    expect(await t.lastEventId('w1')).toBe(-1);
    expect(await t.blockCount('w1')).toBe(0);
    expect(await t.applyEvents('w1', [stored(8, [h(9)])])).toMatchObject({ status: 'gap', lastEventId: -1 });
    const d = await t.selectAndReserve(req({ requestId: 'up1', blockHashes: hashes(1, 2), candidates: ['w1', 'w2'] }));
    expect(d.scores.map((x) => [x.worker, x.overlapBlocks, x.decodeBlocks])).toEqual([
      ['w1', 0, 4],
      ['w2', 0, 4],
    ]);
    expect([...(await t.loads(1_000_000)).keys()]).toEqual([d.worker]);
    await t.replaceWorker('w1', snapshot(7, hashes(1, 2)));
    await t.release('up1');
    const again = await t.selectAndReserve(req({ requestId: 'up2', blockHashes: hashes(1, 2), candidates: ['w1', 'w2'] }));
    expect([again.worker, again.overlapBlocks]).toEqual(['w1', 2]);
    expect(await raw.hget(`${v1}gen`, 'w1')).toBe('0');
    expect(await raw.hget(`${v1}last`, 'w1')).toBe('7');
  });

  it('a settlement that failed while Redis was down is sent again once it answers, not left until the reservation expires', async () => {
    const own = await startRedis({ persistence: true });
    try {
      const ns = `rt${randomBytes(4).toString('hex')}`;
      const t = await table(ns, own.url);
      const other = await table(ns, own.url);
      await t.selectAndReserve(req({ requestId: 'a', candidates: ['w1'], promptTokens: 32 }));
      await t.selectAndReserve(req({ requestId: 'b', candidates: ['w1'], promptTokens: 16 }));
      await t.selectAndReserve(req({ requestId: 'c', candidates: ['w1'], promptTokens: 16 }));
      expect((await other.loads(1_000_000)).get('w1')).toEqual({ activeBlocks: 4, prefillTokens: 64, requests: 3 });
      const outage = own.restart({ downMs: 1000 }); // the data survives (append-only file)
      await untilUnreachable(t);
      expect((await rejection(t.release('a'))).code).toBe('unavailable');
      expect((await rejection(t.markPrefillDone('b'))).code).toBe('unavailable');
      expect((await rejection(t.selectAndReserve(req({ requestId: 'd', candidates: ['w1'] })))).code).toBe('unavailable');
      await outage;
      // t makes no further call: the kept settlements go out by themselves once Redis answers
      await untilLoads(other, (loads) => loads.get('w1')?.requests === 2);
      expect((await other.loads(1_000_000)).get('w1')).toEqual({ activeBlocks: 2, prefillTokens: 16, requests: 2 });
      expect(t.droppedSettlements).toBe(0);
    } finally {
      await own.stop();
    }
  }, 60_000);

  it('more kept settlements than one call carries all go once Redis answers', async () => {
    const own = await startRedis({ persistence: true });
    try {
      const ns = `rt${randomBytes(4).toString('hex')}`;
      const t = await table(ns, own.url);
      const other = await table(ns, own.url);
      const ids = Array.from({ length: 700 }, (_, i) => `m${i}`);
      for (const id of ids) await t.selectAndReserve(req({ requestId: id, candidates: ['w1', 'w2'], promptTokens: 16 }));
      const outage = own.restart({ downMs: 1000 });
      await untilUnreachable(t);
      const failed = await Promise.all(ids.map((id) => rejection(id.endsWith('7') ? t.markPrefillDone(id) : t.release(id))));
      expect(failed.every((e) => e.code === 'unavailable')).toBe(true);
      await outage;
      await untilLoads(other, (loads) => (loads.get('w1')?.requests ?? 0) + (loads.get('w2')?.requests ?? 0) === 70);
      const loads = [...(await other.loads(1_000_000)).values()];
      expect(loads.reduce((a, l) => a + l.prefillTokens, 0)).toBe(0); // the 70 left had their prefill done
      expect(t.droppedSettlements).toBe(0);
    } finally {
      await own.stop();
    }
  }, 60_000);

  it('keeps at most maxRetainedSettlements failed settlements: the oldest are dropped, counted and logged', async () => {
    const own = await startRedis({ persistence: true });
    const warnings: unknown[] = [];
    const logger = { ...silentLogger, warn: (obj: unknown) => void warnings.push(obj), child: () => logger };
    try {
      const ns = `rt${randomBytes(4).toString('hex')}`;
      const t = await RedisRoutingTable.connect({ url: own.url, namespace: ns, logger, maxRetainedSettlements: 2 });
      open.push(t);
      const other = await table(ns, own.url);
      for (const id of ['a', 'b', 'c']) await t.selectAndReserve(req({ requestId: id, candidates: ['w1'], promptTokens: 16 }));
      const outage = own.restart({ downMs: 1000 });
      await untilUnreachable(t);
      for (const id of ['a', 'b', 'c']) expect((await rejection(t.release(id))).code).toBe('unavailable');
      expect(t.droppedSettlements).toBe(1); // a's release: the oldest
      await outage;
      await untilLoads(other, (loads) => loads.get('w1')?.requests === 1);
      expect((await other.loads(1_000_000)).get('w1')).toMatchObject({ requests: 1 }); // a stays until it expires
      expect(warnings).toContainEqual(expect.objectContaining({ dropped: 1 }));
    } finally {
      await own.stop();
    }
  }, 60_000);

  it('rejects unavailable while Redis is down (never hangs) and recovers after a restart', async () => {
    const own = await startRedis();
    try {
      const t = await table(undefined, own.url);
      await t.applyEvents('w1', [stored(0, hashes(1, 2))]);
      await own.restart(); // no persistence: data and script cache are gone
      let ok = false;
      const errors: string[] = [];
      const deadline = Date.now() + 10_000;
      while (!ok && Date.now() < deadline) {
        try {
          expect(await t.lastEventId('w1')).toBe(-1);
          ok = true;
        } catch (e) {
          errors.push(e instanceof SwitchyardError ? e.code : String(e));
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      expect(ok).toBe(true);
      expect(errors.every((c) => c === 'unavailable')).toBe(true);
      expect(await t.applyEvents('w1', [stored(5, [h(1)])])).toMatchObject({ status: 'gap', lastEventId: -1, expected: 0 });
      expect((await t.selectAndReserve(req({ candidates: ['w1'] }))).worker).toBe('w1');

      await own.stop();
      const started = Date.now();
      // a queued settlement riding on a decision that cannot reach Redis fails with it
      const calls = [t.lastEventId('w1'), t.markPrefillDone('y'), t.selectAndReserve(req({ candidates: ['w1'] })), t.loads(0), t.release('x')];
      for (const c of calls) expect((await rejection(c)).code).toBe('unavailable');
      expect(Date.now() - started).toBeLessThan(5000);
      await expect(RedisRoutingTable.connect({ url: own.url, namespace: 'x', connectTimeoutMs: 500 })).rejects.toMatchObject({ code: 'unavailable' });
    } finally {
      await own.stop();
    }
  }, 60_000);
});
