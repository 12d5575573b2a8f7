import { describe, expect, it } from 'vitest';
import { compileSamplingParams, type SamplingParams } from './sampling-params.js';
import { Xoshiro128, createSamplerState, logSumExp, sample, topLogprobs, type SamplerState } from './sampling.js';

const state = (p: SamplingParams, prompt: number[] = [], seed = 1): SamplerState =>
  createSamplerState(compileSamplingParams(p), prompt, seed);
const logitsOf = (probs: number[]): Float32Array => Float32Array.from(probs.map(Math.log));
function histogram(logits: Float32Array, p: SamplingParams, draws: number): number[] {
  const h = new Array<number>(logits.length).fill(0);
  const s = state({ seed: 7, ...p });
  for (let i = 0; i < draws; i++) {
    s.outputCounts.clear(); // no penalties configured; keep the state's map small
    h[sample(logits, s).tokenId]!++;
  }
  return h;
}
const support = (h: number[]): number[] => h.flatMap((n, i) => (n > 0 ? [i] : []));

describe('compileSamplingParams', () => {
  it('fills documented defaults', () => {
    expect(compileSamplingParams({})).toEqual({
      temperature: 1, top_k: 0, top_p: 1, min_p: 0, seed: null, max_tokens: null, stop: [],
      stop_token_ids: [], ignore_eos: false, frequency_penalty: 0, presence_penalty: 0,
      repetition_penalty: 1, logprobs: false, top_logprobs: 0, default_max_tokens: null, logit_bias: {}, min_tokens: 0,
      skip_special_tokens: true, spaces_between_special_tokens: true, guided_decoding: null,
    });
    expect(compileSamplingParams({ guided_decoding: { kind: 'json' } }).guided_decoding).toEqual({ kind: 'json' });
    expect(() => compileSamplingParams({ guided_decoding: { kind: 'json' }, ignore_eos: true })).toThrow('ignore_eos cannot be combined with guided decoding');
    expect(() => compileSamplingParams({ guided_decoding: { kind: 'regex' } as never })).toThrow('guided_decoding.kind must be');
    expect(compileSamplingParams({ top_k: -1, stop: 'x', temperature: null }).top_k).toBe(0);
    expect(compileSamplingParams({ stop: 'x' }).stop).toEqual(['x']);
  });

  it.each([
    [{ temperature: -0.1 }, 'temperature'],
    [{ temperature: Number.NaN }, 'temperature'],
    [{ top_k: 1.5 }, 'top_k'],
    [{ top_k: -2 }, 'top_k'],
    [{ top_p: 0 }, 'top_p'],
    [{ top_p: 1.01 }, 'top_p'],
    [{ min_p: -1 }, 'min_p'],
    [{ seed: 0.5 }, 'seed'],
    [{ max_tokens: 0 }, 'max_tokens'],
    [{ frequency_penalty: 2.5 }, 'frequency_penalty'],
    [{ presence_penalty: -3 }, 'presence_penalty'],
    [{ repetition_penalty: 0 }, 'repetition_penalty'],
    [{ stop: [''] }, 'stop'],
    [{ stop: 3 as unknown as string }, 'stop'],
    [{ stop_token_ids: [-1] }, 'stop_token_ids'],
    [{ ignore_eos: 'yes' as unknown as boolean }, 'ignore_eos'],
    [{ temperature: '1' as unknown as number }, 'temperature'],
  ])('rejects %j as invalid_argument naming %s', (p, field) => {
    expect(() => compileSamplingParams(p as SamplingParams)).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining(field) }),
    );
  });
});

describe('Xoshiro128', () => {
  it('is a fixed stream per seed (stable across processes and releases)', () => {
    const r = new Xoshiro128(42);
    const first = [r.nextUint32(), r.nextUint32(), r.nextUint32()];
    expect(first).toEqual(GOLDEN_42);
    expect(new Xoshiro128(2 ** 40 + 42).nextUint32()).not.toBe(GOLDEN_42[0]);
    const f = new Xoshiro128(1).nextFloat();
    expect(f).toBeGreaterThanOrEqual(0);
    expect(f).toBeLessThan(1);
  });
});
const GOLDEN_42 = [2837322924, 544945897, 479756282];

