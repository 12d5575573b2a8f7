// OnnxExecutor with the tiny Optimum-signature decoder, driven through EngineCore + LlmScheduler +
// KvBlockManager (and once through LlmEngine). The oracle is the model itself run from scratch: the
// whole token sequence with an empty past, argmax at the last position, one step at a time.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { buildTinyDecoderModel, TINY_DECODER_SHAPE } from '@switchyard/onnx-builder';
import { createOrtDecoderSession, type DecoderSession, type DecoderTensor } from './decoder-session.js';
import { EngineCore } from './engine-core.js';
import { KvBlockManager } from './kv-block-manager.js';
import type { KvCacheEvent } from './kv-events.js';
import type { GenerateOutput } from './llm-endpoint.js';
import { LlmEngine } from './llm-engine.js';
import { LlmScheduler } from './llm-scheduler.js';
import type { LlmSequence } from './llm-sequence.js';
import { OnnxExecutor, THREAD_SAMPLING_MIN_VOCAB } from './onnx-executor.js';
import { compileSamplingParams, type CompiledSamplingParams, type SamplingParams } from './sampling-params.js';
import { argmax, logSoftmaxAt, type TopLogprobs } from './sampling.js';
import { SAMPLED_OUTPUT } from './sampling-rows.js';
import { systemClock } from './timing-model.js';

type KvType = 'FLOAT' | 'FLOAT16';
const { numLayers: L, numKvHeads: H, headDim: D, vocabSize: V } = TINY_DECODER_SHAPE;
const sessions: Record<KvType, DecoderSession> = {} as never;

beforeAll(async () => {
  sessions.FLOAT = await createOrtDecoderSession(buildTinyDecoderModel({ kvType: 'FLOAT' }));
  sessions.FLOAT16 = await createOrtDecoderSession(buildTinyDecoderModel({ kvType: 'FLOAT16' }));
});
afterAll(async () => {
  await Promise.all(Object.values(sessions).map((s) => s.release()));
});

/** Greedy tokens by recomputing the whole sequence from scratch each step (no KV cache). */
async function recompute(prompt: readonly number[], n: number, kvType: KvType = 'FLOAT'): Promise<number[]> {
  return (await oracle(prompt, n, kvType)).tokens;
}

/** `recompute`, with the log-probability of each chosen token. */
async function oracle(prompt: readonly number[], n: number, kvType: KvType = 'FLOAT'): Promise<{ tokens: number[]; logprobs: number[] }> {
  const fp16 = kvType === 'FLOAT16';
  const tokens = [...prompt];
  const out: number[] = [];
  const logprobs: number[] = [];
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
    const res = await sessions[kvType].run(feeds);
    const last = (res['logits']!.data as Float32Array).subarray((T - 1) * V, T * V);
    const next = argmax(last);
    out.push(next);
    logprobs.push(logSoftmaxAt(last, next));
    tokens.push(next);
  }
  return { tokens: out, logprobs };
}

/** Log-probabilities agree to `digits` decimals (the KV the executor paged in is the KV recomputed). */
function expectCloseAll(got: readonly number[] | undefined, want: readonly number[], digits: number): void {
  expect(got).toHaveLength(want.length);
  got!.forEach((x, i) => expect(x).toBeCloseTo(want[i]!, digits));
}

/** One session.run as the model saw it. */
interface RunCall {
  readonly rows: number;
  readonly newTokens: number;
  readonly past: number;
  /** KV events emitted before this run started (stored events must not appear mid-step). */
  readonly eventsBefore: number;
}

interface HarnessOptions {
  readonly kvType?: KvType;
  readonly numBlocks?: number;
  readonly blockSize?: number;
  readonly maxNumSeqs?: number;
  readonly maxNumBatchedTokens?: number;
  /** Wraps the session (metadata or run changes); default none. */
  readonly wrap?: (s: DecoderSession) => DecoderSession;
  /** Executor seed for unseeded requests. */
  readonly seed?: number;
}

