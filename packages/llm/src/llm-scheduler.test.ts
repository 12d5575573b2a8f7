import { describe, expect, it } from 'vitest';
import { KvBlockManager } from './kv-block-manager.js';
import type { KvCacheEvent } from './kv-events.js';
import { LlmScheduler, type LlmSchedulerOptions, type SchedulerOutput } from './llm-scheduler.js';
import type { LlmRequest } from './llm-sequence.js';
import { SimulatedExecutor } from './simulated-executor.js';
import { VirtualClock } from './timing-model.js';

const BS = 4;

function setup(numBlocks: number, opts: LlmSchedulerOptions = {}) {
  const events: KvCacheEvent[] = [];
  const kv = new KvBlockManager({ numBlocks, blockSize: BS, onEvent: (e) => events.push(e) });
  const sched = new LlmScheduler(kv, { watermark: 0, ...opts });
  const exec = new SimulatedExecutor({ clock: new VirtualClock(), seed: 7 });
  return { kv, sched, exec, events };
}

const prompt = (base: number, n: number): number[] => Array.from({ length: n }, (_, i) => base + i);
const req = (id: string, p: number[], maxTokens: number, extra: Partial<LlmRequest> = {}): LlmRequest => ({
  requestId: id,
  promptTokenIds: p,
  maxTokens,
  ...extra,
});

/** Run steps until done; returns outputs per request and every SchedulerOutput. */
async function run(s: ReturnType<typeof setup>, maxSteps = 10_000) {
  const tokens = new Map<string, number[]>();
  const steps: SchedulerOutput[] = [];
  /** Prompt blocks pinned for a prefill-only request's lease (freed here at once). */
  const pinned = new Map<string, number>();
  for (let i = 0; i < maxSteps && s.sched.hasUnfinished(); i++) {
    const out = s.sched.schedule();
    steps.push(out);
    const res = await s.exec.execute(out);
    for (const o of s.sched.update(out, res.sampledTokens)) {
      tokens.set(o.requestId, [...(tokens.get(o.requestId) ?? []), ...o.newTokenIds]);
      if (o.pinnedBlocks !== undefined) {
        pinned.set(o.requestId, o.pinnedBlocks.length);
        s.sched.freePinned(o.pinnedBlocks);
      }
    }
    s.kv.assertInvariants();
  }
  expect(s.sched.hasUnfinished()).toBe(false);
  return { tokens, steps, pinned };
}

