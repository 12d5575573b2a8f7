/**
 * The decode-side import flow (kv-import.ts) between two real simulated engines (mock_llm) over the
 * memory KV transfer plane: the prefill engine's lease is served by `engineKvBlockProvider`, the
 * decode engine pulls what it lacks.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@switchyard/common';
import { createEngine, type Engine } from '@switchyard/engine';
import { compileSamplingParams, type GenerateOutput, type LlmEndpoint } from '@switchyard/llm';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { MemoryKvTransferNetwork, MemoryKvTransferPlane, type KvTransferServer } from '@switchyard/runtime';
import { repoRoot } from '@switchyard/testing';
import type { WireKvTransferHandle } from '../protocols.js';
import { generateHandler } from './endpoints.js';
import { importKvBlocks, sleep, type KvImportOptions } from './kv-import.js';
import { engineKvBlockProvider, kvLayoutDigest, pinnedKvBlocks } from './kv-provider.js';

let repo: string;
beforeAll(() => {
  repo = mkdtempSync(join(tmpdir(), 'switchyard-kv-import-'));
  cpSync(join(repoRoot(), 'test/fixtures/llm_repository/mock_llm'), join(repo, 'mock_llm'), { recursive: true });
  for (const f of llmFixtureRepositoryFiles().filter((f) => f.path.startsWith('mock_llm/'))) {
    mkdirSync(dirname(join(repo, f.path)), { recursive: true });
    writeFileSync(join(repo, f.path), f.build());
  }
});
afterAll(() => rmSync(repo, { recursive: true, force: true }));

interface Pair {
  prefill: Engine;
  decode: Engine;
  network: MemoryKvTransferNetwork;
  server: KvTransferServer;
  plane: MemoryKvTransferPlane;
  prefillLlm: LlmEndpoint;
  decodeLlm: LlmEndpoint;
}
const open: Pair[] = [];
afterEach(async () => {
  for (const p of open.splice(0)) {
    await p.server.close();
    await p.plane.close();
    await Promise.all([p.prefill.shutdown(), p.decode.shutdown()]);
  }
});

async function pair(): Promise<Pair> {
  const start = () => createEngine({ modelRepositories: [repo], controlMode: 'explicit', startupModels: ['mock_llm'] });
  const [prefill, decode] = await Promise.all([start(), start()]);
  const network = new MemoryKvTransferNetwork();
  const server = await new MemoryKvTransferPlane(network).serve(engineKvBlockProvider(prefill));
  const p: Pair = { prefill, decode, network, server, plane: new MemoryKvTransferPlane(network), prefillLlm: prefill.llmEndpoint!('mock_llm')!, decodeLlm: decode.llmEndpoint!('mock_llm')! };
  open.push(p);
  return p;
}

const prompt = (n: number, offset = 0): number[] => Array.from({ length: n }, (_, i) => 10 + ((i + offset) % 200));
const sampling = (maxTokens: number) => compileSamplingParams({ max_tokens: maxTokens, temperature: 0 });

async function run(llm: LlmEndpoint, request: Parameters<LlmEndpoint['generate']>[0], signal?: AbortSignal): Promise<GenerateOutput[]> {
  const out: GenerateOutput[] = [];
  for await (const o of llm.generate(request, signal)) out.push(o);
  return out;
}

/** A prefill-only run on the prefill engine; its lease as the worker hands it out. */
async function prefillHandle(p: Pair, tokens: number[], requestId = 'r1'): Promise<{ handle: WireKvTransferHandle; first: number }> {
  const outputs = await run(p.prefillLlm, { requestId, promptTokenIds: tokens, sampling: sampling(8), prefillOnly: true });
  const last = outputs.at(-1)!;
  expect(last.finishReason).toBe('length');
  const lease = last.kvTransfer!;
  return {
    handle: { address: p.server.address, instanceId: 'prefill-1', leaseId: lease.leaseId, blockHashes: [...lease.blockHashes], layout: { ...lease.layout }, seed: lease.seed },
    first: outputs.flatMap((o) => o.tokenIds)[0]!,
  };
}

