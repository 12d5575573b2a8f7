/**
 * SLA mode's sizing: from the next interval's predicted demand and a worker profile, how many
 * replicas each pool needs to meet the TTFT and ITL objectives at their percentile.
 *
 * Dynamo sizes from mean ISL and OSL (design reference §4.2). Here, with P the SLO percentile
 * (default 90):
 * - **prefill**: demand = rate × mean ISL prompt tokens/s (means are right for a throughput: the
 *   total is count × mean); a worker's capacity = the profile's throughput at the **pP ISL**
 *   (prefill per token slows as prompts grow, so capacity at the long tail is the conservative
 *   figure), divided by the prefill correction. `ttftAtPercentileMs` = profile TTFT at pP ISL ×
 *   correction is reported, and flagged (`ttftUnattainable` = 1) when it alone exceeds the SLO:
 *   more replicas cannot fix that.
 * - **decode**: the context of the pP sequence = pP ISL + pP OSL / 2 (its mean context over its
 *   own decode; summing percentiles over-estimates the percentile of the sum, which errs on the
 *   safe side). The ITL target = ITL SLO / decode correction. A worker runs at the highest KV usage
 *   (scanned over the profile's range) whose ITL at that context meets the target; it then holds
 *   usage × kvCapacityTokens / context sequences, each producing 1000 / ITL tokens/s. Demand =
 *   rate × mean OSL tokens/s. If even the lowest profiled usage misses the target, the lowest usage
 *   is used and `itlUnattainable` = 1.
 * - **aggregated**: both loads share each worker: ceil(prefill demand / prefill capacity +
 *   decode demand / decode capacity).
 * Replicas = ceil(demand / capacity); zero demand needs zero replicas (bounds apply afterwards).
 *
 * Correction factors (observed / expected latency at the percentile) are clamped to
 * [minCorrection, maxCorrection] so one outlier interval cannot size the pool to nothing or to max.
 */
import type { Pool } from './observations.js';
import { decodeItlMs, prefillThroughput, prefillTtftMs, type Profile } from './profile.js';

export interface SlaTargets {
  readonly ttftMs: number;
  readonly itlMs: number;
  /** Percentile (0..100] of latencies the objectives bind. */
  readonly percentile: number;
}

export const DEFAULT_SLA_TARGETS: SlaTargets = { ttftMs: 500, itlMs: 50, percentile: 90 };
export const DEFAULT_MIN_CORRECTION = 0.25;
export const DEFAULT_MAX_CORRECTION = 4;
/** KV-usage points scanned per decode sizing. */
export const DECODE_USAGE_SCAN_POINTS = 256;

/** The next interval's demand, as predicted. Non-finite or negative figures count as 0, figures above `MAX_DEMAND_FIGURE` as that. */
export interface PredictedDemand {
  /** Requests per second. */
  readonly requestRate: number;
  readonly islMean: number;
  readonly oslMean: number;
  /** ISL and OSL at the SLO percentile. */
  readonly islAtPercentile: number;
  readonly oslAtPercentile: number;
}

export interface Corrections {
  readonly prefill: number;
  readonly decode: number;
}

export interface SlaSizing {
  /** Unbounded replicas needed (>= 0 integer). */
  readonly replicas: number;
  readonly inputs: Record<string, number>;
}

/** Clamp an observed/expected ratio; no usable ratio (no traffic, no profile) means 1. */
export function correctionFactor(observed: number | undefined, expected: number | undefined, min = DEFAULT_MIN_CORRECTION, max = DEFAULT_MAX_CORRECTION): number {
  if (observed === undefined || expected === undefined || !Number.isFinite(observed) || !Number.isFinite(expected) || expected <= 0 || observed < 0) return 1;
  return Math.min(max, Math.max(min, observed / expected));
}

