/**
 * The profiler's pure core (`switchyard planner profile`): which measurements to take of one
 * worker (`planSweep`), taking them through an injected `ProfilerProbe` (`runSweep`), and turning
 * them into a `Profile` that `parseProfile` accepts (`assembleProfile`). The app's probe does the
 * HTTP; nothing here touches the network or a clock.
 *
 * - **prefill**: batch 1, one output token, at `islPoints` input lengths spread evenly up to
 *   `maxIsl`. TTFT is the median over `repeats`; throughput = ISL / TTFT.
 * - **decode**: at `contextPoints` context lengths c spread evenly up to the longest that fits,
 *   `concurrency` sequences run at once, each with ISL c − OSL/2 and OSL `decodeOsl`, so its mean
 *   context over its decode is c. Concurrencies are spread evenly from 1 to the most that fit the
 *   KV cache, `max_num_seqs` and `maxConcurrency`. The KV usage of a point is computed from the
 *   model card: concurrency × ceil(c / block size) blocks over the worker's blocks. ITL is the
 *   median over `repeats` of the probe's figure (itself the median over the point's sequences).
 * - **assembly**: the decode grid's kvUsage axis is every distinct usage measured; its context
 *   axis the planned contexts. Each context column is interpolated linearly over that column's own
 *   measurements and clamped outside them: a usage a short context cannot reach (too few sequences
 *   allowed) takes the figure at the highest usage it reached.
 */
import { invalidArgument } from '@switchyard/common';
import { MAX_PROFILE_POINTS, PROFILE_VERSION, interpolate1d, parseProfile, type Profile } from './profile.js';

/** What the worker allows, read from its model card by the app. */
export interface WorkerLimits {
  /** Prompt + completion limit, tokens. */
  readonly maxModelLen: number;
  /** Tokens per KV block. */
  readonly blockSize: number;
  /** KV blocks the worker holds. */
  readonly numBlocks: number;
  /** Sequences the worker runs at once. */
  readonly maxNumSeqs: number;
}

export interface SweepOptions {
  /** Longest prefill input (tokens); clamped to the model's length limit. */
  readonly maxIsl: number;
  readonly islPoints: number;
  readonly contextPoints: number;
  /** Most concurrent decode sequences (clamped to `max_num_seqs` and the KV cache). */
  readonly maxConcurrency: number;
  readonly concurrencyPoints: number;
  /** Output tokens of each decode request (ITL is measured over them; at least 2). */
  readonly decodeOsl: number;
  readonly repeats: number;
}

export const DEFAULT_SWEEP: SweepOptions = {
  maxIsl: 4096,
  islPoints: 8,
  contextPoints: 4,
  maxConcurrency: 64,
  concurrencyPoints: 5,
  decodeOsl: 32,
  repeats: 3,
};

/** Bounds of the sweep options: a sweep is at most 32 prefill points and 32 × 32 decode points. */
export const MAX_SWEEP_POINTS = 32;
export const MAX_REPEATS = 100;
export const MAX_DECODE_OSL = 4096;
export const MAX_CONCURRENCY = 4096;
/** KV blocks the worker keeps free of admission (vLLM's default watermark, 1%): the decode sweep stays under the rest. */
export const KV_HEADROOM = 0.02;

export interface DecodePoint {
  /** Mean context of each sequence over its decode, tokens. */
  readonly context: number;
  readonly concurrency: number;
  readonly isl: number;
  readonly osl: number;
  /** KV usage the point holds (0..1), from the model card. */
  readonly kvUsage: number;
}

export interface SweepPlan {
  readonly prefillIsl: readonly number[];
  readonly decode: readonly DecodePoint[];
  readonly kvCapacityTokens: number;
  readonly repeats: number;
}

/** Takes one measurement on the worker. Either may reject (the sweep stops with that error). */
export interface ProfilerProbe {
  /** TTFT (ms) of one request of `isl` prompt tokens and one output token, alone on the worker. */
  prefillTtftMs(isl: number): Promise<number>;
  /** ITL (ms) of `point.concurrency` concurrent requests of `point.isl` → `point.osl` tokens. */
  decodeItlMs(point: DecodePoint): Promise<number>;
}

export interface SweepMeasurements {
  readonly prefill: readonly { readonly isl: number; readonly ttftMs: number }[];
  readonly decode: readonly { readonly point: DecodePoint; readonly itlMs: number }[];
}

const positiveInt = (x: number, name: string, max: number): void => {
  if (!Number.isSafeInteger(x) || x < 1 || x > max) throw invalidArgument(`${name} must be an integer in [1, ${max}], got ${x}`);
};

