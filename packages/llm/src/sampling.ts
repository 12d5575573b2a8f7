/**
 * Token sampling: logit bias and the min_tokens mask → the guided-decoding constraint's mask → penalties → temperature → min-p → top-k →
 * top-p → one draw from the request's own seeded PRNG; greedy argmax when temperature is 0.
 *
 * `sample` is called once per token per sequence, so it is O(V) expected with a few passes over the
 * vocabulary and no per-call allocation: one set of scratch buffers, grown to the largest vocabulary
 * seen, is shared by all states (`sample` is synchronous and never re-entered). Top-k and top-p never
 * sort the vocabulary: top-k finds the k-th largest logit with a size-k heap, top-p runs a
 * mass-weighted quickselect for the nucleus boundary; both are exact (ties at the k-th logit are kept;
 * ties at the nucleus boundary are taken in token-id order).
 *
 * A `SamplerState` belongs to one sequence and is not shared; it survives preemption (the tokens it
 * has counted are still the sequence's output).
 */
import { internal } from '@switchyard/common';
import type { CompiledSamplingParams } from './sampling-params.js';
import type { TokenConstraint } from './guided/token-constraint.js';

/** xoshiro128** (Blackman & Vigna), seeded by splitmix32: 128-bit state, same stream in any process. */
export class Xoshiro128 {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /** `seed` is any safe integer; its high and low 32 bits both feed the state. */
  constructor(seed: number) {
    let s = (seed >>> 0) ^ Math.imul(Math.floor(seed / 0x1_0000_0000) | 0, 0x9e3779b9);
    const next = (): number => {
      s = (s + 0x9e3779b9) | 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
  }

  /** Next 32-bit unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.b, 5), 7), 9) >>> 0;
    const t = this.b << 9;
    this.c ^= this.a;
    this.d ^= this.b;
    this.b ^= this.c;
    this.a ^= this.d;
    this.c ^= t;
    this.d = rotl(this.d, 11);
    return result;
  }

  /** The generator's state words, for `fromState` (a stream continued in another thread). */
  state(): [number, number, number, number] {
    return [this.a, this.b, this.c, this.d];
  }

  /** Continue the stream whose `state()` `words` are (the int32 or uint32 form of each word). */
  setState(words: ArrayLike<number>): void {
    this.a = words[0]! | 0;
    this.b = words[1]! | 0;
    this.c = words[2]! | 0;
    this.d = words[3]! | 0;
  }

  /** Uniform in [0, 1), 32 bits of resolution. */
  nextFloat(): number {
    return this.nextUint32() / 0x1_0000_0000;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** Per-sequence sampling state. Create with `createSamplerState`; mutated only by `sample`. */
export interface SamplerState {
  readonly params: CompiledSamplingParams;
  /** The seed actually used (the request's, or the one drawn for it), for logs and replay. */
  readonly seed: number;
  readonly rng: Xoshiro128;
  /** token id → how many times it was generated (drives frequency / presence / repetition penalties). */
  readonly outputCounts: Map<number, number>;
  /** Prompt token ids, kept only when repetition_penalty ≠ 1 (vLLM applies it to prompt and output). */
  readonly promptTokens: ReadonlySet<number> | null;
  /** Ids that would end the sequence (EOS, stop ids): masked while fewer than min_tokens were generated. */
  readonly endTokenIds: readonly number[];
  /** logit_bias as [id, bias] pairs (parsed once). */
  readonly bias: ReadonlyArray<readonly [number, number]>;
  /**
   * Guided decoding: tokens it disallows are masked (after logit bias, before penalties), and it
   * takes every sampled token. null = unconstrained.
   */
  readonly constraint: TokenConstraint | null;
  /** Tokens generated so far (prior output included). */
  generated: number;
}

// Shared scratch (see the file comment): penalised logits, then weights; candidate token ids.
let scratch = new Float32Array(0);
let index = new Int32Array(0);

/**
 * `promptTokenIds` matter only for repetition_penalty. `fallbackSeed` is used when the request has no
 * seed (default: a random one), so the engine can make unseeded runs reproducible in tests.
 * `priorOutputTokenIds`: tokens this sequence already generated elsewhere (a prefill worker's first
 * token, a migrated stream): they are counted as output, and at temperature > 0 the random stream
 * skips one draw per prior token — `sample` takes exactly one draw per token then — so the state is the
 * one an uninterrupted run would have reached. `endTokenIds`: the ids that end the sequence, masked
 * until `min_tokens` tokens were generated.
 */
export function createSamplerState(
  params: CompiledSamplingParams,
  promptTokenIds: readonly number[] = [],
  fallbackSeed: number = Math.floor(Math.random() * 0x1_0000_0000),
  priorOutputTokenIds: readonly number[] = [],
  endTokenIds: Iterable<number> = [],
  constraint: TokenConstraint | null = null,
): SamplerState {
  const seed = params.seed ?? fallbackSeed;
  const state: SamplerState = {
    params,
    seed,
    rng: new Xoshiro128(seed),
    outputCounts: new Map(),
    promptTokens: params.repetition_penalty !== 1 ? new Set(promptTokenIds) : null,
    endTokenIds: (params.min_tokens ?? 0) > 0 ? [...endTokenIds] : [],
    bias: Object.entries(params.logit_bias ?? {}).map(([id, b]) => [Number(id), b] as const),
    constraint,
    generated: 0,
  };
  for (const t of priorOutputTokenIds) {
    state.generated++;
    constraint?.advance(t);
    state.outputCounts.set(t, (state.outputCounts.get(t) ?? 0) + 1);
    if (params.temperature > 0) state.rng.nextFloat();
  }
  return state;
}

export interface SampleResult {
  readonly tokenId: number;
  /**
   * Natural-log probability of the chosen token under the model's raw distribution (before penalties
   * and temperature, like vLLM's default `raw_logprobs`); `null` unless params.logprobs.
   */
  readonly logprob: number | null;
  /** The params.top_logprobs most likely tokens under the same distribution; `null` when it is 0. */
  readonly top: TopLogprobs | null;
}

/**
 * Choose the next token from one sequence's logits (length = vocabulary size; not modified) and count
 * it as generated. Throws `internal` on NaN logits or when every token is masked: both are bugs
 * upstream (the model or a logits processor), not user errors.
 */
export function sample(logits: Float32Array, state: SamplerState): SampleResult {
  const v = logits.length;
  if (v === 0) throw internal('sample: empty logits');
  if (scratch.length < v) {
    scratch = new Float32Array(v);
    index = new Int32Array(v);
  }
  const x = scratch.length === v ? scratch : scratch.subarray(0, v);
  x.set(logits);
  for (const [id, b] of state.bias) if (id < v) x[id] = x[id]! + b;
  const c = state.constraint;
  // A complete document may only end: min_tokens then yields (else no token would be allowed).
  if (state.generated < state.params.min_tokens && (c === null || !c.isComplete())) for (const id of state.endTokenIds) if (id < v) x[id] = -Infinity;
  c?.mask(x);
  applyPenalties(x, state);

  const tokenId = state.params.temperature === 0 ? argmax(x) : draw(x, state);
  c?.advance(tokenId);
  state.generated++;
  state.outputCounts.set(tokenId, (state.outputCounts.get(tokenId) ?? 0) + 1);
  if (!state.params.logprobs) return { tokenId, logprob: null, top: null };
  // One log-sum-exp per token serves the chosen token and every alternative.
  const norm = logSumExp(logits);
  const k = state.params.top_logprobs;
  return { tokenId, logprob: logits[tokenId]! - norm, top: k > 0 ? topLogprobs(logits, k, norm) : null };
}

/** OpenAI frequency/presence penalties on output tokens, then vLLM's repetition penalty. */
function applyPenalties(x: Float32Array, state: SamplerState): void {
  const { frequency_penalty: fp, presence_penalty: pp, repetition_penalty: rp } = state.params;
  if (fp !== 0 || pp !== 0) {
    for (const [id, n] of state.outputCounts) {
      if (id < x.length) x[id] = x[id]! - n * fp - pp;
    }
  }
  if (rp !== 1) {
    const penalise = (id: number): void => {
      if (id >= x.length) return;
      const l = x[id]!;
      x[id] = l > 0 ? l / rp : l * rp;
    };
    // A token in both prompt and output is penalised once (vLLM builds one mask from both).
    for (const id of state.promptTokens ?? []) penalise(id);
    for (const id of state.outputCounts.keys()) if (!state.promptTokens?.has(id)) penalise(id);
  }
}

/** Index of the largest logit; the lowest index wins ties. */
export function argmax(x: Float32Array): number {
  let best = 0;
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) {
    const l = x[i]!;
    if (l > max) {
      max = l;
      best = i;
    } else if (l !== l) {
      throw internal(`sample: logit ${i} is NaN`);
    }
  }
  if (max === -Infinity) throw internal('sample: every logit is -Infinity');
  return best;
}

function draw(x: Float32Array, state: SamplerState): number {
  const p = state.params;
  const v = x.length;
  const best = argmax(x);
  const max = x[best]!;
  if (max === Infinity) {
    // A +Infinity logit is certainty (weights would be NaN); the draw is still taken, so every token
    // sampled at temperature > 0 consumes exactly one (a continuation skips one per prior token).
    state.rng.nextFloat();
    return best;
  }
  const invT = 1 / p.temperature;
  const topK = p.top_k > 0 && p.top_k < v ? p.top_k : 0;
  const cand = index;
  let n = 0;
  let total = 0;

  if (topK > 0) {
    // Top-k on the logits themselves (no exp for the losers): the k-th largest logit from a size-k
    // min-heap pass, then every token at or above it (ties kept) that also passes min-p, as a logit
    // threshold (weight >= min_p ⇔ l >= max + T·ln(min_p)).
    const minL = p.min_p > 0 ? max + p.temperature * Math.log(p.min_p) : -Infinity;
    const cut = Math.max(minL, kthLargest(x, topK));
    for (let i = 0; i < v; i++) {
      const l = x[i]!;
      if (l >= cut && l > -Infinity) cand[n++] = i;
    }
    for (let j = 0; j < n; j++) {
      const id = cand[j]!;
      const w = Math.exp((x[id]! - max) * invT);
      x[id] = w;
      total += w;
    }
    if (p.top_p < 1) n = selectNucleus(cand, n, x, p.top_p * total);
    return drawFrom(cand, n, x, state);
  }

  // From here x holds weights exp((l - max) / T) in [0, 1]: the top token weighs 1, so min-p keeps
  // weight >= min_p (tested on the logit, sparing the exp). Weight 0 (masked, filtered, or below
  // float32 range) is never drawn.
  const minL = p.min_p > 0 ? max + p.temperature * Math.log(p.min_p) : -Infinity;
  const filtering = p.top_p < 1;
  for (let i = 0; i < v; i++) {
    const l = x[i]!;
    const w = l >= minL ? Math.exp((l - max) * invT) : 0;
    x[i] = w;
    total += w;
    if (filtering && w > 0) cand[n++] = i;
  }

  if (!filtering) {
    const u = state.rng.nextFloat() * total;
    let acc = 0;
    let last = 0;
    for (let i = 0; i < v; i++) {
      const w = x[i]!;
      if (w === 0) continue;
      acc += w;
      last = i;
      if (u < acc) return i;
    }
    return last; // rounding: u landed past the float sum
  }
  n = selectNucleus(cand, n, x, p.top_p * total);
  return drawFrom(cand, n, x, state);
}

/** One draw from cand[0, n) in proportion to their weights in w. */
function drawFrom(cand: Int32Array, n: number, w: Float32Array, state: SamplerState): number {
  const u = state.rng.nextFloat() * massOf(cand, 0, n, w);
  let acc = 0;
  for (let j = 0; j < n; j++) {
    acc += w[cand[j]!]!;
    if (u < acc) return cand[j]!;
  }
  return cand[n - 1]!;
}

function massOf(cand: Int32Array, lo: number, hi: number, w: Float32Array): number {
  let m = 0;
  for (let j = lo; j < hi; j++) m += w[cand[j]!]!;
  return m;
}

// Three-way partition of cand[lo, hi) by value (logit or weight) around a median-of-three pivot: afterwards
// [lo, gtEnd) weigh more, [gtEnd, eqEnd) the same, [eqEnd, hi) less. Results in module variables to
// avoid allocating a tuple per call.
let gtEnd = 0;
let eqEnd = 0;
function partition3(cand: Int32Array, lo: number, hi: number, w: Float32Array): void {
  const a = w[cand[lo]!]!;
  const b = w[cand[(lo + hi) >>> 1]!]!;
  const c = w[cand[hi - 1]!]!;
  const pv = Math.max(Math.min(a, b), Math.min(Math.max(a, b), c));
  let lt = lo;
  let i = lo;
  let gt = hi;
  while (i < gt) {
    const id = cand[i]!;
    const x = w[id]!;
    if (x > pv) {
      cand[i++] = cand[lt]!;
      cand[lt++] = id;
    } else if (x < pv) {
      cand[i] = cand[--gt]!;
      cand[gt] = id;
    } else {
      i++;
    }
  }
  gtEnd = lt;
  eqEnd = gt;
}

let heap = new Float64Array(0);
/** The k-th largest value of x (k <= x.length), by a size-k min-heap: one pass, mostly one compare. */
function kthLargest(x: Float32Array, k: number): number {
  if (heap.length < k) heap = new Float64Array(k);
  const h = heap;
  for (let i = 0; i < k; i++) {
    // Sift up.
    let c = i;
    const val = x[i]!;
    while (c > 0) {
      const parent = (c - 1) >> 1;
      if (h[parent]! <= val) break;
      h[c] = h[parent]!;
      c = parent;
    }
    h[c] = val;
  }
  for (let i = k; i < x.length; i++) {
    const val = x[i]!;
    if (!(val > h[0]!)) continue;
    // Replace the minimum and sift down.
    let c = 0;
    for (;;) {
      let child = 2 * c + 1;
      if (child >= k) break;
      if (child + 1 < k && h[child + 1]! < h[child]!) child++;
      if (h[child]! >= val) break;
      h[c] = h[child]!;
      c = child;
    }
    h[c] = val;
  }
  return h[0]!;
}

/**
 * Move the nucleus of cand[0, n) to the front and return its size: the heaviest tokens, in
 * descending weight (ties by token id), up to and including the first that brings the mass to `need`.
 */
function selectNucleus(cand: Int32Array, n: number, w: Float32Array, need: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    partition3(cand, lo, hi, w);
    const heavier = massOf(cand, lo, gtEnd, w);
    if (heavier >= need) {
      hi = gtEnd;
      continue;
    }
    const tied = massOf(cand, gtEnd, eqEnd, w);
    if (heavier + tied >= need) {
      cand.subarray(gtEnd, eqEnd).sort();
      let acc = heavier;
      let j = gtEnd;
      while (acc < need) acc += w[cand[j++]!]!;
      return j;
    }
    need -= heavier + tied;
    lo = eqEnd;
  }
  return lo; // rounding: the whole range was needed
}

/** log softmax(logits)[i], by log-sum-exp around the max. */
export function logSoftmaxAt(logits: Float32Array, i: number): number {
  return logits[i]! - logSumExp(logits);
}

/** log Σ exp(logits), around the max (so log softmax(logits)[i] = logits[i] - logSumExp(logits)). */
export function logSumExp(logits: Float32Array): number {
  let max = -Infinity;
  for (let j = 0; j < logits.length; j++) if (logits[j]! > max) max = logits[j]!;
  if (max === -Infinity || max === Infinity) return max;
  let sum = 0;
  for (let j = 0; j < logits.length; j++) sum += Math.exp(logits[j]! - max);
  return max + Math.log(sum);
}

/** The most likely tokens at one position, best first (ties: lower id first), with their natural-log probabilities. */
export interface TopLogprobs {
  readonly tokenIds: readonly number[];
  readonly logprobs: readonly number[];
}

/**
 * The `k` largest logits (every one when k >= logits.length), best first, lower id first on ties,
 * as logprobs `logits[i] - norm` (`norm` = logSumExp(logits)). One pass with a size-k min-heap of ids:
 * O(V log k), no pass over the vocabulary per alternative.
 */
export function topLogprobs(logits: Float32Array, k: number, norm: number): TopLogprobs {
  const size = Math.min(k, logits.length);
  // Min-heap on (logit asc, id desc): the root is the weakest kept entry.
  const heapIds = new Int32Array(size);
  let n = 0;
  const weaker = (a: number, b: number): boolean => logits[a]! < logits[b]! || (logits[a] === logits[b] && a > b);
  for (let i = 0; i < logits.length; i++) {
    if (n < size) {
      let c = n++;
      while (c > 0) {
        const parent = (c - 1) >> 1;
        if (!weaker(i, heapIds[parent]!)) break;
        heapIds[c] = heapIds[parent]!;
        c = parent;
      }
      heapIds[c] = i;
      continue;
    }
    if (!weaker(heapIds[0]!, i)) continue;
    let c = 0;
    for (;;) {
      let child = 2 * c + 1;
      if (child >= n) break;
      if (child + 1 < n && weaker(heapIds[child + 1]!, heapIds[child]!)) child++;
      if (!weaker(heapIds[child]!, i)) break;
      heapIds[c] = heapIds[child]!;
      c = child;
    }
    heapIds[c] = i;
  }
  const ids = [...heapIds.subarray(0, n)].sort((a, b) => (weaker(a, b) ? 1 : weaker(b, a) ? -1 : 0));
  return { tokenIds: ids, logprobs: ids.map((id) => logits[id]! - norm) };
}