function harness(o: HarnessOptions = {}) {
  const numBlocks = o.numBlocks ?? 128;
  const blockSize = o.blockSize ?? 4;
  const events: KvCacheEvent[] = [];
  const calls: RunCall[] = [];
  const state = { fail: false };
  const base = sessions[o.kvType ?? 'FLOAT'];
  const spied: DecoderSession = {
    ...base,
    async run(feeds, sampleRows) {
      const [rows, newTokens] = feeds['input_ids']!.dims as [number, number];
      calls.push({ rows, newTokens, past: feeds['past_key_values.0.key']!.dims[2]!, eventsBefore: events.length });
      if (state.fail) throw new Error('simulated onnxruntime failure');
      return base.run(feeds, sampleRows);
    },
  };
  const session = o.wrap === undefined ? spied : o.wrap(spied);
  const kv = new KvBlockManager({ numBlocks, blockSize, onEvent: (e) => events.push(e) });
  const sched = new LlmScheduler(kv, { maxNumSeqs: o.maxNumSeqs ?? 32, maxNumBatchedTokens: o.maxNumBatchedTokens ?? 64 });
  const executor = OnnxExecutor.create(session, { numBlocks, blockSize, vocabSize: V, threadSamplingMinVocab: 0, ...(o.seed === undefined ? {} : { seed: o.seed }) });
  const core = new EngineCore(sched, executor, systemClock);
  const seqs = new Map<string, LlmSequence>();
  const tokens = new Map<string, number[]>();
  const logprobs = new Map<string, number[]>();
  const topLogprobs = new Map<string, TopLogprobs[]>();
  /** One engine step; its sampled tokens (and logprobs, when asked) are collected per request. */
  const step = async () => {
    const r = await core.step();
    for (const out of r.outputs) tokens.set(out.requestId, [...(tokens.get(out.requestId) ?? []), ...out.newTokenIds]);
    for (const [id, lp] of r.logprobs ?? []) logprobs.set(id, [...(logprobs.get(id) ?? []), lp]);
    for (const [id, top] of r.topLogprobs ?? []) topLogprobs.set(id, [...(topLogprobs.get(id) ?? []), top]);
    kv.assertInvariants();
    return r;
  };
  return {
    kv,
    sched,
    core,
    events,
    calls,
    state,
    seqs,
    add(id: string, prompt: readonly number[], maxTokens: number, fields: SamplingParams = {}): void {
      const sampling: CompiledSamplingParams = compileSamplingParams({ temperature: 0, ...fields });
      core.addRequest({ requestId: id, promptTokenIds: prompt, maxTokens, sampling });
      seqs.set(id, sched.getSequence(id)!);
    },
    step,
    logprobs,
    topLogprobs,
    /** Step until nothing is left; the tokens every request of this harness generated. */
    async drain(): Promise<Map<string, number[]>> {
      while (sched.hasUnfinished()) {
        if ((await step()).numScheduled === 0) throw new Error('stalled');
      }
      return tokens;
    },
    /** Tokens the model computed so far (sum over runs of rows × new tokens, padding excluded: rows share n). */
    computed: (): number => calls.reduce((n, c) => n + c.rows * c.newTokens, 0),
    storedHashes: (): string[] => events.flatMap((e) => (e.data.type === 'stored' ? e.data.blocks.map((b) => b.block_hash) : [])),
  };
}

const promptOf = (len: number, seed: number): number[] => Array.from({ length: len }, (_, i) => (seed * 31 + i * 17) % (V - 3));

