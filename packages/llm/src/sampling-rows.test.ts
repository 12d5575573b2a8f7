// Sampling where the forward pass ran equals sampling on the event loop: for the same state and
// logits, `sampleRows` (the thread's side) + `commitSample` give the token, logprobs and the state
// (RNG words, counts) that `sample` gives, step after step.
import { describe, expect, it } from 'vitest';
import type { DecoderTensor } from './decoder-session.js';
import { compileSamplingParams, type SamplingParams } from './sampling-params.js';
import { LOGIT_ROWS_OUTPUT, SAMPLED_OUTPUT, commitSample, encodeSampleRows, halfToFloat, lastLogitsRow, readSampledRows, sampleRows, sampledLogitsDims, type RowSampling } from './sampling-rows.js';
import { createSamplerState, sample, type SampleResult, type SamplerState } from './sampling.js';
import type { TokenConstraint } from './guided/token-constraint.js';

const V = 1000;
/** The logits' width: wider than the vocabulary, as exports that pad the LM head are. */
const W = 1003;

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

/** Logits [B, n, W]; values on a coarse grid so ties (argmax, top-k, top logprobs, nucleus) occur. */
function logitsOf(B: number, n: number, rand: () => number, fp16 = false): DecoderTensor {
  const f = Float32Array.from({ length: B * n * W }, () => Math.round((rand() * 8 - 4) * 4) / 4);
  if (!fp16) return { type: 'float32', dims: [B, n, W], data: f };
  // float16 bits of the grid values (exact: quarters in [-4, 4]).
  const h = new Uint16Array(f.length);
  const view = new DataView(new ArrayBuffer(4));
  f.forEach((x, i) => {
    view.setFloat32(0, x);
    const bits = view.getUint32(0);
    const sign = (bits >>> 16) & 0x8000;
    const exp = ((bits >>> 23) & 0xff) - 127 + 15;
    h[i] = x === 0 ? sign : sign | (exp << 10) | ((bits >>> 13) & 0x3ff);
  });
  return { type: 'float16', dims: [B, n, W], data: h };
}

const PARAMS: Record<string, SamplingParams> = {
  greedy: { temperature: 0 },
  'temperature 1': { temperature: 1 },
  'temperature 0.7, top-k 5': { temperature: 0.7, top_k: 5 },
  'top-p 0.9': { top_p: 0.9 },
  'min-p 0.2, top-k 50, top-p 0.8': { min_p: 0.2, top_k: 50, top_p: 0.8 },
  penalties: { frequency_penalty: 0.5, presence_penalty: 0.3, repetition_penalty: 1.3 },
  'greedy with penalties and logprobs': { temperature: 0, repetition_penalty: 0.8, frequency_penalty: -1, logprobs: true, top_logprobs: 3 },
  logit_bias: { logit_bias: { '3': 100, '17': -100, '999': 5 } },
  'min_tokens masks the end ids': { min_tokens: 4, temperature: 0 },
  'logprobs, top 5': { logprobs: true, top_logprobs: 5 },
  'logprobs only': { temperature: 1.5, logprobs: true },
  'top 20, seed': { seed: 12345, logprobs: true, top_logprobs: 20, top_k: 10 },
};

/** Twin states: one sampled on the event loop, one through the thread's path. */
function twins(p: SamplingParams, seed: number): [SamplerState, SamplerState] {
  const params = compileSamplingParams(p);
  const prompt = [1, 2, 3, 5, 8, 13, 999];
  const prior = [7, 7, 2];
  const ends = [0, 3];
  return [createSamplerState(params, prompt, seed, prior, ends), createSamplerState(params, prompt, seed, prior, ends)];
}

const plain = (r: SampleResult): SampleResult => ({ tokenId: r.tokenId, logprob: r.logprob, top: r.top });