describe('LlmScheduler', () => {
  it('admission respects max_num_seqs and the token budget', () => {
    const s = setup(100, { maxNumSeqs: 2, maxNumBatchedTokens: 10 });
    s.sched.addRequest(req('a', prompt(0, 4), 3));
    s.sched.addRequest(req('b', prompt(100, 4), 3));
    s.sched.addRequest(req('c', prompt(200, 4), 3));
    const out = s.sched.schedule();
    // a takes 4, b takes 4, c: max_num_seqs reached.
    expect(out.scheduled.map((e) => [e.requestId, e.numNewTokens])).toEqual([['a', 4], ['b', 4]]);
    expect(out.numScheduledTokens).toBe(8);
    expect(s.sched.numWaiting).toBe(1);
  });

  it('admission stops when blocks (with watermark) run out', () => {
    const s = setup(10, { watermark: 0.2 });
    s.sched.addRequest(req('a', prompt(0, 16), 4)); // 4 blocks
    s.sched.addRequest(req('b', prompt(100, 16), 4)); // 4 more would leave 2 = floor(0.2*10): allowed
    s.sched.addRequest(req('c', prompt(200, 4), 4)); // 1 more would leave 1 < 2: refused
    const out = s.sched.schedule();
    expect(out.scheduled.map((e) => e.requestId)).toEqual(['a', 'b']);
    expect(s.kv.stats().active).toBe(8);
  });

  it('chunked prefill computes a long prompt over several steps, then decodes one token per step', async () => {
    const s = setup(100, { maxNumBatchedTokens: 8 });
    s.sched.addRequest(req('a', prompt(0, 20), 3));
    const chunks: number[] = [];
    const samples: boolean[] = [];
    for (let i = 0; i < 6; i++) {
      const out = s.sched.schedule();
      chunks.push(out.scheduled[0]?.numNewTokens ?? 0);
      samples.push(out.scheduled[0]?.samples ?? false);
      s.sched.update(out, (await s.exec.execute(out)).sampledTokens);
    }
    expect(chunks).toEqual([8, 8, 4, 1, 1, 0]);
    expect(samples).toEqual([false, false, true, true, true, false]);
    expect(s.sched.hasUnfinished()).toBe(false);
  });

  it("a step's entries give the tokens they compute and the request's arrays, the same on every read", async () => {
    const s = setup(100, { maxNumBatchedTokens: 8 });
    const p = prompt(100, 10);
    const seq = s.sched.addRequest(req('a', p, 3, { outputTokenIds: [7] }));
    const first = s.sched.schedule();
    const e = first.scheduled[0]!;
    expect(e.tokenIds).toEqual(p.slice(0, 8));
    expect(e.tokenIds).toBe(e.tokenIds);
    expect(e.promptTokenIds).toEqual(p);
    expect(e.promptTokenIds).toBe(seq.promptTokenIds);
    expect(e.priorOutputTokenIds).toEqual([7]);
    expect(e.endTokenIds).toBe(seq.eosTokenIds);
    expect(e.sampling).toBe(undefined);
    s.sched.update(first, (await s.exec.execute(first)).sampledTokens);
    const second = s.sched.schedule();
    expect(second.scheduled[0]!.tokenIds).toEqual([108, 109, 7]);
    const sampled = (await s.exec.execute(second)).sampledTokens;
    s.sched.update(second, sampled);
    // read after the step (the sequence has grown since): still the tokens of that step
    expect(second.scheduled[0]).toMatchObject({ numComputedTokens: 8, numNewTokens: 3, tokenIds: [108, 109, 7], samples: true });
    const third = s.sched.schedule();
    expect(third.scheduled[0]!.tokenIds).toEqual([sampled.get('a')]);
    s.sched.update(third, (await s.exec.execute(third)).sampledTokens);
  });

  it("a step's block lists stay as they were at schedule() while later steps promote and add blocks", async () => {
    // a 3-token budget: some chunks complete no block, so the next one adds a block to the list the last step holds
    const s = setup(100, { maxNumBatchedTokens: 3 });
    s.sched.addRequest(req('a', prompt(0, 13), 11));
    s.sched.addRequest(req('b', prompt(0, 9), 9)); // shares a's first blocks once they are computed
    const seen: { blocks: readonly { id: string; slot: number; full: boolean }[]; at: string }[] = [];
    const snap = (blocks: readonly { id: string; slot: number; full: boolean }[]): string => JSON.stringify(blocks.map((b) => [b.id, b.slot, b.full]));
    while (s.sched.hasUnfinished()) {
      const out = s.sched.schedule();
      for (const e of out.scheduled) seen.push({ blocks: e.blocks, at: snap(e.blocks) });
      s.sched.update(out, (await s.exec.execute(out)).sampledTokens);
    }
    expect(seen.length).toBeGreaterThan(20);
    for (const x of seen) expect(snap(x.blocks)).toBe(x.at);
    // both kinds of change happened: blocks promoted to full, and blocks added
    expect(new Set(seen.map((x) => x.at)).size).toBeGreaterThan(4);
  });

  it('without chunked prefill a prompt waits for a step with room', () => {
    const s = setup(100, { maxNumBatchedTokens: 8, enableChunkedPrefill: false });
    s.sched.addRequest(req('a', prompt(0, 20), 3));
    expect(s.sched.schedule().scheduled).toEqual([]);
  });

  it('finishes on EOS and on max_tokens, freeing blocks; prefill-only stops after one token', async () => {
    const s = setup(100);
    const eos = s.exec.tokenAt('e', 6); // the token 'e' samples at position 6 (its 3rd output)
    s.sched.addRequest(req('e', prompt(0, 4), 10, { eosTokenIds: [eos] }));
    s.sched.addRequest(req('m', prompt(50, 4), 5));
    s.sched.addRequest(req('p', prompt(90, 8), 50, { prefillOnly: true }));
    const { tokens, pinned } = await run(s);
    // Only the prefill-only request that finished with 'length' pins its prompt's full blocks.
    expect([...pinned]).toEqual([['p', Math.floor(8 / s.kv.blockSize)]]);
    expect(tokens.get('e')).toHaveLength(3);
    expect(tokens.get('e')![2]).toBe(eos);
    expect(tokens.get('m')).toHaveLength(5);
    expect(tokens.get('p')).toHaveLength(1);
    expect(s.kv.stats().active).toBe(0);
  });

  it('preemption (LIFO, recompute) yields the same tokens as an unconstrained run', async () => {
    const reqs = [req('a', prompt(0, 6), 14), req('b', prompt(100, 6), 14), req('c', prompt(200, 6), 14)];
    const big = setup(100);
    for (const r of reqs) big.sched.addRequest(r);
    const ref = await run(big);
    expect(ref.steps.every((o) => o.preempted.length === 0)).toBe(true);

    const small = setup(8); // each needs 5 blocks at the end: all three cannot stay
    for (const r of reqs) small.sched.addRequest(r);
    const got = await run(small);
    const preempted = got.steps.flatMap((o) => o.preempted);
    expect(preempted.length).toBeGreaterThan(0);
    expect(preempted[0]).toBe('c'); // newest first
    expect(got.tokens).toEqual(ref.tokens);
    expect(small.kv.stats().active).toBe(0);
  });

  it('a cached prefix counts as computed and costs no prefill time', async () => {
    const shared = prompt(0, 16);
    const cold = setup(100);
    cold.sched.addRequest(req('x', [...shared, 1000, 1001], 2));
    await run(cold);
    const coldPrefill = cold.exec.prefillTokens;
    const coldMs = cold.exec.busyMs;
    // Same engine, second request with the same 16-token prefix: 4 blocks hit.
    cold.sched.addRequest(req('y', [...shared, 2000, 2001], 2));
    const out = cold.sched.schedule();
    expect(out.scheduled[0]).toMatchObject({ numCachedTokens: 16, numComputedTokens: 16, numNewTokens: 2 });
    cold.sched.update(out, (await cold.exec.execute(out)).sampledTokens);
    await run(cold);
    expect(cold.exec.prefillTokens - coldPrefill).toBe(2);
    expect(cold.exec.busyMs - coldMs).toBeLessThan(coldMs);
    expect(cold.kv.stats().hitBlocks).toBeGreaterThanOrEqual(4);
  });

  it('blocks become prefix-cache hits only after the step that computes them', () => {
    const s = setup(100);
    s.sched.addRequest(req('x', prompt(0, 8), 2));
    s.sched.addRequest(req('y', prompt(0, 8), 1));
    const first = s.sched.schedule();
    // x's blocks are still being computed in this step: y cannot hit them and computes its whole prompt.
    expect(first.scheduled.map((e) => [e.requestId, e.numComputedTokens, e.numNewTokens])).toEqual([
      ['x', 0, 8],
      ['y', 0, 8],
    ]);
    expect(s.events.filter((e) => e.data.type === 'stored')).toHaveLength(0);
    s.sched.update(first, new Map([['x', 1], ['y', 1]]));
    // Both computed the same two blocks: x's are stored, y's promotion lands on them.
    expect(s.events.filter((e) => e.data.type === 'stored').flatMap((e) => (e.data.type === 'stored' ? e.data.blocks : []))).toHaveLength(2);
    expect(s.kv.stats().active).toBe(2); // the two full blocks, now x's alone (y finished); no duplicate slots
  });

  it('a fully cached prompt still recomputes its last token, inside a full (shared) block', () => {
    const s = setup(100);
    s.sched.addRequest(req('x', prompt(0, 8), 1));
    const first = s.sched.schedule();
    s.sched.update(first, new Map([['x', 1]]));
    const stored = s.events.length;
    s.sched.addRequest(req('y', prompt(0, 8), 1));
    const out = s.sched.schedule();
    expect(out.scheduled.map((e) => [e.requestId, e.numComputedTokens, e.numNewTokens, e.numCachedTokens])).toEqual([['y', 7, 1, 7]]);
    // Both blocks are the cached ones (token 7's KV exists already: executors skip writing it), not a
    // fresh partial block whose tokens 4..6 would have no KV.
    expect(out.scheduled[0]!.blocks.map((b) => b.full)).toEqual([true, true]);
    expect(s.kv.stats().active).toBe(2);
    s.sched.update(out, new Map([['y', 1]]));
    expect(s.events).toHaveLength(stored);
  });

  it('KV events flow from the block manager during a run and match its snapshot', async () => {
    const s = setup(100);
    s.sched.addRequest(req('a', prompt(0, 9), 8));
    await run(s);
    const stored = s.events.filter((e) => e.data.type === 'stored');
    // 9 prompt + 8 output = 17 tokens → 4 full blocks; the 8th output is never computed, so 16 tokens
    // are hashed and stored, each block by promotion after the step that computed its last token.
    const hashes = stored.flatMap((e) => (e.data.type === 'stored' ? e.data.blocks.map((b) => b.block_hash) : []));
    expect(hashes).toHaveLength(4);
    expect(s.kv.snapshot().blocks.map((b) => b.block_hash)).toEqual(hashes);
    expect(s.events.map((e) => e.event_id)).toEqual(s.events.map((_, i) => i));
  });

  it('a prefill-only request leaves its full prompt blocks resident and pinnable', async () => {
    const s = setup(100);
    const seq = s.sched.addRequest(req('p', prompt(0, 10), 99, { prefillOnly: true }));
    await run(s);
    expect(seq.status).toBe('finished');
    expect(seq.finishReason).toBe('length');
    const hashes = seq.fullBlockSpecs().slice(0, 2).map((b) => b.sequenceHash);
    expect(s.kv.findCachedPrefix(hashes)).toBe(2);
    const pinned = s.kv.pin(hashes);
    expect(pinned).toHaveLength(2);
    s.kv.free(pinned!);
  });

  it('rejects requests that can never fit and duplicate ids; abort frees blocks', () => {
    const s = setup(4);
    expect(() => s.sched.addRequest(req('big', prompt(0, 14), 4))).toThrow(/KV blocks/);
    s.sched.addRequest(req('a', prompt(0, 5), 2));
    expect(() => s.sched.addRequest(req('a', prompt(0, 5), 2))).toThrow(/duplicate/);
    const out = s.sched.schedule();
    s.sched.update(out, new Map([['a', 1]]));
    expect(s.kv.stats().active).toBe(2);
    expect(s.sched.abort('a')).toBe(true);
    expect(s.kv.stats().active).toBe(0);
    expect(s.sched.hasUnfinished()).toBe(false);
  });
});