describe('sample', () => {
  const random = (v: number, seed: number): Float32Array => {
    const r = new Xoshiro128(seed);
    return Float32Array.from({ length: v }, () => (r.nextFloat() - 0.5) * 8);
  };

  it('is deterministic for a seed and differs across seeds', () => {
    const logits = random(1000, 3);
    const run = (seed: number) => {
      const s = state({ seed, top_p: 0.9 });
      return Array.from({ length: 50 }, () => sample(logits, s).tokenId);
    };
    expect(run(11)).toEqual(run(11));
    expect(run(11)).not.toEqual(run(12));
  });

  it('is greedy argmax at temperature 0 (lowest id on ties) and leaves the logits alone', () => {
    const logits = Float32Array.from([0.1, 3, -1, 3, 2]);
    const copy = logits.slice();
    const s = state({ temperature: 0, frequency_penalty: 1 });
    expect(sample(logits, s).tokenId).toBe(1);
    expect(logits).toEqual(copy);
    expect(sample(random(5000, 9), state({ temperature: 0 })).tokenId).toBe(
      Array.from(random(5000, 9)).reduce((b, x, i, a) => (x > a[b]! ? i : b), 0),
    );
  });

  it('top-k keeps exactly the k best (and ties at the k-th)', () => {
    expect(support(histogram(Float32Array.from([1, 5, 3, 4, 2]), { top_k: 2 }, 2000))).toEqual([1, 3]);
    expect(support(histogram(Float32Array.from([5, 5, 5, 1]), { top_k: 2 }, 2000))).toEqual([0, 1, 2]);
  });

  it('top-p keeps the smallest head reaching p, renormalised after top-k', () => {
    const l = logitsOf([0.5, 0.3, 0.15, 0.05]);
    // (an exact boundary such as 0.8 = 0.5 + 0.3 is left to float rounding, as in vLLM)
    expect(support(histogram(l, { top_p: 0.79 }, 3000))).toEqual([0, 1]);
    expect(support(histogram(l, { top_p: 0.81 }, 3000))).toEqual([0, 1, 2]);
    expect(support(histogram(l, { top_p: 0.1 }, 500))).toEqual([0]);
    // After top-k 3 the masses are .526/.316/.158: 0.83 is reached by the first two.
    expect(support(histogram(l, { top_p: 0.83 }, 3000))).toEqual([0, 1, 2]);
    expect(support(histogram(l, { top_k: 3, top_p: 0.83 }, 3000))).toEqual([0, 1]);
    // Ties at the nucleus boundary are taken in token-id order.
    expect(support(histogram(logitsOf([0.2, 0.4, 0.2, 0.2]), { top_p: 0.5 }, 2000))).toEqual([0, 1]);
    const h = histogram(l, { top_p: 0.79 }, 10000);
    expect(h[0]! / h[1]!).toBeCloseTo(5 / 3, 0);
  });

  it('min-p drops tokens below min_p times the top probability', () => {
    const l = logitsOf([0.5, 0.3, 0.15, 0.05]);
    expect(support(histogram(l, { min_p: 0.35 }, 3000))).toEqual([0, 1]);
    expect(support(histogram(l, { min_p: 0.35, top_p: 0.99 }, 3000))).toEqual([0, 1]);
  });

  it('matches a sort-based reference on a large vocabulary', () => {
    const v = 5000;
    const logits = random(v, 5);
    const order = Array.from({ length: v }, (_, i) => i).sort((a, b) => logits[b]! - logits[a]! || a - b);
    const probs = order.map((i) => Math.exp(logits[i]! - logits[order[0]!]!));
    const reference = (k: number, p: number): Set<number> => {
      const head = order.slice(0, k);
      const mass = probs.slice(0, k).reduce((a, b) => a + b, 0);
      let acc = 0;
      const kept = new Set<number>();
      for (let j = 0; j < head.length && acc < p * mass; j++) {
        kept.add(head[j]!);
        acc += probs[j]!;
      }
      return kept;
    };
    for (const [k, p] of [[40, 1], [v, 0.3], [200, 0.6], [3, 0.999]] as const) {
      const allowed = reference(k, p);
      const seen = support(histogram(logits, { top_k: k === v ? 0 : k, top_p: p }, 1500));
      for (const t of seen) expect(allowed.has(t)).toBe(true);
      if (allowed.size <= 10) expect(seen.length).toBe(allowed.size);
    }
  });

  it('draws follow the probabilities at temperature 1 and flatten or sharpen with temperature', () => {
    const l = logitsOf([0.1, 0.4, 0.2, 0.3]);
    const h = histogram(l, {}, 10000);
    expect([...h.keys()].sort((a, b) => h[b]! - h[a]!)).toEqual([1, 3, 2, 0]);
    h.forEach((n, i) => expect(Math.abs(n / 10000 - [0.1, 0.4, 0.2, 0.3][i]!)).toBeLessThan(0.02));
    const cold = histogram(l, { temperature: 0.2 }, 2000);
    expect(cold[1]! / 2000).toBeGreaterThan(0.75);
    const hot = histogram(l, { temperature: 100 }, 4000);
    hot.forEach((n) => expect(Math.abs(n / 4000 - 0.25)).toBeLessThan(0.04));
  });

  it('applies frequency and presence penalties to generated tokens (OpenAI)', () => {
    const l = Float32Array.from([2, 1.5, 0]);
    const run = (p: SamplingParams, n: number): number[] => {
      const s = state({ temperature: 0, ...p });
      return Array.from({ length: n }, () => sample(l, s).tokenId);
    };
    // 0: 2 → 1.7 → 1.4 (< 1.5) ; 1: 1.5 → 1.2 ; 0: 1.4 → 1.1 (< 1.2)
    expect(run({ frequency_penalty: 0.3 }, 5)).toEqual([0, 0, 1, 0, 1]);
    // presence subtracts once: 0 → 1.4, 1 → 0.9, then 0 stays ahead
    expect(run({ presence_penalty: 0.6 }, 4)).toEqual([0, 1, 0, 0]);
    expect(run({ frequency_penalty: -1 }, 3)).toEqual([0, 0, 0]);
  });

  it('applies the repetition penalty once to prompt and output tokens (vLLM)', () => {
    const pick = (l: number[], prompt: number[], rp: number) =>
      sample(Float32Array.from(l), state({ temperature: 0, repetition_penalty: rp }, prompt)).tokenId;
    expect(pick([2, 1.5], [0], 2)).toBe(1); // 2 / 2 = 1 < 1.5
    expect(pick([-1, -1.5], [0], 2)).toBe(1); // -1 * 2 = -2 < -1.5
    expect(pick([2, 1.5], [0], 1)).toBe(0);
    const s = state({ temperature: 0, repetition_penalty: 1.5 }, [0]);
    const l = Float32Array.from([3, 1.9]);
    expect([sample(l, s).tokenId, sample(l, s).tokenId]).toEqual([0, 0]); // 3 / 1.5 = 2, not 1.33
  });

  it('reports the raw log-probability of the chosen token when asked', () => {
    const l = Float32Array.from([0, Math.log(3)]);
    expect(sample(l, state({ temperature: 0 })).logprob).toBeNull();
    expect(sample(l, state({ temperature: 0, logprobs: true })).logprob).toBeCloseTo(Math.log(0.75), 6);
  });

  it('never picks a masked token and throws internal on NaN or all-masked logits', () => {
    const l = Float32Array.from([-Infinity, 0, -Infinity, 0]);
    expect(support(histogram(l, {}, 500))).toEqual([1, 3]);
    expect(support(histogram(l, { top_k: 3 }, 500))).toEqual([1, 3]);
    expect(support(histogram(Float32Array.from([0, Infinity, 5]), { top_p: 0.5 }, 50))).toEqual([1]);
    expect(() => sample(Float32Array.from([0, Number.NaN]), state({}))).toThrow(
      expect.objectContaining({ code: 'internal' }),
    );
    expect(() => sample(Float32Array.from([-Infinity]), state({ temperature: 0 }))).toThrow(
      expect.objectContaining({ code: 'internal' }),
    );
  });

  it.each([
    ['plain', {}],
    ['top-k', { top_k: 3 }],
    ['top-p', { top_p: 0.5 }],
    ['min-p', { min_p: 0.2 }],
    ['top-k and top-p', { top_k: 4, top_p: 0.7 }],
    ['penalties', { frequency_penalty: 0.5, presence_penalty: 0.3, repetition_penalty: 1.2 }],
  ] as const)('takes exactly one draw per token at temperature > 0 (%s)', (_what, p) => {
    const rows = [random(50, 1), random(50, 2), Float32Array.from([0, Infinity, 1]), Float32Array.from([5, -Infinity, -Infinity]), random(50, 3)];
    const s = state({ temperature: 0.8, seed: 11, ...p }, [1, 2, 3]);
    for (const row of rows) sample(row, s);
    const reference = new Xoshiro128(11);
    for (let i = 0; i < rows.length; i++) reference.nextFloat();
    expect(s.rng.nextUint32()).toBe(reference.nextUint32());
  });

  it.each([0, 0.8])('a state built with prior output tokens continues like the uninterrupted one (temperature %s)', (temperature) => {
    const params = compileSamplingParams({ temperature, seed: 7, frequency_penalty: 0.7, repetition_penalty: 1.3 });
    const rows = Array.from({ length: 12 }, (_, i) => random(64, 100 + i));
    const whole = createSamplerState(params, [4, 5, 6], 99);
    const tokens = rows.map((r) => sample(r, whole).tokenId);
    for (const k of [1, 5]) {
      const cont = createSamplerState(params, [4, 5, 6], 99, tokens.slice(0, k));
      expect(rows.slice(k).map((r) => sample(r, cont).tokenId)).toEqual(tokens.slice(k));
    }
  });
});

