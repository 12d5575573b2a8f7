// KV transfer between two LlmEngines on the simulated executor (the mocker): leases, import, the
// continuation with outputTokenIds, expiry on a VirtualClock and by the real timer, refusals that keep
// nothing. The ONNX pair (real KV bytes, fp32 and fp16) is kv-transfer-onnx.test.ts.

import { describe, expect, it } from 'vitest';
import type { KvCacheEvent } from './kv-events.js';
import type { KvLayout, LlmKvTransfer } from './kv-transfer.js';
import type { GenerateOutput, GenerateRequest } from './llm-endpoint.js';
import { LlmEngine } from './llm-engine.js';
import { compileSamplingParams } from './sampling-params.js';
import { SimulatedExecutor, simulatedKvLayout } from './simulated-executor.js';
import { VirtualClock, systemClock, type Clock } from './timing-model.js';

const BS = 4;
const CONFIG = { num_hidden_layers: 4, num_attention_heads: 8, num_key_value_heads: 2, hidden_size: 256, torch_dtype: 'bfloat16', vocab_size: 100 };

function mocker(options: { numBlocks?: number; ttlMs?: number; clock?: Clock; config?: typeof CONFIG } = {}) {
  const clock = options.clock ?? new VirtualClock();
  const exec = new SimulatedExecutor({ clock, vocabSize: 100, kvTransfer: { blockSize: BS, modelConfig: options.config ?? CONFIG, gbps: 8 } });
  const events: KvCacheEvent[] = [];
  const engine = new LlmEngine({
    blockSize: BS,
    numBlocks: options.numBlocks ?? 64,
    maxModelLen: 128,
    executor: exec,
    clock,
    onKvEvent: (e) => events.push(e),
    ...(options.ttlMs === undefined ? {} : { kvTransferTtlMs: options.ttlMs }),
  });
  return { engine, exec, clock, events, xfer: engine.kvTransfer! };
}

async function collect(it: AsyncIterable<GenerateOutput>): Promise<GenerateOutput[]> {
  const out: GenerateOutput[] = [];
  for await (const o of it) out.push(o);
  return out;
}

const prompt = (n: number, base = 1): number[] => Array.from({ length: n }, (_, i) => (base + i * 7) % 100);
const sampling = (maxTokens: number, extra: Parameters<typeof compileSamplingParams>[0] = {}) =>
  compileSamplingParams({ temperature: 0, max_tokens: maxTokens, ...extra });
const tokensOf = (outs: readonly GenerateOutput[]): number[] => outs.flatMap((o) => o.tokenIds);

interface Side {
  readonly engine: LlmEngine;
  readonly xfer: LlmKvTransfer;
}

/** Prefill on `a`, pull every missing block into `b`, continue there. */
async function disaggregated(a: Side, b: Side, request: GenerateRequest) {
  const first = await collect(a.engine.generate({ ...request, prefillOnly: true }));
  const lease = first.at(-1)!.kvTransfer!;
  const imp = b.xfer.beginImport(request.promptTokenIds, lease.layout);
  imp.write(a.xfer.readBlocks(lease.leaseId, imp.missing));
  expect(a.xfer.releaseLease(lease.leaseId)).toBe(true);
  const rest = await collect(
    b.engine.generate({ ...request, outputTokenIds: tokensOf(first), sampling: { ...request.sampling, seed: lease.seed }, kvImport: imp }),
  );
  return { first, lease, imp, rest };
}