/** `n` distinct integers spread evenly over [lo, hi], ascending (fewer when the range is narrow). */
export function spread(lo: number, hi: number, n: number): number[] {
  if (hi < lo) return [];
  if (n <= 1 || hi === lo) return [hi];
  const out: number[] = [];
  for (let k = 0; k < n; k++) {
    const v = Math.round(lo + ((hi - lo) * k) / (n - 1));
    if (out.length === 0 || v > out[out.length - 1]!) out.push(v);
  }
  return out;
}

/** The measurements to take. Throws invalid_argument on bad options or a worker too small to profile. */
export function planSweep(limits: WorkerLimits, options: SweepOptions): SweepPlan {
  positiveInt(limits.maxModelLen, 'maxModelLen', 1e9);
  positiveInt(limits.blockSize, 'blockSize', 1e6);
  positiveInt(limits.numBlocks, 'numBlocks', 1e9);
  positiveInt(limits.maxNumSeqs, 'maxNumSeqs', 1e9);
  positiveInt(options.maxIsl, 'maxIsl', 1e9);
  positiveInt(options.islPoints, 'islPoints', MAX_SWEEP_POINTS);
  positiveInt(options.contextPoints, 'contextPoints', MAX_SWEEP_POINTS);
  positiveInt(options.concurrencyPoints, 'concurrencyPoints', MAX_SWEEP_POINTS);
  positiveInt(options.maxConcurrency, 'maxConcurrency', MAX_CONCURRENCY);
  if (!Number.isSafeInteger(options.decodeOsl) || options.decodeOsl < 2 || options.decodeOsl > MAX_DECODE_OSL) {
    throw invalidArgument(`decodeOsl must be an integer in [2, ${MAX_DECODE_OSL}] (an ITL needs two tokens), got ${options.decodeOsl}`);
  }
  positiveInt(options.repeats, 'repeats', MAX_REPEATS);

  const kvCapacityTokens = limits.numBlocks * limits.blockSize;
  const usableBlocks = Math.floor(limits.numBlocks * (1 - KV_HEADROOM));
  const blocksFor = (tokens: number): number => Math.ceil(tokens / limits.blockSize);

  // Prefill: ISL + 1 output token within the length limit and the usable cache.
  const islHi = Math.min(options.maxIsl, limits.maxModelLen - 1, usableBlocks * limits.blockSize - 1);
  if (islHi < 1) throw invalidArgument(`the worker's limits (max_model_len ${limits.maxModelLen}, ${limits.numBlocks} blocks of ${limits.blockSize}) leave no room to profile`);
  const islLo = Math.max(1, Math.round(islHi / options.islPoints));
  const prefillIsl = spread(islLo, islHi, options.islPoints);

  // Decode: a context c needs ISL c - OSL/2 >= 1 and a whole sequence (ISL + OSL) within the limits.
  const osl = Math.min(options.decodeOsl, Math.max(2, Math.floor((islHi + 1) / 2)));
  const half = Math.floor(osl / 2);
  const ctxLo = half + 1;
  const ctxHi = Math.min(options.maxIsl, limits.maxModelLen - (osl - half), usableBlocks * limits.blockSize - (osl - half));
  const decode: DecodePoint[] = [];
  const contexts = spread(Math.max(ctxLo, Math.round(ctxHi / options.contextPoints)), ctxHi, options.contextPoints);
  for (const context of contexts) {
    const isl = context - half;
    // Peak blocks of one sequence (at its last token) decide how many fit at once.
    const fit = Math.floor(usableBlocks / blocksFor(isl + osl));
    const nHi = Math.max(1, Math.min(options.maxConcurrency, limits.maxNumSeqs, fit));
    for (const concurrency of spread(1, nHi, options.concurrencyPoints)) {
      const kvUsage = Math.min(1, (concurrency * blocksFor(context)) / limits.numBlocks);
      decode.push({ context, concurrency, isl, osl, kvUsage });
    }
  }
  return { prefillIsl, decode, kvCapacityTokens, repeats: options.repeats };
}

/** Median of a non-empty list of finite numbers. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const checked = (x: number, what: string): number => {
  if (!Number.isFinite(x) || x <= 0) throw invalidArgument(`${what}: the probe returned ${x} (a positive latency in ms was expected)`);
  return x;
};

/**
 * Take the plan's measurements one at a time (prefill first), `repeats` each, keeping the median.
 * Each phase starts with one warm-up run of its first point, not kept (a worker's first requests pay
 * for lazy set-up: compiled kernels, allocations). `progress` hears about each point as it
 * completes (for the app's log).
 */