const options = (p: Pair, extra: Partial<KvImportOptions> = {}): KvImportOptions => ({ plane: p.plane, model: 'mock_llm', signal: new AbortController().signal, logger: silentLogger, sleep: async () => {}, ...extra });

async function until(cond: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('kvLayoutDigest', () => {
  it('is the same for equal layouts whatever the key order, and differs when any field differs', () => {
    const layout = { modelId: 'm', engine: 'llm', dtype: 'fp32', numLayers: 2, numKvHeads: 2, headDim: 8, blockSize: 16, bytesPerBlock: 4096 } as const;
    const reordered = Object.fromEntries(Object.entries(layout).reverse()) as unknown as typeof layout;
    expect(kvLayoutDigest(reordered)).toBe(kvLayoutDigest(layout));
    expect(kvLayoutDigest({ ...layout, extra: 1 } as typeof layout)).toBe(kvLayoutDigest(layout));
    for (const [k, v] of Object.entries({ modelId: 'n', engine: 'mocker', dtype: 'fp16', numLayers: 3, numKvHeads: 1, headDim: 16, blockSize: 32, bytesPerBlock: 4097 })) {
      expect(kvLayoutDigest({ ...layout, [k]: v }), k).not.toBe(kvLayoutDigest(layout));
    }
  });
});

describe('the simulated transfer wait (sleep)', () => {
  it('ends at its deadline, never before (no whole-millisecond rounding), and rejects at once on abort', async () => {
    const deadline = performance.now() + 0.3;
    await sleep(0.3, new AbortController().signal);
    expect(performance.now()).toBeGreaterThanOrEqual(deadline);
    const ctrl = new AbortController();
    const waiting = sleep(2_000, ctrl.signal);
    ctrl.abort(new Error('gone'));
    await expect(waiting).rejects.toMatchObject({ message: 'gone' });
    await expect(sleep(1, ctrl.signal)).rejects.toMatchObject({ message: 'gone' });
  });
});

describe('importKvBlocks', () => {
  it('pulls every full prompt block, releases the lease, and the decode engine continues with them as cache hits', async () => {
    const p = await pair();
    const tokens = prompt(70); // 4 full blocks of 16 + a tail of 6
    const { handle, first } = await prefillHandle(p, tokens);
    expect(handle.blockHashes).toHaveLength(4);
    expect(pinnedKvBlocks(p.prefill)).toBe(4);
    const waits: number[] = [];
    const outcome = await importKvBlocks(p.decodeLlm, tokens, handle, options(p, { sleep: async (ms) => void waits.push(ms) }));
    expect(outcome.report).toMatchObject({ pulledBlocks: 4, cachedBlocks: 0 });
    expect(outcome.report.fallback).toBeUndefined();
    expect(outcome.report.bytes).toBeGreaterThan(0);
    expect(outcome.kvImport!.written).toBe(4);
    // the mocker models the time its KV bytes would take
    expect(waits).toEqual([p.decodeLlm.kvTransfer!.simulatedTransferMs(4)]);
    expect(waits[0]).toBeGreaterThan(0);
    await until(() => pinnedKvBlocks(p.prefill) === 0);

    const outputs = await run(p.decodeLlm, { requestId: 'r1', promptTokenIds: tokens, outputTokenIds: [first], sampling: sampling(8), kvImport: outcome.kvImport! });
    const last = outputs.at(-1)!;
    expect(last.usage).toMatchObject({ promptTokens: 70, completionTokens: 8, cachedTokens: 64 });
    expect(outputs.flatMap((o) => o.tokenIds)).toHaveLength(7);
    // the engine released the import with the request
    expect(pinnedKvBlocks(p.decode)).toBe(0);
    expect(p.plane.counters().bytesIn).toBe(outcome.report.bytes);
  });

  it('pulls only the blocks the decode engine lacks (its own prefix cache counts)', async () => {
    const p = await pair();
    const shared = prompt(48);
    await run(p.decodeLlm, { requestId: 'warm', promptTokenIds: [...shared, 1, 2, 3], sampling: sampling(2) }); // 3 full blocks cached
    const tokens = [...shared, ...prompt(40, 99)]; // 5 full blocks, 3 of them on the decode side
    const { handle } = await prefillHandle(p, tokens);
    const outcome = await importKvBlocks(p.decodeLlm, tokens, handle, options(p));
    expect(outcome.report).toMatchObject({ pulledBlocks: 2, cachedBlocks: 3 });
    outcome.kvImport!.release();
    await until(() => pinnedKvBlocks(p.prefill) === 0 && pinnedKvBlocks(p.decode) === 0);
  });

  it('a prompt shorter than a block moves nothing and still releases the lease', async () => {
    const p = await pair();
    const tokens = prompt(10);
    const { handle } = await prefillHandle(p, tokens);
    const outcome = await importKvBlocks(p.decodeLlm, tokens, handle, options(p));
    expect(outcome.report).toMatchObject({ pulledBlocks: 0, cachedBlocks: 0, bytes: 0 });
    expect(outcome.kvImport).toBeDefined();
    outcome.kvImport!.release();
    expect(p.plane.counters().bytesIn).toBe(0);
  });

  it('falls back to a local prefill, saying why, on a layout mismatch, foreign hashes, a gone lease or a dead server', async () => {
    const p = await pair();
    const tokens = prompt(40);
    const cases: Array<[string, (h: WireKvTransferHandle) => WireKvTransferHandle, RegExp]> = [
      ['layout', (h) => ({ ...h, layout: { ...h.layout, blockSize: 32 } }), /KV layout mismatch: blockSize is 32 on the prefill worker and 16 here/],
      ['dtype', (h) => ({ ...h, layout: { ...h.layout, dtype: h.layout.dtype === 'fp16' ? 'fp32' : 'fp16' } }), /KV layout mismatch: dtype/],
      ['hashes', (h) => ({ ...h, blockHashes: [h.blockHashes[0]!, '0123456789abcdef'] }), /block hashes are not those of this prompt/],
      ['count', (h) => ({ ...h, blockHashes: h.blockHashes.slice(0, 1) }), /are not those of this prompt/],
      ['lease', (h) => ({ ...h, leaseId: 'no-such-lease' }), /KV transfer from memory:\d+ failed: unknown or expired KV transfer lease/],
      ['address', (h) => ({ ...h, address: 'memory:1' }), /KV transfer from memory:1 failed: .*nobody serves that address/],
    ];
    for (const [name, mutate, reason] of cases) {
      const { handle } = await prefillHandle(p, tokens, `r-${name}`);
      const outcome = await importKvBlocks(p.decodeLlm, tokens, mutate(handle), options(p));
      expect(outcome.kvImport, name).toBeUndefined();
      expect(outcome.report.fallback, name).toMatch(reason);
      expect(outcome.report.pulledBlocks, name).toBe(0);
      // both sides let go: the lease (released by the decode side, or by its TTL for a foreign address) and the import's pins
      if (name !== 'address' && name !== 'lease') await until(() => pinnedKvBlocks(p.prefill) === 0);
      p.prefillLlm.kvTransfer!.releaseLease(handle.leaseId);
      expect(pinnedKvBlocks(p.decode), name).toBe(0);
    }
    expect(pinnedKvBlocks(p.prefill)).toBe(0);
    // the local prefill that follows a fallback is an ordinary request
    const local = await run(p.decodeLlm, { requestId: 'local', promptTokenIds: tokens, outputTokenIds: [7], sampling: sampling(4) });
    expect(local.at(-1)!.usage).toMatchObject({ completionTokens: 4 });
  });

  it('a block the decode side cannot take (wrong size) is refused and nothing of it is used', async () => {
    const p = await pair();
    const tokens = prompt(40);
    const { handle } = await prefillHandle(p, tokens);
    // a provider that hands out the right hashes with a payload the decode engine refuses
    const liar = await new MemoryKvTransferPlane(p.network).serve({
      read: (req) => req.hashes.map((hash) => ({ hash, data: new Uint8Array(3) })),
      release: () => true,
    });
    try {
      const outcome = await importKvBlocks(p.decodeLlm, tokens, { ...handle, address: liar.address }, options(p));
      expect(outcome.kvImport).toBeUndefined();
      expect(outcome.report.fallback).toMatch(/KV transfer from memory:\d+ failed: imported block [0-9a-f]{16}/);
      expect(pinnedKvBlocks(p.decode)).toBe(0);
      // nothing of the refused payload became a cache hit
      const local = await run(p.decodeLlm, { requestId: 'after', promptTokenIds: tokens, sampling: sampling(2) });
      expect(local.at(-1)!.usage!.cachedTokens).toBe(0);
    } finally {
      await liar.close();
      p.prefillLlm.kvTransfer!.releaseLease(handle.leaseId);
    }
  });

  it('a cancelled request stops the transfer: cancelled, and both sides release their pins', async () => {
    const p = await pair();
    const tokens = prompt(40);
    const { handle } = await prefillHandle(p, tokens);
    const ctrl = new AbortController();
    const pending = importKvBlocks(p.decodeLlm, tokens, handle, options(p, { signal: ctrl.signal, sleep: (_ms, signal) => new Promise((_r, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))) }));
    await new Promise((r) => setTimeout(r, 20));
    ctrl.abort();
    await expect(pending).rejects.toMatchObject({ code: 'cancelled' });
    expect(pinnedKvBlocks(p.decode)).toBe(0);
    await until(() => pinnedKvBlocks(p.prefill) === 0);
  });

  it('an engine without KV transfer falls back', async () => {
    const p = await pair();
    const tokens = prompt(40);
    const { handle } = await prefillHandle(p, tokens);
    const { kvTransfer: _none, ...bare } = p.decodeLlm;
    const outcome = await importKvBlocks(bare as LlmEndpoint, tokens, handle, options(p));
    expect(outcome.report.fallback).toMatch(/cannot import KV blocks/);
    await until(() => pinnedKvBlocks(p.prefill) === 0);
  });
});