describe('KV transfer on the mocker', () => {
  it('layout comes from config.json; transfer time from the bytes and the bandwidth', () => {
    const { xfer } = mocker();
    // 4 layers × 2 × 2 kv heads × 4 tokens × (256 / 8 = 32) head dim × 2 bytes (bfloat16 → fp16)
    expect(xfer.layout).toMatchObject({ engine: 'mocker', dtype: 'fp16', numLayers: 4, numKvHeads: 2, headDim: 32, blockSize: BS, bytesPerBlock: 4 * 2 * 2 * 4 * 32 * 2 });
    // 10 blocks × 4096 bytes at 8 Gbit/s (1e9 bytes/s) = 0.04096 ms
    expect(xfer.simulatedTransferMs(10)).toBeCloseTo(0.04096, 9);
    expect(xfer.simulatedTransferMs(0)).toBe(0);
    // Another architecture is another model; defaults are documented (SIM_KV_DEFAULTS).
    expect(simulatedKvLayout({ ...CONFIG, num_hidden_layers: 5 }, BS, 100).modelId).not.toBe(xfer.layout.modelId);
    expect(simulatedKvLayout(undefined, 16, 100)).toMatchObject({ numLayers: 32, numKvHeads: 32, headDim: 128, dtype: 'fp32' });
  });

  it.each([
    ['a prompt of several blocks', 21],
    ['a prompt of whole blocks', 16],
    ['a prompt shorter than a block', 3],
  ])('continues %s token for token like one aggregated engine', async (_what, n) => {
    const a = mocker();
    const b = mocker();
    const c = mocker();
    const req: GenerateRequest = { requestId: 'r1', promptTokenIds: prompt(n), sampling: sampling(8) };
    const { first, lease, imp, rest } = await disaggregated(a, b, req);
    expect(first.at(-1)).toMatchObject({ finishReason: 'length', tokenIds: [expect.any(Number)] });
    expect(lease.blockHashes).toHaveLength(Math.floor(n / BS));
    expect(imp.missing).toEqual(lease.blockHashes);
    const whole = tokensOf(await collect(c.engine.generate(req)));
    expect([...tokensOf(first), ...tokensOf(rest)]).toEqual(whole);
    // usage counts the prior token as output; the imported blocks were prefix-cache hits
    expect(rest.at(-1)!.usage).toEqual({ promptTokens: n, completionTokens: 8, cachedTokens: Math.floor(n / BS) * BS });
    expect(rest.flatMap((o) => o.tokenIds)).toHaveLength(7);
    for (const e of [a, b]) {
      expect(e.xfer.pinnedBlocks()).toBe(0);
      expect(e.engine.metrics().kvActiveBlocks).toBe(0);
    }
    // The decode engine announced the imported blocks (the routing table learns it holds them).
    const stored = b.events.flatMap((e) => (e.data.type === 'stored' ? e.data.blocks.map((x) => x.block_hash) : []));
    for (const h of lease.blockHashes) expect(stored).toContain(h);
  });

  it('imports only what the decode engine lacks, and a later request hits the imported blocks', async () => {
    const a = mocker();
    const b = mocker();
    const p = prompt(22);
    // b already holds the first two blocks of p
    await collect(b.engine.generate({ requestId: 'warm', promptTokenIds: [...p.slice(0, 8), 99, 98, 97], sampling: sampling(1) }));
    const first = await collect(a.engine.generate({ requestId: 'r', promptTokenIds: p, sampling: sampling(5), prefillOnly: true }));
    const lease = first.at(-1)!.kvTransfer!;
    const imp = b.xfer.beginImport(p, lease.layout);
    expect(imp.cachedBlocks).toBe(2);
    expect(imp.missing).toEqual(lease.blockHashes.slice(2));
    expect(b.xfer.pinnedBlocks()).toBe(2);
    imp.write(a.xfer.readBlocks(lease.leaseId, imp.missing.slice(0, 1)));
    imp.write(a.xfer.readBlocks(lease.leaseId, imp.missing.slice(1)));
    expect(imp.written).toBe(3);
    expect(b.xfer.pinnedBlocks()).toBe(5);
    const rest = await collect(b.engine.generate({ requestId: 'r', promptTokenIds: p, outputTokenIds: tokensOf(first), sampling: sampling(5), kvImport: imp }));
    const whole = tokensOf(await collect(mocker().engine.generate({ requestId: 'r', promptTokenIds: p, sampling: sampling(5) })));
    expect([...tokensOf(first), ...tokensOf(rest)]).toEqual(whole);
    expect(b.xfer.pinnedBlocks()).toBe(0);
    // evictable but cached: another request on the same prompt hits all 5 blocks
    const again = await collect(b.engine.generate({ requestId: 'again', promptTokenIds: p, sampling: sampling(1) }));
    expect(again.at(-1)!.usage!.cachedTokens).toBe(20);
    a.xfer.releaseLease(lease.leaseId);
  });

  it('a lease expires after its TTL on a virtual clock: lazily on access and on the next step', async () => {
    const a = mocker({ ttlMs: 1000 });
    const first = await collect(a.engine.generate({ requestId: 'r', promptTokenIds: prompt(12), sampling: sampling(4), prefillOnly: true }));
    const lease = first.at(-1)!.kvTransfer!;
    expect(lease.expiresAt).toBe(a.clock.now() + 1000);
    expect(a.engine.metrics().kvActiveBlocks).toBe(3);
    (a.clock as VirtualClock).advanceTo(lease.expiresAt);
    // a step of another request expires it, without touching the lease
    await collect(a.engine.generate({ requestId: 'other', promptTokenIds: prompt(2, 50), sampling: sampling(1) }));
    expect(a.engine.metrics().kvActiveBlocks).toBe(0);
    expect(() => a.xfer.readBlocks(lease.leaseId, lease.blockHashes)).toThrow(expect.objectContaining({ code: 'not_found' }));
    expect(a.xfer.releaseLease(lease.leaseId)).toBe(false);

    const second = await collect(a.engine.generate({ requestId: 'r2', promptTokenIds: prompt(12, 3), sampling: sampling(4), prefillOnly: true }));
    expect(a.xfer.pinnedBlocks()).toBe(3);
    (a.clock as VirtualClock).advanceTo(second.at(-1)!.kvTransfer!.expiresAt);
    expect(a.xfer.pinnedBlocks()).toBe(0);
  });

  it('a lease expires by the timer with no traffic at all', async () => {
    const a = mocker({ ttlMs: 30, clock: systemClock });
    await collect(a.engine.generate({ requestId: 'r', promptTokenIds: prompt(8), sampling: sampling(4), prefillOnly: true }));
    expect(a.engine.metrics().kvActiveBlocks).toBe(2);
    await new Promise((r) => setTimeout(r, 120));
    expect(a.engine.metrics().kvActiveBlocks).toBe(0);
  });

  it('no lease for an aborted prefill, nor for a first token that ends the request', async () => {
    const a = mocker();
    const ac = new AbortController();
    ac.abort();
    const aborted = await collect(a.engine.generate({ requestId: 'x', promptTokenIds: prompt(12), sampling: sampling(4), prefillOnly: true }, ac.signal));
    expect(aborted.at(-1)).toMatchObject({ finishReason: 'abort' });
    expect(aborted.at(-1)!.kvTransfer).toBeUndefined();
    // aborted while its step runs (real time: the simulated prefill sleeps ~17 ms)
    const real = mocker({ clock: systemClock });
    const ac2 = new AbortController();
    const it2 = real.engine.generate({ requestId: 'y', promptTokenIds: prompt(40), sampling: sampling(4), prefillOnly: true }, ac2.signal);
    setTimeout(() => ac2.abort(), 5);
    const outs = await collect(it2);
    expect(outs.at(-1)!.kvTransfer).toBeUndefined();
    expect(real.xfer.pinnedBlocks()).toBe(0);
    expect(real.engine.metrics().kvActiveBlocks).toBe(0);
    const stop = a.exec.tokenAt('s', 12);
    const stopped = await collect(a.engine.generate({ requestId: 's', promptTokenIds: prompt(12), sampling: sampling(4, { stop_token_ids: [stop] }), prefillOnly: true }));
    expect(stopped.at(-1)).toMatchObject({ finishReason: 'stop', stopReason: stop });
    expect(stopped.at(-1)!.kvTransfer).toBeUndefined();
    expect(a.xfer.pinnedBlocks()).toBe(0);
    expect(a.engine.metrics().kvActiveBlocks).toBe(0);
  });

  it('refuses a layout mismatch with its reason, wrong hashes and payloads keeping nothing, and a full cache', async () => {
    const a = mocker();
    const b = mocker({ numBlocks: 3 });
    const p = prompt(21);
    const first = await collect(a.engine.generate({ requestId: 'r', promptTokenIds: p, sampling: sampling(4), prefillOnly: true }));
    const lease = first.at(-1)!.kvTransfer!;
    const other: KvLayout = mocker({ config: { ...CONFIG, num_hidden_layers: 8 } }).xfer.layout;
    expect(() => b.xfer.beginImport(p, other)).toThrow(expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining('KV layout mismatch: modelId') }));
    expect(() => b.xfer.beginImport(p, { ...lease.layout, blockSize: 8 })).toThrow(/blockSize is 8 on the prefill worker and 4 here/);
    expect(() => b.xfer.beginImport(p, null as unknown as KvLayout)).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    expect(() => b.xfer.beginImport([1, -2], lease.layout)).toThrow(expect.objectContaining({ code: 'invalid_argument' }));

    const imp = b.xfer.beginImport(p, lease.layout);
    const blocks = a.xfer.readBlocks(lease.leaseId, imp.missing);
    const before = b.events.length;
    expect(() => imp.write([blocks[1]!])).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    expect(() => imp.write([blocks[0]!, { hash: blocks[1]!.hash, data: new Uint8Array(8) }])).toThrow(/does not match/);
    expect(() => imp.write([{ hash: blocks[0]!.hash, data: new Uint8Array(9) }])).toThrow(/8 bytes, got 9/);
    expect(() => imp.write([null as never])).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    expect(imp.written).toBe(0);
    expect(b.events.length).toBe(before);
    // 5 blocks into a cache of 3: capacity, nothing kept
    expect(() => imp.write(blocks)).toThrow(expect.objectContaining({ code: 'capacity_exhausted' }));
    expect(imp.written).toBe(0);
    expect(b.engine.metrics().kvActiveBlocks).toBe(0);
    imp.write(blocks.slice(0, 2));
    expect(b.xfer.pinnedBlocks()).toBe(2);
    imp.release();
    imp.release();
    expect(b.xfer.pinnedBlocks()).toBe(0);
    expect(() => imp.write(blocks.slice(2, 3))).toThrow(/released/);
    // A lease reads only its own blocks.
    expect(() => a.xfer.readBlocks(lease.leaseId, ['0123456789abcdef'])).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    expect(() => a.xfer.readBlocks('nope', [])).toThrow(expect.objectContaining({ code: 'not_found' }));
    expect(() => a.xfer.readBlocks(lease.leaseId, Array(6).fill(lease.blockHashes[0]))).toThrow(/6 blocks asked of a lease of 5/);
    expect(() => a.xfer.readBlocks(lease.leaseId, 'x' as never)).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    expect(() => a.xfer.readBlocks(7 as never, [])).toThrow(expect.objectContaining({ code: 'not_found' }));
    expect(a.xfer.releaseLease({} as never)).toBe(false);
    a.xfer.releaseLease(lease.leaseId);
  });

  it('validates outputTokenIds and kvImport at admission, releasing a refused import', async () => {
    const b = mocker();
    const p = prompt(9);
    const bad = async (req: Partial<GenerateRequest>, what: RegExp) =>
      expect(collect(b.engine.generate({ requestId: 'v', promptTokenIds: p, sampling: sampling(4), ...req }))).rejects.toMatchObject({ code: 'invalid_argument', message: expect.stringMatching(what) });
    await bad({ outputTokenIds: [1, 2, 3, 4] }, /nothing is left to generate/);
    await bad({ outputTokenIds: [1, -1] }, /non-negative integers/);
    await bad({ outputTokenIds: [1.5] }, /non-negative integers/);
    await bad({ outputTokenIds: [1], prefillOnly: true }, /prefill-only/);
    await bad({ kvImport: { missing: [], cachedBlocks: 0, written: 0, write() {}, release() {} } }, /not a live import/);
    const imp = b.xfer.beginImport(prompt(9, 2), b.xfer.layout);
    await collect(b.engine.generate({ requestId: 'w', promptTokenIds: prompt(9, 2), sampling: sampling(2) })); // b now holds 2 blocks
    const imp2 = b.xfer.beginImport(prompt(9, 2), b.xfer.layout);
    expect(imp2.cachedBlocks).toBe(2);
    expect(b.xfer.pinnedBlocks()).toBe(2);
    // refused for its max_tokens: the import is released with it
    await bad({ kvImport: imp2, outputTokenIds: [1, 2, 3, 4] }, /nothing is left/);
    expect(b.xfer.pinnedBlocks()).toBe(0);
    await bad({ kvImport: imp2 }, /not a live import/);
    // an import in use cannot be handed to a second request
    const imp3 = b.xfer.beginImport(prompt(9, 2), b.xfer.layout);
    const running = collect(b.engine.generate({ requestId: 'u1', promptTokenIds: prompt(9, 2), sampling: sampling(3), kvImport: imp3 }));
    await bad({ kvImport: imp3 }, /already handed/);
    expect(() => imp3.write([])).toThrow(/handed to a request/);
    await running;
    expect(b.xfer.pinnedBlocks()).toBe(0);
    imp.release();
  });

  it('a decode request that is aborted releases its import', async () => {
    const a = mocker();
    const b = mocker({ clock: systemClock });
    const p = prompt(30);
    const first = await collect(a.engine.generate({ requestId: 'r', promptTokenIds: p, sampling: sampling(50), prefillOnly: true }));
    const lease = first.at(-1)!.kvTransfer!;
    const imp = b.xfer.beginImport(p, lease.layout);
    imp.write(a.xfer.readBlocks(lease.leaseId, imp.missing));
    a.xfer.releaseLease(lease.leaseId);
    expect(b.xfer.pinnedBlocks()).toBe(7);
    const ac = new AbortController();
    const outs: GenerateOutput[] = [];
    for await (const o of b.engine.generate({ requestId: 'r', promptTokenIds: p, outputTokenIds: tokensOf(first), sampling: sampling(50), kvImport: imp }, ac.signal)) {
      outs.push(o);
      if (outs.length === 2) ac.abort();
    }
    expect(outs.at(-1)!.finishReason).toBe('abort');
    expect(b.xfer.pinnedBlocks()).toBe(0);
    expect(b.engine.metrics().kvActiveBlocks).toBe(0);
    expect(a.xfer.pinnedBlocks()).toBe(0);
  });

  it('shutdown releases every lease and import', async () => {
    const a = mocker();
    const first = await collect(a.engine.generate({ requestId: 'r', promptTokenIds: prompt(16), sampling: sampling(4), prefillOnly: true }));
    expect(first.at(-1)!.kvTransfer!.blockHashes).toHaveLength(4);
    a.xfer.beginImport(prompt(16), a.xfer.layout); // pins the same 4 blocks again
    expect(a.xfer.pinnedBlocks()).toBe(8);
    await a.engine.shutdown();
    expect(a.xfer.pinnedBlocks()).toBe(0);
    expect(a.engine.metrics().kvActiveBlocks).toBe(0);
    expect(() => a.xfer.beginImport(prompt(16), a.xfer.layout)).toThrow(/shutting down/);
  });
});
