/**
 * What one planner decision sees: per pool, the workers' load samples (and optionally their
 * per-step forward-pass figures) for the last adjustment interval and the current replica count;
 * for the model, the routers' request figures for that interval. Plain values: decoding the wire
 * (`WireLoad` and friends in @switchyard/cluster) happens at the edge that builds these.
 *
 * Every figure here may be missing, empty or non-finite (a worker that never reported, an interval
 * without traffic): the summaries below skip non-finite values and report "no data" as `undefined`
 * or 0, never NaN. Zero traffic is a normal input, not an error.
 */

/** The pools a planner sizes. `aggregated` workers do prefill and decode both. */
export type Pool = 'prefill' | 'decode' | 'aggregated';
export const POOLS: readonly Pool[] = ['prefill', 'decode', 'aggregated'];

/** One worker's load sample (the fields of the cluster's `WireLoad`). */
export interface LoadSample {
  readonly instanceId: string;
  /** Epoch ms on the worker's clock. */
  readonly ts: number;
  readonly numRunning: number;
  readonly numWaiting: number;
  readonly kvActiveBlocks: number;
  readonly kvTotalBlocks: number;
  /** kvActiveBlocks / kvTotalBlocks (recomputed from the blocks when those are usable). */
  readonly kvUsage: number;
  /** Cumulative prefix-cache prompt tokens looked up / hit. */
  readonly prefixCacheQueries: number;
  readonly prefixCacheHits: number;
}

/** One engine step of one worker (Dynamo's ForwardPassMetrics). */
export interface ForwardPassSample {
  readonly instanceId: string;
  readonly ts: number;
  /** Wall time of the step, ms. */
  readonly wallMs: number;
  /** Prompt tokens computed in the step. */
  readonly prefillTokens: number;
  /** KV tokens attended by the step's decoding sequences. */
  readonly decodeKvTokens: number;
}

/**
 * A distribution of a non-negative quantity over the interval: raw samples, or a histogram whose
 * bucket i holds values in (bounds[i-1], bounds[i]] (bucket 0 from 0). `bounds` ascend; the last
 * bound may be `Infinity` (an overflow bucket: quantiles in it report the last finite bound).
 */
export type Distribution =
  | { readonly kind: 'samples'; readonly values: readonly number[] }
  | { readonly kind: 'histogram'; readonly bounds: readonly number[]; readonly counts: readonly number[] };

/** The routers' figures for one model over the interval. */
export interface RequestFigures {
  /** Requests that arrived in the interval. */
  readonly requests: number;
  /** Requests the routers hold because no worker serves the model (scale from zero). */
  readonly heldRequests?: number;
  /** Input (prompt) lengths, tokens. */
  readonly isl?: Distribution;
  /** Output lengths, tokens. */
  readonly osl?: Distribution;
  /** Time to first token, ms. */
  readonly ttftMs?: Distribution;
  /** Inter-token latency, ms. */
  readonly itlMs?: Distribution;
}

export interface PoolObservation {
  /** Replicas the pool has now (started, not yet drained). */
  readonly replicas: number;
  readonly load: readonly LoadSample[];
  readonly forwardPass?: readonly ForwardPassSample[];
}

export interface Observations {
  /** Length of the interval these figures cover, seconds. */
  readonly intervalSec: number;
  readonly pools: Partial<Record<Pool, PoolObservation>>;
  readonly requests: RequestFigures;
}

// ---- summaries ------------------------------------------------------------------------------------

const finite = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
const nonNegative = (x: unknown): x is number => finite(x) && x >= 0;

/** Number of finite non-negative observations in `d` (0 for none). */
export function distributionCount(d: Distribution | undefined): number {
  if (d === undefined) return 0;
  if (d.kind === 'samples') return d.values.filter(nonNegative).length;
  let n = 0;
  for (let i = 0; i < d.counts.length && i < d.bounds.length; i++) if (nonNegative(d.counts[i])) n += d.counts[i]!;
  return n;
}