describe('generate handler, prefill side', () => {
  const payload = (requestId: string) => ({ v: 1, model: 'mock_llm', requestId, promptTokenIds: prompt(40), sampling: { max_tokens: 4 }, prefillOnly: true });
  const context = (requestId: string) => ({ requestId, signal: new AbortController().signal, deadline: null });

  it('a handle the caller took keeps its lease; one the caller never took is released at once', async () => {
    const p = await pair();
    const handler = generateHandler(p.prefill, { role: 'prefill', kvTransfer: { plane: p.plane, address: () => p.server.address, instanceId: 'prefill-1' } });

    // consumed to the end: the lease waits for the decode worker
    const frames: unknown[] = [];
    for await (const f of handler(payload('kept'), context('kept'))) frames.push(f);
    expect(frames.at(-1)).toMatchObject({ finishReason: 'length', kvTransfer: { address: p.server.address, instanceId: 'prefill-1' } });
    expect(pinnedKvBlocks(p.prefill)).toBe(2);
    p.prefillLlm.kvTransfer!.releaseLease((frames.at(-1) as { kvTransfer: { leaseId: string } }).kvTransfer.leaseId);

    // the stream is closed right after the frame with the handle was produced (the caller went away)
    const it = handler(payload('dropped'), context('dropped'))[Symbol.asyncIterator]();
    for (;;) {
      const next = await it.next();
      expect(next.done).toBe(false);
      if ((next.value as { kvTransfer?: unknown }).kvTransfer !== undefined) break;
    }
    expect(pinnedKvBlocks(p.prefill)).toBe(2);
    await it.return!();
    expect(pinnedKvBlocks(p.prefill)).toBe(0);
  });
});
