import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTinyDecoderModel, TINY_DECODER_SHAPE } from '@switchyard/onnx-builder';
import { createOrtDecoderSession, type DecoderSession, type DecoderTensor } from './decoder-session.js';
import type { GenerateOutput } from './llm-endpoint.js';
import { LlmEngine } from './llm-engine.js';
import { OnnxExecutor } from './onnx-executor.js';
import { compileSamplingParams } from './sampling-params.js';
import { argmax } from './sampling.js';

const { numLayers: L, numKvHeads: H, headDim: D, vocabSize: V } = TINY_DECODER_SHAPE;
const sessions: Record<'FLOAT' | 'FLOAT16', DecoderSession> = {} as never;

beforeAll(async () => {
  sessions.FLOAT = await createOrtDecoderSession(buildTinyDecoderModel({ kvType: 'FLOAT' }));
  sessions.FLOAT16 = await createOrtDecoderSession(buildTinyDecoderModel({ kvType: 'FLOAT16' }));
});
afterAll(async () => {
  await Promise.all(Object.values(sessions).map((s) => s.release()));
});

/** Greedy tokens by recomputing the whole sequence from scratch each step (no KV cache). */
async function recompute(session: DecoderSession, prompt: readonly number[], n: number, fp16: boolean): Promise<number[]> {
  const tokens = [...prompt];
  const out: number[] = [];
  for (let step = 0; step < n; step++) {
    const T = tokens.length;
    const feeds: Record<string, DecoderTensor> = {
      input_ids: { type: 'int64', dims: [1, T], data: BigInt64Array.from(tokens, BigInt) },
      attention_mask: { type: 'int64', dims: [1, T], data: new BigInt64Array(T).fill(1n) },
      position_ids: { type: 'int64', dims: [1, T], data: BigInt64Array.from(tokens.map((_, i) => BigInt(i))) },
    };
    for (let l = 0; l < L; l++) {
      for (const kind of ['key', 'value']) {
        feeds[`past_key_values.${l}.${kind}`] = { type: fp16 ? 'float16' : 'float32', dims: [1, H, 0, D], data: fp16 ? new Uint16Array(0) : new Float32Array(0) };
      }
    }
    const res = await session.run(feeds);
    const logits = res['logits']!.data as Float32Array;
    const next = argmax(logits.subarray((T - 1) * V, T * V));
    out.push(next);
    tokens.push(next);
  }
  return out;
}

function makeEngine(kvType: 'FLOAT' | 'FLOAT16', numBlocks = 128, blockSize = 4, maxNumSeqs = 32) {
  const executor = OnnxExecutor.create(sessions[kvType], { numBlocks, blockSize, vocabSize: V });
  return new LlmEngine({ blockSize, numBlocks, maxModelLen: 256, executor, scheduler: { maxNumSeqs, maxNumBatchedTokens: 64 } });
}

async function generate(engine: LlmEngine, id: string, prompt: number[], n: number, fields = {}): Promise<{ tokens: number[]; last: GenerateOutput }> {
  const tokens: number[] = [];
  let last: GenerateOutput | undefined;
  const sampling = compileSamplingParams({ temperature: 0, max_tokens: n, ...fields });
  for await (const o of engine.generate({ requestId: id, promptTokenIds: prompt, sampling })) {
    tokens.push(...o.tokenIds);
    last = o;
  }
  return { tokens, last: last! };
}

const promptOf = (len: number, seed: number): number[] => Array.from({ length: len }, (_, i) => (seed * 31 + i * 17) % (V - 3));