/** Largest demand figure (rate, length) sizing takes: products of these stay finite. */
export const MAX_DEMAND_FIGURE = 1e12;
const safe = (x: number): number => (Number.isFinite(x) && x > 0 ? Math.min(x, MAX_DEMAND_FIGURE) : 0);

function prefillNeed(profile: Profile, demand: PredictedDemand, targets: SlaTargets, corr: number, inputs: Record<string, number>): number | undefined {
  const p = profile.prefill;
  if (p === undefined) return undefined;
  const tokensPerSec = safe(demand.requestRate) * safe(demand.islMean);
  const capacity = prefillThroughput(p, safe(demand.islAtPercentile)) / corr;
  const ttft = prefillTtftMs(p, safe(demand.islAtPercentile)) * corr;
  inputs.prefillTokensPerSec = tokensPerSec;
  inputs.prefillCapacityPerWorker = capacity;
  inputs.ttftAtPercentileMs = ttft;
  inputs.ttftUnattainable = ttft > targets.ttftMs ? 1 : 0;
  return tokensPerSec / capacity;
}

function decodeNeed(profile: Profile, demand: PredictedDemand, targets: SlaTargets, corr: number, inputs: Record<string, number>): number | undefined {
  const d = profile.decode;
  if (d === undefined) return undefined;
  const context = Math.max(1, safe(demand.islAtPercentile) + safe(demand.oslAtPercentile) / 2);
  inputs.decodeContextAtPercentile = context;
  const target = targets.itlMs / corr;
  const lo = d.kvUsage[0]!;
  const hi = d.kvUsage[d.kvUsage.length - 1]!;
  let usage = -1;
  for (let k = DECODE_USAGE_SCAN_POINTS - 1; k >= 0; k--) {
    const u = lo + ((hi - lo) * k) / (DECODE_USAGE_SCAN_POINTS - 1);
    if (decodeItlMs(d, u, context) <= target) {
      usage = u;
      break;
    }
  }
  inputs.itlUnattainable = usage < 0 ? 1 : 0;
  if (usage < 0) usage = lo;
  const itl = decodeItlMs(d, usage, context);
  // At least one sequence fits a worker (a profiled context longer than the cache still decodes).
  const sequences = Math.max(1, (usage * d.kvCapacityTokens) / context);
  const capacity = (sequences * 1000) / itl;
  const tokensPerSec = safe(demand.requestRate) * safe(demand.oslMean);
  inputs.decodeItlTargetMs = target;
  inputs.decodeKvUsageTarget = usage;
  inputs.decodeTokensPerSec = tokensPerSec;
  inputs.decodeCapacityPerWorker = capacity;
  return tokensPerSec / capacity;
}

/**
 * Replicas `pool` needs for `demand`, or `undefined` when the profile lacks the figures the pool
 * needs (prefill figures for prefill, decode for decode, both for aggregated).
 */
export function sizePool(pool: Pool, profile: Profile, demand: PredictedDemand, targets: SlaTargets, corrections: Corrections): SlaSizing | undefined {
  const inputs: Record<string, number> = {
    requestRate: safe(demand.requestRate),
    islMean: safe(demand.islMean),
    oslMean: safe(demand.oslMean),
    islAtPercentile: safe(demand.islAtPercentile),
    oslAtPercentile: safe(demand.oslAtPercentile),
    prefillCorrection: corrections.prefill,
    decodeCorrection: corrections.decode,
  };
  const prefill = pool === 'decode' ? 0 : prefillNeed(profile, demand, targets, corrections.prefill, inputs);
  const decode = pool === 'prefill' ? 0 : decodeNeed(profile, demand, targets, corrections.decode, inputs);
  if (prefill === undefined || decode === undefined) return undefined;
  const need = prefill + decode;
  // Round away float dust (3.0000000001 workers is 3), then up.
  const replicas = Number.isFinite(need) && need > 0 ? Math.ceil(need - 1e-9) : 0;
  inputs.replicasNeeded = need;
  return { replicas, inputs };
}