describe('OnnxExecutor.create', () => {
  const meta = (s: DecoderSession, drop: string[], retype: Record<string, string> = {}, reshape: Record<string, Array<number | string>> = {}): DecoderSession => ({
    ...s,
    inputMetadata: s.inputMetadata.filter((m) => !drop.some((d) => m.name.startsWith(d))).map((m) => ({ ...m, type: retype[m.name] ?? m.type, shape: reshape[m.name] ?? m.shape })),
    outputMetadata: s.outputMetadata.filter((m) => !drop.some((d) => m.name.startsWith(d))).map((m) => ({ ...m, type: retype[m.name] ?? m.type, shape: reshape[m.name] ?? m.shape })),
  });
  const create = (s: DecoderSession, extra = {}) => () => OnnxExecutor.create(s, { numBlocks: 4, blockSize: 4, ...extra });

  it('reads layers, kv heads, head dim and KV type from the metadata', () => {
    expect(OnnxExecutor.create(sessions.FLOAT, { numBlocks: 8, blockSize: 4 }).kv).toMatchObject({ numLayers: L, numKvHeads: H, headDim: D, dtype: 'fp32', numBlocks: 8 });
    expect(OnnxExecutor.create(sessions.FLOAT16, { numBlocks: 8, blockSize: 4 }).kv.dtype).toBe('fp16');
  });

  it('refuses a model without the Optimum with-past signature, saying what is wrong (invalid_argument)', () => {
    const cases: Array<[() => unknown, RegExp]> = [
      [create(meta(sessions.FLOAT, ['past_key_values'])), /past_key_values/],
      [create(meta(sessions.FLOAT, ['present.1.value'])), /present\.1\.value/],
      [create(meta(sessions.FLOAT, ['attention_mask'])), /attention_mask/],
      [create(meta(sessions.FLOAT, ['logits'])), /logits/],
      [create(meta(sessions.FLOAT, [], { input_ids: 'int32' })), /input_ids.*int32/],
      [create(meta(sessions.FLOAT, [], {}, { 'past_key_values.0.key': ['batch_size', 'heads', 'past', D] })), /fixed num_kv_heads/],
      [create(sessions.FLOAT, { kvCacheDtype: 'fp16' }), /does not match/],
      [create(sessions.FLOAT, { vocabSize: V + 1 }), /logits are 384 wide/],
      // an input nothing feeds would fail every request: refused at load, by name
      [create({ ...sessions.FLOAT, inputMetadata: [...sessions.FLOAT.inputMetadata, { name: 'token_type_ids', type: 'int64', shape: ['batch_size', 'sequence_length'] }] }), /input 'token_type_ids' is not one this engine can feed/],
      [create({ ...sessions.FLOAT, inputMetadata: [...sessions.FLOAT.inputMetadata, { name: 'use_cache_branch', type: 'int64', shape: [1] }] }), /use_cache_branch.*expected bool \[1\]/],
    ];
    for (const [fn, message] of cases) {
      let err: unknown;
      try {
        fn();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(SwitchyardError);
      expect((err as SwitchyardError).code).toBe('invalid_argument');
      expect((err as SwitchyardError).message).toMatch(message);
    }
  });
});

describe('OnnxExecutor through EngineCore', () => {
  for (const kvType of ['FLOAT', 'FLOAT16'] as const) {
    it(`greedy incremental decoding with paged KV equals recomputing from scratch (${kvType})`, async () => {
      const h = harness({ kvType, maxNumBatchedTokens: 5 }); // the 11-token prompt takes 3 chunks
      const prompt = promptOf(11, 1);
      h.add('a', prompt, 12, { logprobs: true });
      const got = await h.drain();
      const want = await oracle(prompt, 12, kvType);
      expect(got.get('a')).toEqual(want.tokens);
      expectCloseAll(h.logprobs.get('a'), want.logprobs, 4);
      expect(h.calls.slice(0, 3).map((c) => [c.newTokens, c.past])).toEqual([[5, 0], [5, 5], [1, 10]]);
      expect(h.calls).toHaveLength(3 + 11);
    });
  }

  it.each(['FLOAT', 'FLOAT16'] as const)('a prefix-cache hit gives the same output as a miss, and its tokens are not recomputed (%s KV)', async (kvType) => {
    const h = harness({ kvType });
    const prompt = promptOf(14, 2);
    h.add('miss', prompt, 8, { logprobs: true });
    await h.drain();
    const missComputed = h.computed();
    h.add('hit', prompt, 8, { logprobs: true });
    const got = await h.drain();
    expect(h.seqs.get('miss')!.numCachedTokens).toBe(0);
    expect(h.seqs.get('hit')!.numCachedTokens).toBe(12);
    expect(h.computed() - missComputed).toBe(missComputed - 12);
    const want = await oracle(prompt, 8, kvType);
    expect(got.get('miss')).toEqual(want.tokens);
    expect(got.get('hit')).toEqual(want.tokens);
    expectCloseAll(h.logprobs.get('hit'), want.logprobs, 4);
    // A prompt sharing only the first two blocks also matches its own recompute.
    const branch = [...prompt.slice(0, 8), 5, 6, 7];
    h.add('branch', branch, 6);
    expect((await h.drain()).get('branch')).toEqual(await recompute(branch, 6, kvType));
    expect(h.seqs.get('branch')!.numCachedTokens).toBe(8);
  });

  it('a fully cached prompt recomputes only its last token (no KV write into the shared block) and matches', async () => {
    const h = harness();
    const prompt = promptOf(12, 3); // exactly 3 blocks
    h.add('a', prompt, 5, { logprobs: true });
    await h.drain();
    const stored = h.storedHashes().length;
    const before = h.calls.length;
    h.add('b', prompt, 5, { logprobs: true });
    const got = await h.drain();
    expect(h.seqs.get('b')!.numCachedTokens).toBe(11);
    expect(h.calls[before]).toMatchObject({ rows: 1, newTokens: 1, past: 11 });
    expect(got.get('b')).toEqual(got.get('a'));
    expect(got.get('a')).toEqual(await recompute(prompt, 5));
    // Same distributions, not just the same argmax: b's first logits saw the cached KV of tokens 0..10.
    h.logprobs.get('b')!.forEach((lp, i) => expect(lp).toBeCloseTo(h.logprobs.get('a')![i]!, 5));
    // Nothing is stored again: b's prompt blocks were hits, and the block its decodes filled (tokens
    // 12..15, the same as a's) was promoted onto a's resident block.
    expect(stored).toBe(4);
    expect(h.storedHashes()).toHaveLength(stored);
  });

  // Re-prefill after preemption is what a migrated stream does on its new worker: prompt + tokens so far.
  it.each(['FLOAT', 'FLOAT16'] as const)('preemption with recompute (a cache too small for all sequences) gives identical output (%s KV)', async (kvType) => {
    const prompts = Array.from({ length: 6 }, (_, i) => promptOf(9 + i, 40 + i));
    const big = harness({ kvType });
    prompts.forEach((p, i) => big.add(`r${i}`, p, 16));
    const want = await big.drain();
    const small = harness({ kvType, numBlocks: 16, maxNumSeqs: 6 });
    prompts.forEach((p, i) => small.add(`r${i}`, p, 16, { logprobs: true }));
    const got = await small.drain();
    expect(got).toEqual(want);
    expect([...small.seqs.values()].reduce((n, s) => n + s.numPreemptions, 0)).toBeGreaterThan(0);
    expect([...big.seqs.values()].every((s) => s.numPreemptions === 0)).toBe(true);
    expect(small.kv.stats().active).toBe(0);
    for (const [i, p] of prompts.entries()) {
      const want = await oracle(p, 16, kvType);
      expect(got.get(`r${i}`)).toEqual(want.tokens);
      // fp16 KV: a re-prefill rounds the generated tokens' keys in another order than their decodes did.
      expectCloseAll(small.logprobs.get(`r${i}`), want.logprobs, kvType === 'FLOAT16' ? 3 : 4);
    }
  });

  it('16 concurrent sequences of different lengths give the tokens each gives alone; decodes share one run', async () => {
    const prompts = Array.from({ length: 16 }, (_, i) => promptOf(3 + i * 2, 10 + i));
    const alone: Array<number[] | undefined> = [];
    for (const [i, p] of prompts.entries()) {
      const h = harness();
      h.add(`s${i}`, p, 6);
      alone.push((await h.drain()).get(`s${i}`));
    }
    // 64: admissions, chunks and decodes mix across steps; 512: all 16 admitted at once, then decoding
    // together as ONE session.run of 16 rows with pasts of 3..33 tokens left-padded.
    for (const maxNumBatchedTokens of [64, 512]) {
      const h = harness({ maxNumBatchedTokens });
      prompts.forEach((p, i) => h.add(`s${i}`, p, 6));
      const together = await h.drain();
      expect(prompts.map((_, i) => together.get(`s${i}`))).toEqual(alone);
      if (maxNumBatchedTokens === 512) expect(h.calls.filter((c) => c.rows === 16 && c.newTokens === 1)).toHaveLength(5);
    }
  });

  it('a step runs all decodes in one session.run and same-length chunks in another', async () => {
    const h = harness({ maxNumBatchedTokens: 256 });
    h.add('a', promptOf(5, 1), 4);
    h.add('b', promptOf(9, 2), 4);
    await h.step(); // both prompts: different lengths, two runs
    expect(h.calls.map((c) => [c.rows, c.newTokens])).toEqual([[1, 5], [1, 9]]);
    h.add('c', promptOf(6, 3), 3);
    h.add('d', promptOf(6, 4), 3);
    h.calls.length = 0;
    await h.step(); // decodes of a and b, prompts of c and d: one run each
    expect(h.calls.map((c) => [c.rows, c.newTokens, c.past])).toEqual([[2, 1, 9], [2, 6, 0]]);
    const got = await h.drain();
    expect(got.get('c')).toEqual(await recompute(promptOf(6, 3), 3));
  });

  it('works for a model without position_ids (omitted from the feeds)', async () => {
    // The wrapped model derives positions from attention_mask like HF does (cumsum - 1), so it still
    // needs correct left padding and masks from the executor.
    const withoutPositionIds = (s: DecoderSession): DecoderSession => ({
      ...s,
      inputMetadata: s.inputMetadata.filter((m) => m.name !== 'position_ids'),
      async run(feeds) {
        expect(feeds['position_ids']).toBeUndefined();
        const [B, n] = feeds['input_ids']!.dims as [number, number];
        const T = feeds['attention_mask']!.dims[1]!;
        const mask = feeds['attention_mask']!.data as BigInt64Array;
        const pos = new BigInt64Array(B * n);
        for (let b = 0; b < B; b++) {
          let ones = 0n;
          for (let j = 0; j < T; j++) {
            ones += mask[b * T + j]!;
            if (j >= T - n) pos[b * n + j - (T - n)] = ones - 1n;
          }
        }
        return s.run({ ...feeds, position_ids: { type: 'int64', dims: [B, n], data: pos } });
      },
    });
    const h = harness({ wrap: withoutPositionIds });
    const prompts = [promptOf(4, 1), promptOf(10, 2), promptOf(7, 3)];
    prompts.forEach((p, i) => h.add(`p${i}`, p, 6));
    const got = await h.drain();
    for (const [i, p] of prompts.entries()) expect(got.get(`p${i}`)).toEqual(await recompute(p, 6));
  });

  it("feeds an Optimum merged decoder's use_cache_branch: false on a batch of first chunks (empty past), true whenever a past is fed", async () => {
    const merged = await createOrtDecoderSession(buildTinyDecoderModel({ useCacheBranch: true }));
    try {
      const flags: Array<[number, number]> = [];
      const h = harness({
        maxNumBatchedTokens: 256,
        wrap: (spied) => ({
          ...spied,
          inputMetadata: merged.inputMetadata,
          outputMetadata: merged.outputMetadata,
          async run(feeds) {
            await spied.run(Object.fromEntries(Object.entries(feeds).filter(([k]) => k !== 'use_cache_branch'))); // counts the call
            flags.push([feeds['past_key_values.0.key']!.dims[2]!, (feeds['use_cache_branch']!.data as Uint8Array)[0]!]);
            expect(feeds['use_cache_branch']).toMatchObject({ type: 'bool', dims: [1] });
            return merged.run(feeds);
          },
        }),
      });
      const prompts = [promptOf(5, 1), promptOf(9, 2), promptOf(5, 3)];
      prompts.forEach((p, i) => h.add(`m${i}`, p, 5));
      const got = await h.drain();
      for (const [i, p] of prompts.entries()) expect(got.get(`m${i}`)).toEqual(await recompute(p, 5));
      expect(flags.length).toBeGreaterThan(2);
      for (const [past, flag] of flags) expect(flag).toBe(past > 0 ? 1 : 0);
      expect(flags.some(([past]) => past === 0)).toBe(true);
    } finally {
      await merged.release();
    }
  });

  it('logit_bias and min_tokens steer the sampled tokens; the end ids come back once min_tokens is reached', async () => {
    const h = harness();
    const prompt = promptOf(6, 5);
    const greedy = await recompute(prompt, 1);
    const target = (greedy[0]! + 1) % V;
    h.add('biased', prompt, 3, { logit_bias: { [String(target)]: 100 } });
    // the greedy first token is an end id: masked for 2 tokens, then it may end the sequence
    h.core.addRequest({ requestId: 'min', promptTokenIds: prompt, maxTokens: 6, eosTokenIds: [greedy[0]!], sampling: compileSamplingParams({ temperature: 0, min_tokens: 2, logit_bias: { [String(greedy[0]!)]: 100 } }) });
    const got = await h.drain();
    expect(got.get('biased')).toEqual([target, target, target]);
    const min = got.get('min')!;
    expect(min.slice(0, 2)).not.toContain(greedy[0]);
    expect(min).toHaveLength(3);
    expect(min[2]).toBe(greedy[0]);
  });

  it('samples from float16 logits', async () => {
    const fp16Logits = (s: DecoderSession): DecoderSession => ({
      ...s,
      outputMetadata: s.outputMetadata.map((m) => (m.name === 'logits' ? { ...m, type: 'float16' } : m)),
      async run(feeds) {
        const out = await s.run(feeds);
        const logits = out['logits']!;
        return { ...out, logits: { type: 'float16', dims: logits.dims, data: Uint16Array.from(logits.data as Float32Array, toHalf) } };
      },
    });
    const h = harness({ wrap: fp16Logits });
    const prompt = promptOf(9, 7);
    h.add('a', prompt, 8);
    expect((await h.drain()).get('a')).toEqual(await recompute(prompt, 8));
  });

  it('seeded sampling (temperature > 0) is reproducible, also across preemption', async () => {
    const prompt = promptOf(7, 3);
    const sampled = { temperature: 1.5, top_p: 0.95 };
    const h = harness();
    h.add('a', prompt, 10, { ...sampled, seed: 7 });
    h.add('b', prompt, 10, { ...sampled, seed: 7 });
    h.add('c', prompt, 10, { ...sampled, seed: 8 });
    const got = await h.drain();
    expect(got.get('a')).toEqual(got.get('b'));
    expect(got.get('c')).not.toEqual(got.get('a'));
    expect(got.get('a')).not.toEqual(await recompute(prompt, 10)); // really sampled

    const prompts = Array.from({ length: 6 }, (_, i) => promptOf(9 + i, 60 + i));
    const run = async (numBlocks: number) => {
      const x = harness({ numBlocks, maxNumSeqs: 6 });
      prompts.forEach((p, i) => x.add(`r${i}`, p, 16, { ...sampled, seed: 100 + i }));
      return { tokens: await x.drain(), preemptions: [...x.seqs.values()].reduce((n, s) => n + s.numPreemptions, 0) };
    };
    const big = await run(128);
    const small = await run(16);
    expect(small.preemptions).toBeGreaterThan(0);
    expect(small.tokens).toEqual(big.tokens);
  });

  it('unseeded requests draw distinct seeds from the executor seed (reproducible per run)', async () => {
    const prompt = promptOf(6, 5);
    const run = async (seed: number) => {
      const h = harness({ seed });
      h.add('a', prompt, 10, { temperature: 1.5 });
      h.add('b', prompt, 10, { temperature: 1.5 });
      return h.drain();
    };
    const first = await run(11);
    expect(first.get('a')).not.toEqual(first.get('b'));
    expect(await run(11)).toEqual(first);
  });

  it('sampling where the forward pass ran gives the tokens, logprobs and random streams of sampling the logits here', async () => {
    const requests: Array<[string, number[], SamplingParams]> = [
      ['seeded', promptOf(7, 1), { temperature: 1.2, seed: 5, logprobs: true, top_logprobs: 3 }],
      ['unseeded', promptOf(9, 2), { temperature: 0.9, top_p: 0.8, logprobs: true }],
      ['top-k, min-p', promptOf(5, 3), { temperature: 1, top_k: 7, min_p: 0.05, seed: 9 }],
      ['penalties', promptOf(11, 4), { temperature: 0.8, frequency_penalty: 0.7, presence_penalty: 0.4, repetition_penalty: 1.4, seed: 2, logprobs: true, top_logprobs: 5 }],
      ['greedy', promptOf(6, 5), { logprobs: true, top_logprobs: 2, logit_bias: { '5': 3 } }],
      ['min_tokens', promptOf(8, 6), { temperature: 1, min_tokens: 6, seed: 3 }],
    ];
    const run = async (here: boolean, numBlocks: number) => {
      const kinds: string[] = [];
      const h = harness({
        seed: 21,
        numBlocks,
        maxNumSeqs: 6,
        // Here: a session that passes on only the feeds, so the logits come back and are sampled by the executor.
        wrap: (s) => ({
          ...s,
          async run(feeds, rows) {
            const out = await (here ? s.run(feeds) : s.run(feeds, rows));
            kinds.push(out[SAMPLED_OUTPUT] !== undefined ? 'sampled' : 'logits');
            return out;
          },
        }),
      });
      for (const [id, prompt, p] of requests) h.add(id, prompt, 14, p);
      const tokens = await h.drain();
      return { tokens, logprobs: h.logprobs, top: h.topLogprobs, kinds: new Set(kinds), preemptions: [...h.seqs.values()].reduce((n, q) => n + q.numPreemptions, 0) };
    };
    // With enough blocks, and with so few that sequences are preempted and recomputed (same schedule both ways).
    for (const numBlocks of [128, 20]) {
      const here = await run(true, numBlocks);
      expect(here.kinds).toEqual(new Set(['logits']));
      const there = await run(false, numBlocks);
      expect(there.kinds).toEqual(new Set(['sampled']));
      expect(there.preemptions).toBe(here.preemptions);
      if (numBlocks === 20) expect(there.preemptions).toBeGreaterThan(0);
      expect(there.tokens).toEqual(here.tokens);
      expect(there.logprobs).toEqual(here.logprobs);
      expect(there.top).toEqual(here.top);
      expect(here.top.get('penalties')![0]!.tokenIds).toHaveLength(5);
      expect(here.tokens.get('seeded')).not.toEqual(await recompute(promptOf(7, 1), 14)); // really sampled
    }
  });

  it('a failed forward pass keeps no sampler it created and draws no seed: the run goes on as if it never happened', async () => {
    const prompt = promptOf(6, 7);
    const clean = harness({ seed: 4 });
    clean.add('a', prompt, 8, { temperature: 1.3 });
    clean.add('b', promptOf(5, 8), 8, { temperature: 1.3 });
    const want = await clean.drain();
    const h = harness({ seed: 4 });
    h.add('a', prompt, 8, { temperature: 1.3 });
    h.add('b', promptOf(5, 8), 8, { temperature: 1.3 });
    h.state.fail = true;
    await expect(h.core.step()).rejects.toMatchObject({ code: 'internal' });
    expect(h.core.discardFailedStep().sort()).toEqual(['a', 'b']);
    h.state.fail = false;
    h.add('a', prompt, 8, { temperature: 1.3 });
    h.add('b', promptOf(5, 8), 8, { temperature: 1.3 });
    expect(await h.drain()).toEqual(want);
  });

  it('KV stored events come only after the forward pass: an identical prompt in the same step is no hit', async () => {
    const h = harness();
    const prompt = promptOf(13, 5);
    h.add('a', prompt, 6);
    h.add('b', prompt, 6);
    await h.step(); // both admitted together
    expect(h.seqs.get('b')!.numCachedTokens).toBe(0);
    expect(h.calls).toHaveLength(1); // one run, two rows of 13
    expect(h.calls[0]).toMatchObject({ rows: 2, newTokens: 13, eventsBefore: 0 });
    // After the pass: the 3 full prompt blocks are stored once (b's promotion moved onto a's blocks).
    expect(h.storedHashes()).toHaveLength(3);
    const got = await h.drain();
    const expected = await recompute(prompt, 6);
    expect(got.get('a')).toEqual(expected);
    expect(got.get('b')).toEqual(expected);
    h.add('c', prompt, 6);
    expect((await h.drain()).get('c')).toEqual(expected);
    expect(h.seqs.get('c')!.numCachedTokens).toBe(12);
  });

  it('no stored event is emitted while a step is running', async () => {
    const h = harness({ maxNumBatchedTokens: 6 });
    h.add('a', promptOf(17, 1), 9);
    h.add('b', promptOf(10, 2), 9);
    while (h.sched.hasUnfinished()) {
      const before = h.events.length;
      const first = h.calls.length;
      await h.step();
      for (const c of h.calls.slice(first)) expect(c.eventsBefore).toBe(before);
    }
    expect(h.storedHashes().length).toBeGreaterThan(0);
  });

  it('a failed session.run rejects with internal and leaves the block manager clean', async () => {
    const h = harness();
    const prompt = promptOf(10, 9);
    // Fail the admission step: nothing the step computed may reach the prefix cache.
    h.add('a', prompt, 4);
    h.add('b', promptOf(6, 1), 4);
    h.state.fail = true;
    const err = await h.core.step().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SwitchyardError);
    expect((err as SwitchyardError).code).toBe('internal');
    expect((err as SwitchyardError).message).toMatch(/forward pass failed.*simulated onnxruntime failure/);
    expect(h.core.discardFailedStep().sort()).toEqual(['a', 'b']);
    h.kv.assertInvariants();
    expect(h.kv.stats().active).toBe(0);
    expect(h.storedHashes()).toEqual([]);
    // Fail a decode step after the prompt blocks were computed: those stay valid, the rest goes.
    h.state.fail = false;
    h.add('c', prompt, 4);
    await h.step();
    const stored = h.storedHashes();
    expect(stored).toHaveLength(2);
    h.state.fail = true;
    await expect(h.core.step()).rejects.toMatchObject({ code: 'internal' });
    expect(h.core.discardFailedStep()).toEqual(['c']);
    h.kv.assertInvariants();
    expect(h.kv.stats().active).toBe(0);
    expect(h.storedHashes()).toEqual(stored);
    // The cache still gives correct output afterwards.
    h.state.fail = false;
    h.add('d', prompt, 4);
    expect((await h.drain()).get('d')).toEqual(await recompute(prompt, 4));
    expect(h.seqs.get('d')!.numCachedTokens).toBe(8);
  });

  it('reports the log-probability of each sampled token for requests that ask', async () => {
    const h = harness();
    h.add('lp', promptOf(5, 9), 4, { logprobs: true });
    h.add('plain', promptOf(5, 8), 4);
    const lps: number[] = [];
    while (h.sched.hasUnfinished()) {
      const r = await h.step();
      if (r.logprobs?.has('lp')) lps.push(r.logprobs.get('lp')!);
      expect(r.logprobs?.has('plain') ?? false).toBe(false);
    }
    expect(lps).toHaveLength(4);
    for (const lp of lps) expect(lp).toBeLessThanOrEqual(0);
  });
});