describe('sampleRows (sampling where the forward pass ran)', () => {
  for (const fp16 of [false, true]) {
    for (const [label, p] of Object.entries(PARAMS)) {
      it(`gives the tokens, logprobs and states of sample() step after step: ${label}${fp16 ? ' (float16 logits)' : ''}`, () => {
        const rand = lcg(label.length * 7919 + (fp16 ? 1 : 0));
        const B = 3;
        const n = 2;
        const main = [twins(p, 11), twins(p, 22), twins(p, 33)];
        for (let step = 0; step < 25; step++) {
          const logits = logitsOf(B, n, rand, fp16);
          const present: DecoderTensor = { type: 'float32', dims: [B, 1, n, 1], data: new Float32Array(B * n) };
          const request = encodeSampleRows(V, main.map(([, thread]) => thread));
          const out = sampleRows({ logits, 'present.0.key': present }, request);
          expect(out['logits']).toBeUndefined();
          expect(out['present.0.key']).toBe(present);
          expect(out[LOGIT_ROWS_OUTPUT]).toBeUndefined();
          expect(sampledLogitsDims(out[SAMPLED_OUTPUT]!)).toEqual([B, n, W]);
          const rows = readSampledRows(out[SAMPLED_OUTPUT]!, out[LOGIT_ROWS_OUTPUT]);
          main.forEach(([local, thread], b) => {
            const want = sample(lastLogitsRow(logits, b, n, V), local);
            const row = rows[b]!;
            if (row === null || 'logits' in row) throw new Error('expected a sampled row');
            expect(plain(commitSample(thread, row))).toEqual(plain(want));
            expect(thread.rng.state().map((x) => x | 0)).toEqual(local.rng.state().map((x) => x | 0));
            expect(thread.generated).toBe(local.generated);
            expect([...thread.outputCounts]).toEqual([...local.outputCounts]);
          });
        }
        // The streams go on identically.
        for (const [local, thread] of main) expect(thread.rng.nextUint32()).toBe(local.rng.nextUint32());
      });
    }
  }

  it('answers nothing for rows that sample nothing and the last logits row, cut to the vocabulary, for rows that need them', () => {
    const rand = lcg(5);
    for (const fp16 of [false, true]) {
      const logits = logitsOf(4, 3, rand, fp16);
      const [local, thread] = twins({ temperature: 1, logprobs: true }, 9);
      const guided = createSamplerState(compileSamplingParams({}), [], 1, [], [], { mask() {}, advance() {}, isComplete: () => false } as unknown as TokenConstraint);
      const rows: RowSampling[] = [null, 'logits', thread, guided];
      const out = sampleRows({ logits }, encodeSampleRows(V, rows));
      expect(out[LOGIT_ROWS_OUTPUT]!.dims).toEqual([2, V]);
      const got = readSampledRows(out[SAMPLED_OUTPUT]!, out[LOGIT_ROWS_OUTPUT]);
      expect(got[0]).toBeNull();
      expect((got[1] as { logits: Float32Array }).logits).toEqual(lastLogitsRow(logits, 1, 3, V));
      expect((got[3] as { logits: Float32Array }).logits).toEqual(lastLogitsRow(logits, 3, 3, V));
      expect(plain(commitSample(thread, got[2] as never))).toEqual(plain(sample(lastLogitsRow(logits, 2, 3, V), local)));
    }
  });

  it('sends a row whose sampling fails back as logits, so sample() on the event loop reports it', () => {
    const logits = logitsOf(2, 1, lcg(3));
    (logits.data as Float32Array)[W + 17] = NaN;
    const [local, thread] = twins({ temperature: 0 }, 1);
    const [local2, thread2] = twins({ temperature: 1 }, 2);
    const out = sampleRows({ logits }, encodeSampleRows(V, [thread2, thread]));
    const got = readSampledRows(out[SAMPLED_OUTPUT]!, out[LOGIT_ROWS_OUTPUT]);
    expect(plain(commitSample(thread2, got[0] as never))).toEqual(plain(sample(lastLogitsRow(logits, 0, 1, V), local2)));
    const row = got[1] as { logits: Float32Array };
    expect(() => sample(row.logits, thread)).toThrow('logit 17 is NaN');
    expect(() => sample(lastLogitsRow(logits, 1, 1, V), local)).toThrow('logit 17 is NaN');
  });

  it('leaves outputs it cannot read as [B, n, >= vocab] logits untouched', () => {
    const [, thread] = twins({}, 1);
    const request = encodeSampleRows(V, [thread]);
    const narrow: DecoderTensor = { type: 'float32', dims: [1, 1, V - 1], data: new Float32Array(V - 1) };
    const wrongBatch = logitsOf(2, 1, lcg(1));
    const flat: DecoderTensor = { type: 'float32', dims: [W], data: new Float32Array(W) };
    for (const outputs of [{}, { logits: narrow }, { logits: wrongBatch }, { logits: flat }] as Array<Record<string, DecoderTensor>>) expect(sampleRows(outputs, request)).toBe(outputs);
    // The logits' own width when the request names no vocabulary.
    const out = sampleRows({ logits: narrow }, encodeSampleRows(undefined, [thread]));
    expect(sampledLogitsDims(out[SAMPLED_OUTPUT]!)).toEqual([1, 1, V - 1]);
  });

  it('reads float16 bits as the executor always did', () => {
    expect([0x3c00, 0xc000, 0x7c00, 0xfc00, 0x0001, 0x0000].map(halfToFloat)).toEqual([1, -2, Infinity, -Infinity, 2 ** -24, 0]);
    expect(halfToFloat(0x7e00)).toBeNaN();
  });
});
