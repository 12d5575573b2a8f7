/**
 * KV transfer through the engine's LLM backends: the `llm` endpoint's layout names the ONNX file by its
 * SHA-256, the `mocker`'s comes from config.json with the engine's bandwidth, the lease TTL is the
 * engine option, and two engines hand a prompt's blocks from one to the other with output identical
 * to one aggregated engine.
 */
import { createHash } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileSamplingParams, type GenerateOutput, type GenerateRequest, type LlmEndpoint } from '@switchyard/llm';
import { llmFixtureRepositoryFiles } from '@switchyard/onnx-builder';
import { type Engine, createEngine } from '../engine.js';
import { compileEngineOptions } from '../options.js';

const FIXTURE = fileURLToPath(new URL('../../../../test/fixtures/llm_repository', import.meta.url));
const MODELS = ['tiny_llm', 'tiny_llm_fp16', 'mock_llm'];

let root: string;
const engines: Engine[] = [];

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'switchyard-llm-kv-transfer-'));
  for (const f of llmFixtureRepositoryFiles()) {
    await mkdir(join(root, f.path, '..'), { recursive: true });
    await writeFile(join(root, f.path), f.build());
  }
  for (const m of MODELS) await copyFile(join(FIXTURE, m, 'config.pbtxt'), join(root, m, 'config.pbtxt'));
  for (let i = 0; i < 3; i++) engines.push(await createEngine({ modelRepositories: [root], kvTransferTtlMs: 60_000, kvTransferGbps: 8 }));
}, 60_000);
afterAll(async () => {
  await Promise.all(engines.map((e) => e.shutdown()));
  await rm(root, { recursive: true, force: true });
});

async function collect(it: AsyncIterable<GenerateOutput>): Promise<GenerateOutput[]> {
  const out: GenerateOutput[] = [];
  for await (const o of it) out.push(o);
  return out;
}
const tokensOf = (outs: readonly GenerateOutput[]): number[] => outs.flatMap((o) => o.tokenIds);
const endpoint = (i: number, model: string): LlmEndpoint => engines[i]!.llmEndpoint(model)!;

describe('KV transfer through the LLM backends', () => {
  it('the llm layout names the ONNX file by its digest; the mocker layout comes from config.json', async () => {
    for (const m of ['tiny_llm', 'tiny_llm_fp16']) {
      const digest = createHash('sha256').update(await readFile(join(root, m, '1', 'model.onnx'))).digest('hex');
      expect(endpoint(0, m).kvTransfer!.layout).toMatchObject({ modelId: digest, engine: 'llm', dtype: m === 'tiny_llm' ? 'fp32' : 'fp16', numLayers: 2, numKvHeads: 2, headDim: 16, blockSize: 16 });
      // the same file on another engine: the same identity
      expect(endpoint(1, m).kvTransfer!.layout).toEqual(endpoint(0, m).kvTransfer!.layout);
    }
    const mock = endpoint(0, 'mock_llm').kvTransfer!;
    // config.json: 2 layers, 2 KV heads, head_dim 16, float32; block_size 16
    expect(mock.layout).toMatchObject({ engine: 'mocker', dtype: 'fp32', numLayers: 2, numKvHeads: 2, headDim: 16, bytesPerBlock: 2 * 2 * 2 * 16 * 16 * 4 });
    // 100 blocks of 8 KiB at 8 Gbit/s (1e9 bytes/s), divided by the model's speedup_ratio
    const speedup = Number(/speedup_ratio" value: \{ string_value: "([\d.]+)"/.exec(await readFile(join(root, 'mock_llm', 'config.pbtxt'), 'utf8'))?.[1] ?? 1);
    expect(mock.simulatedTransferMs(100)).toBeCloseTo((100 * 8192) / 1e9 * 1000 / speedup, 9);
  });

  it.each(['tiny_llm', 'tiny_llm_fp16', 'mock_llm'])('%s: prefill on one engine, decode on another, output as one engine', async (model) => {
    const prefill = endpoint(0, model);
    const decode = endpoint(1, model);
    const promptTokenIds = Array.from({ length: 53 }, (_, i) => (i * 29 + 5) % 380);
    const request: GenerateRequest = { requestId: `r-${model}`, promptTokenIds, sampling: compileSamplingParams({ temperature: 0.8, seed: 7, max_tokens: 12, ignore_eos: true }) };
    const whole = tokensOf(await collect(endpoint(2, model).generate(request)));

    const first = await collect(prefill.generate({ ...request, prefillOnly: true }));
    const lease = first.at(-1)!.kvTransfer!;
    expect(lease.blockHashes).toHaveLength(3);
    expect(lease.expiresAt).toBeGreaterThan(performance.now() + 50_000);
    const imp = decode.kvTransfer!.beginImport(promptTokenIds, lease.layout);
    imp.write(prefill.kvTransfer!.readBlocks(lease.leaseId, imp.missing));
    expect(prefill.kvTransfer!.releaseLease(lease.leaseId)).toBe(true);
    const rest = await collect(decode.generate({ ...request, outputTokenIds: tokensOf(first), sampling: { ...request.sampling, seed: lease.seed }, kvImport: imp }));
    expect([...tokensOf(first), ...tokensOf(rest)]).toEqual(whole);
    expect(rest.at(-1)!.usage).toMatchObject({ completionTokens: 12, cachedTokens: 48 });
    expect(prefill.kvTransfer!.pinnedBlocks() + decode.kvTransfer!.pinnedBlocks()).toBe(0);
  });

  it('validates the engine options', () => {
    const base = { modelRepositories: ['/m'] };
    expect(compileEngineOptions(base)).toMatchObject({ kvTransferTtlMs: 30_000, kvTransferGbps: 25 });
    for (const kvTransferTtlMs of [0, -1, 1.5, Number.NaN]) expect(() => compileEngineOptions({ ...base, kvTransferTtlMs })).toThrow(/KV transfer TTL/);
    for (const kvTransferGbps of [0, -1, Number.POSITIVE_INFINITY, Number.NaN]) expect(() => compileEngineOptions({ ...base, kvTransferGbps })).toThrow(/KV transfer bandwidth/);
  });
});