/** Mean of `d`, or `undefined` when it holds no usable value. Histogram buckets count at their midpoint. */
export function distributionMean(d: Distribution | undefined): number | undefined {
  if (d === undefined) return undefined;
  if (d.kind === 'samples') {
    return meanOf(d.values);
  }
  // A running weighted mean: sums of huge counts or values would overflow to Infinity.
  let n = 0;
  let mean = 0;
  let lower = 0;
  for (let i = 0; i < d.counts.length && i < d.bounds.length; i++) {
    const upper = d.bounds[i]!;
    const c = d.counts[i];
    if (nonNegative(c) && c > 0) {
      n += c;
      if (!finite(n)) return undefined;
      const at = finite(upper) ? lower + (upper - lower) / 2 : lower;
      mean += (c / n) * (at - mean);
    }
    if (finite(upper)) lower = Math.max(lower, upper);
  }
  return n === 0 ? undefined : mean;
}

/**
 * The `p`-th percentile (0..100) of `d`, or `undefined` when it holds no usable value. Samples:
 * nearest-rank (the smallest value with at least p% of the samples at or below it). Histogram:
 * linear within the bucket the rank falls in; in an overflow bucket, its lower bound.
 */
export function distributionQuantile(d: Distribution | undefined, p: number): number | undefined {
  if (d === undefined) return undefined;
  const q = Math.min(100, Math.max(0, finite(p) ? p : 100)) / 100;
  if (d.kind === 'samples') {
    const v = d.values.filter(nonNegative).sort((a, b) => a - b);
    if (v.length === 0) return undefined;
    return v[Math.min(v.length - 1, Math.max(0, Math.ceil(q * v.length) - 1))]!;
  }
  const n = distributionCount(d);
  if (n === 0 || !finite(n)) return undefined;
  const rank = q * n;
  let seen = 0;
  let lower = 0;
  for (let i = 0; i < d.counts.length && i < d.bounds.length; i++) {
    const upper = d.bounds[i]!;
    const c = nonNegative(d.counts[i]) ? d.counts[i]! : 0;
    if (c > 0 && seen + c >= rank) {
      if (!finite(upper)) return lower;
      return lower + ((upper - lower) * Math.max(0, rank - seen)) / c;
    }
    seen += c;
    if (finite(upper)) lower = Math.max(lower, upper);
  }
  return lower;
}

/** One pool's load in one interval, averaged per worker then across workers (only usable fields count). */
export interface PoolLoadSummary {
  /** Workers with at least one sample. */
  readonly reporting: number;
  /** Mean KV usage 0..1, or `undefined` when no worker reported one. */
  readonly kvUsage: number | undefined;
  /** Mean waiting requests per reporting worker (Dynamo's normalised prefill queue), or `undefined`. */
  readonly queuePerWorker: number | undefined;
  /** Mean running sequences per reporting worker, or `undefined`. */
  readonly runningPerWorker: number | undefined;
}

function usage(s: LoadSample): number | undefined {
  if (nonNegative(s.kvActiveBlocks) && finite(s.kvTotalBlocks) && s.kvTotalBlocks > 0) return Math.min(1, s.kvActiveBlocks / s.kvTotalBlocks);
  return nonNegative(s.kvUsage) ? Math.min(1, s.kvUsage) : undefined;
}

/** Mean of the finite non-negative values, or `undefined`; a running mean, so huge values cannot overflow. */
function meanOf(values: readonly (number | undefined)[]): number | undefined {
  let n = 0;
  let mean = 0;
  for (const x of values) {
    if (!nonNegative(x)) continue;
    n += 1;
    mean += (x - mean) / n;
  }
  return n === 0 ? undefined : mean;
}

export function summarisePoolLoad(samples: readonly LoadSample[]): PoolLoadSummary {
  const byWorker = new Map<string, LoadSample[]>();
  for (const s of samples) {
    const list = byWorker.get(s.instanceId);
    if (list === undefined) byWorker.set(s.instanceId, [s]);
    else list.push(s);
  }
  const perWorker = [...byWorker.values()];
  return {
    reporting: perWorker.length,
    kvUsage: meanOf(perWorker.map((l) => meanOf(l.map(usage)))),
    queuePerWorker: meanOf(perWorker.map((l) => meanOf(l.map((s) => s.numWaiting)))),
    runningPerWorker: meanOf(perWorker.map((l) => meanOf(l.map((s) => s.numRunning)))),
  };
}