describe('OnnxExecutor under LlmEngine', () => {
  it('samples where the pass runs only from THREAD_SAMPLING_MIN_VOCAB tokens on (or the given bound), with the same tokens either way', async () => {
    const generated = async (extra: { threadSamplingMinVocab?: number }) => {
      const asked: boolean[] = [];
      const session: DecoderSession = { ...sessions.FLOAT, run: (feeds, rows) => (asked.push(rows !== undefined), sessions.FLOAT.run(feeds, rows)) };
      const executor = OnnxExecutor.create(session, { numBlocks: 64, blockSize: 4, vocabSize: V, seed: 4, ...extra });
      const engine = new LlmEngine({ blockSize: 4, numBlocks: 64, maxModelLen: 256, executor, scheduler: { maxNumBatchedTokens: 64 } });
      const tokens: number[] = [];
      const sampling = compileSamplingParams({ temperature: 1, seed: 8, max_tokens: 5 });
      for await (const o of engine.generate({ requestId: 'r', promptTokenIds: promptOf(9, 2), sampling })) tokens.push(...o.tokenIds);
      return { tokens, asked: [...new Set(asked)] };
    };
    expect(V).toBeLessThan(THREAD_SAMPLING_MIN_VOCAB);
    const here = await generated({});
    const there = await generated({ threadSamplingMinVocab: V });
    expect(here.asked).toEqual([false]);
    expect(there.asked).toEqual([true]);
    expect(there.tokens).toEqual(here.tokens);
    expect(here.tokens).toHaveLength(5);
  });

  it('concurrent generate calls of one prompt share a step, compute their own KV and match', async () => {
    const executor = OnnxExecutor.create(sessions.FLOAT, { numBlocks: 128, blockSize: 4, vocabSize: V });
    const engine = new LlmEngine({ blockSize: 4, numBlocks: 128, maxModelLen: 256, executor, scheduler: { maxNumBatchedTokens: 64 } });
    const prompt = promptOf(13, 5);
    const generate = async (id: string) => {
      const tokens: number[] = [];
      let last: GenerateOutput | undefined;
      const sampling = compileSamplingParams({ temperature: 0, max_tokens: 6 });
      for await (const o of engine.generate({ requestId: id, promptTokenIds: prompt, sampling })) {
        tokens.push(...o.tokenIds);
        last = o;
      }
      return { tokens, cached: last!.usage!.cachedTokens };
    };
    const [a, b] = await Promise.all([generate('a'), generate('b')]);
    const expected = await recompute(prompt, 6);
    expect([a, b]).toEqual([{ tokens: expected, cached: 0 }, { tokens: expected, cached: 0 }]);
    expect(await generate('c')).toEqual({ tokens: expected, cached: 12 });
  });
});

/** float → IEEE half bits (round to nearest; subnormals flush to zero; enough for logits). */
function toHalf(x: number): number {
  const f = new Float32Array([x]);
  const b = new Uint32Array(f.buffer)[0]!;
  const sign = (b >>> 16) & 0x8000;
  const exp = ((b >>> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return sign;
  if (exp >= 31) return sign | 0x7c00;
  const mant = b & 0x7fffff;
  const half = sign | (exp << 10) | (mant >>> 13);
  return (mant & 0x1000) !== 0 ? half + 1 : half;
}