describe('top logprobs', () => {
  it('reports the k most likely tokens of the raw logits, best first, lower id on ties', () => {
    const probs = [0.05, 0.3, 0.1, 0.3, 0.25];
    const l = logitsOf(probs);
    const top = topLogprobs(l, 3, logSumExp(l));
    expect(top.tokenIds).toEqual([1, 3, 4]);
    top.logprobs.forEach((lp, i) => expect(lp).toBeCloseTo(Math.log(probs[top.tokenIds[i]!]!), 6));
    expect(topLogprobs(l, 10, logSumExp(l)).tokenIds).toEqual([1, 3, 4, 2, 0]);
    expect(topLogprobs(l, 0, 0).tokenIds).toEqual([]);
  });

  it('matches a full sort on a large random vocabulary', () => {
    const rng = new Xoshiro128(3);
    const l = Float32Array.from({ length: 5000 }, () => Math.floor(rng.nextFloat() * 400) / 10);
    const want = [...l.keys()].sort((a, b) => l[b]! - l[a]! || a - b).slice(0, 20);
    expect(topLogprobs(l, 20, logSumExp(l)).tokenIds).toEqual(want);
  });

  it('sample adds them only when asked, from the logits before penalties and temperature', () => {
    const l = logitsOf([0.1, 0.6, 0.3]);
    expect(sample(l, state({ temperature: 0, logprobs: true })).top).toBeNull();
    expect(sample(l, state({ temperature: 0, top_logprobs: 2 })).top).toBeNull(); // logprobs off
    const s = state({ temperature: 0.5, seed: 2, logprobs: true, top_logprobs: 2, presence_penalty: 2 });
    const r = sample(l, s);
    expect(r.top?.tokenIds).toEqual([1, 2]);
    expect(r.top?.logprobs[0]).toBeCloseTo(Math.log(0.6), 6);
    expect(r.logprob).toBeCloseTo(Math.log([0.1, 0.6, 0.3][r.tokenId]!), 6);
    // The greedy token is the best alternative, with the same logprob.
    const g = sample(l, state({ temperature: 0, logprobs: true, top_logprobs: 3 }));
    expect(g.top?.tokenIds[0]).toBe(g.tokenId);
    expect(g.top?.logprobs[0]).toBe(g.logprob);
  });

  it('a -Infinity logit has logprob -Infinity; top_logprobs is validated', () => {
    const l = Float32Array.from([0, -Infinity, 0]);
    expect(topLogprobs(l, 3, logSumExp(l)).logprobs[2]).toBe(-Infinity);
    expect(() => compileSamplingParams({ logprobs: true, top_logprobs: 21 })).toThrow(/top_logprobs/);
    expect(() => compileSamplingParams({ logprobs: true, top_logprobs: -1 })).toThrow(/top_logprobs/);
    expect(compileSamplingParams({ logprobs: false, top_logprobs: 5 }).top_logprobs).toBe(0);
  });
});