describe('OnnxExecutor', () => {
  it('refuses a model without the decoder signature', () => {
    const session = { ...sessions.FLOAT, inputMetadata: sessions.FLOAT.inputMetadata.filter((m) => !m.name.startsWith('past_key_values')) };
    expect(() => OnnxExecutor.create(session, { numBlocks: 4, blockSize: 4 })).toThrow(/past_key_values/);
    expect(() => OnnxExecutor.create(sessions.FLOAT, { numBlocks: 4, blockSize: 4, kvCacheDtype: 'fp16' })).toThrow(/does not match/);
  });

  for (const kvType of ['FLOAT', 'FLOAT16'] as const) {
    it(`greedy decoding with paged KV equals recomputing from scratch (${kvType})`, async () => {
      const prompt = promptOf(11, 1);
      const expected = await recompute(sessions[kvType], prompt, 12, kvType === 'FLOAT16');
      const { tokens, last } = await generate(makeEngine(kvType), 'a', prompt, 12);
      expect(tokens).toEqual(expected);
      expect(last.finishReason).toBe('length');
    });
  }

  it('a prefix-cache hit gives the same output as a miss and computes fewer tokens', async () => {
    const engine = makeEngine('FLOAT');
    const prompt = promptOf(14, 2);
    const miss = await generate(engine, 'a', prompt, 8);
    const hit = await generate(engine, 'b', prompt, 8);
    expect(miss.last.usage!.cachedTokens).toBe(0);
    expect(hit.last.usage!.cachedTokens).toBe(12);
    expect(hit.tokens).toEqual(miss.tokens);
    // A prompt sharing only the first blocks also matches its own recompute.
    const branch = [...prompt.slice(0, 8), 5, 6, 7];
    const fromCache = await generate(engine, 'c', branch, 6);
    expect(fromCache.last.usage!.cachedTokens).toBe(8);
    expect(fromCache.tokens).toEqual(await recompute(sessions.FLOAT, branch, 6, false));
  });

  it('identical prompts admitted in the same step each compute their KV (no hit on blocks not yet computed)', async () => {
    const engine = makeEngine('FLOAT');
    const prompt = promptOf(13, 5);
    const [a, b] = await Promise.all([generate(engine, 'a', prompt, 6), generate(engine, 'b', prompt, 6)]);
    const expected = await recompute(sessions.FLOAT, prompt, 6, false);
    expect(a.tokens).toEqual(expected);
    expect(b.tokens).toEqual(expected);
    expect(b.last.usage!.cachedTokens).toBe(0);
    // Afterwards the blocks are in the prefix cache.
    const c = await generate(engine, 'c', prompt, 6);
    expect(c.last.usage!.cachedTokens).toBe(12);
    expect(c.tokens).toEqual(expected);
  });

  it('16 concurrent sequences of different lengths give the tokens each gives alone', async () => {
    const prompts = Array.from({ length: 16 }, (_, i) => promptOf(3 + i * 2, 10 + i));
    const alone: number[][] = [];
    for (const [i, p] of prompts.entries()) alone.push((await generate(makeEngine('FLOAT'), `s${i}`, p, 6)).tokens);
    const engine = makeEngine('FLOAT');
    const together = await Promise.all(prompts.map((p, i) => generate(engine, `t${i}`, p, 6)));
    expect(together.map((r) => r.tokens)).toEqual(alone);
  });

  it('preemption with recompute (a cache too small for all) gives identical output', async () => {
    const prompts = Array.from({ length: 6 }, (_, i) => promptOf(9 + i, 40 + i));
    const big = makeEngine('FLOAT');
    const expected = await Promise.all(prompts.map((p, i) => generate(big, `e${i}`, p, 16)));
    const small = makeEngine('FLOAT', 16, 4, 6);
    const got = await Promise.all(prompts.map((p, i) => generate(small, `g${i}`, p, 16)));
    expect(got.map((r) => r.tokens)).toEqual(expected.map((r) => r.tokens));
    expect(small.metrics().numPreemptions).toBeGreaterThan(0);
    expect(small.metrics().kvActiveBlocks).toBe(0);
  });

  it('seeded sampling is reproducible, and differs across seeds', async () => {
    const engine = makeEngine('FLOAT');
    const prompt = promptOf(7, 3);
    const run = (id: string, seed: number) => generate(engine, id, prompt, 10, { temperature: 1.5, seed });
    const a = await run('a', 7);
    const b = await run('b', 7);
    const c = await run('c', 8);
    expect(a.tokens).toEqual(b.tokens);
    expect(c.tokens).not.toEqual(a.tokens);
  });

  it('reports the log-probability of each token when asked', async () => {
    const engine = makeEngine('FLOAT');
    const outs: GenerateOutput[] = [];
    const sampling = compileSamplingParams({ temperature: 0, max_tokens: 4, logprobs: true });
    for await (const o of engine.generate({ requestId: 'lp', promptTokenIds: promptOf(5, 9), sampling })) outs.push(o);
    const lps = outs.flatMap((o) => o.logprobs ?? []);
    expect(lps).toHaveLength(4);
    for (const lp of lps) expect(lp).toBeLessThanOrEqual(0);
  });
});