describe('LlmScheduler under pressure (randomised)', () => {
  it('tight caches, chunking and shared prefixes never change the generated tokens', async () => {
    let x = 12345;
    const rnd = (n: number): number => ((x = (Math.imul(x, 1103515245) + 12345) >>> 0) % n);
    let preemptions = 0;
    for (let trial = 0; trial < 8; trial++) {
      const reqs: LlmRequest[] = [];
      for (let i = 0; i < 12; i++) {
        const shared = rnd(3) === 0 ? prompt(0, 8) : [];
        reqs.push(req(`t${trial}r${i}`, [...shared, ...prompt(1000 * (i + 1), 1 + rnd(20))], 1 + rnd(12)));
      }
      const ref = setup(1000);
      for (const r of reqs) ref.sched.addRequest(r);
      const want = (await run(ref)).tokens;
      const tight = setup(12 + rnd(6), { maxNumBatchedTokens: 4 + rnd(16), maxNumSeqs: 1 + rnd(8) });
      for (const r of reqs) tight.sched.addRequest(r);
      const got = await run(tight);
      expect(got.tokens).toEqual(want);
      preemptions += got.steps.reduce((n, o) => n + o.preempted.length, 0);
      expect(tight.kv.stats().active).toBe(0);
      for (const o of got.steps) expect(o.numScheduledTokens).toBeLessThanOrEqual(tight.sched.maxNumBatchedTokens);
    }
  });
});