export async function runSweep(plan: SweepPlan, probe: ProfilerProbe, progress?: (what: string) => void): Promise<SweepMeasurements> {
  if (plan.prefillIsl.length > 0) checked(await probe.prefillTtftMs(plan.prefillIsl[0]!), `prefill warm-up at ISL ${plan.prefillIsl[0]!}`);
  const prefill: { isl: number; ttftMs: number }[] = [];
  for (const isl of plan.prefillIsl) {
    const runs: number[] = [];
    for (let r = 0; r < plan.repeats; r++) runs.push(checked(await probe.prefillTtftMs(isl), `prefill at ISL ${isl}`));
    prefill.push({ isl, ttftMs: median(runs) });
    progress?.(`prefill isl=${isl} ttftMs=${median(runs).toFixed(2)}`);
  }
  if (plan.decode.length > 0) checked(await probe.decodeItlMs(plan.decode[0]!), 'decode warm-up');
  const decode: { point: DecodePoint; itlMs: number }[] = [];
  for (const point of plan.decode) {
    const runs: number[] = [];
    for (let r = 0; r < plan.repeats; r++) runs.push(checked(await probe.decodeItlMs(point), `decode at context ${point.context} × ${point.concurrency}`));
    decode.push({ point, itlMs: median(runs) });
    progress?.(`decode context=${point.context} concurrency=${point.concurrency} kvUsage=${point.kvUsage.toFixed(3)} itlMs=${median(runs).toFixed(2)}`);
  }
  return { prefill, decode };
}

/** Usages closer than this are one grid row. */
const USAGE_RESOLUTION = 1e-4;

/** The measurements as a profile, validated by `parseProfile` (so a bad measurement fails here, not in the planner). */
export function assembleProfile(m: SweepMeasurements, kvCapacityTokens: number): Profile {
  const out: { version: typeof PROFILE_VERSION; prefill?: unknown; decode?: unknown } = { version: PROFILE_VERSION };

  if (m.prefill.length > 0) {
    const byIsl = groupMedian(m.prefill.map((p) => [p.isl, p.ttftMs]));
    out.prefill = {
      isl: byIsl.map(([isl]) => isl),
      ttftMs: byIsl.map(([, t]) => t),
      throughputTokensPerSec: byIsl.map(([isl, t]) => (isl * 1000) / t),
    };
  }

  if (m.decode.length > 0) {
    const contexts = [...new Set(m.decode.map((d) => d.point.context))].sort((a, b) => a - b);
    const usages: number[] = [];
    for (const u of m.decode.map((d) => Math.round(d.point.kvUsage / USAGE_RESOLUTION) * USAGE_RESOLUTION).sort((a, b) => a - b)) {
      if (usages.length === 0 || u > usages[usages.length - 1]!) usages.push(u);
    }
    const kvUsage = thin(usages, MAX_PROFILE_POINTS);
    const columns = contexts.map((c) => {
      const pts = groupMedian(m.decode.filter((d) => d.point.context === c).map((d) => [d.point.kvUsage, d.itlMs]));
      return kvUsage.map((u) => interpolate1d(pts.map(([x]) => x), pts.map(([, y]) => y), u));
    });
    out.decode = {
      kvUsage,
      contextLength: contexts,
      itlMs: kvUsage.map((_, i) => columns.map((col) => col[i]!)),
      kvCapacityTokens,
    };
  }
  return parseProfile(out);
}

/** [x, y] pairs → ascending distinct x with the median y of each. */
function groupMedian(pairs: readonly (readonly [number, number])[]): [number, number][] {
  const groups = new Map<number, number[]>();
  for (const [x, y] of pairs) groups.set(x, [...(groups.get(x) ?? []), y]);
  return [...groups.entries()].sort((a, b) => a[0] - b[0]).map(([x, ys]) => [x, median(ys)]);
}

/** At most `n` of ascending `xs`, evenly chosen, always keeping both ends. */
function thin(xs: readonly number[], n: number): number[] {
  if (xs.length <= n) return [...xs];
  return spread(0, xs.length - 1, n).map((i) => xs[i]!);
}

/** One sweep end to end: plan, measure, assemble. */
export async function profileWorker(limits: WorkerLimits, options: SweepOptions, probe: ProfilerProbe, progress?: (what: string) => void): Promise<Profile> {
  const plan = planSweep(limits, options);
  return assembleProfile(await runSweep(plan, probe, progress), plan.kvCapacityTokens);
}
