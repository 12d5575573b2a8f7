/**
 * Load mode: Dynamo's load-based rules (design reference §4.1) as the baseline. Decode sizes on
 * the pool's mean KV usage, prefill on its normalised queue (waiting requests per worker), an
 * aggregated pool on both (up if either is high, down only if both are low). One replica per
 * interval by default, no decode scale-down within 3 intervals of a decode scale-up (the new
 * worker's KV cache warms up first), all configurable.
 *
 * Beyond Dynamo: traffic that waits for a pool with no worker scales it from zero, and a pool whose
 * interval had no traffic and no work scales down towards its minimum (which may be 0).
 */
import { invalidArgument } from '@switchyard/common';
import { constrain, type Decision, type PoolBounds } from './decision.js';
import { summarisePoolLoad, type Observations, type Pool } from './observations.js';

export interface LoadRulesConfig {
  readonly kvUsageUp: number;
  readonly kvUsageDown: number;
  readonly queueUp: number;
  readonly queueDown: number;
  /** Replicas added or removed per interval at most. */
  readonly maxStep: number;
  /** Intervals after a decode (or aggregated) scale-up during which that pool does not scale down. */
  readonly decodeScaleDownCooldownIntervals: number;
  /**
   * A queue above `queueUp` adds a worker only if the queue's trend since the previous interval,
   * carried this many intervals ahead, still ends above `queueUp` (Dynamo's "do not add a prefill
   * worker if the queue drains within 3 intervals"); 0 turns the check off.
   */
  readonly queueTrendIntervals: number;
}

/** Dynamo's load planner defaults (`docs/architecture/load_planner.md`). */
export const DEFAULT_LOAD_RULES: LoadRulesConfig = {
  kvUsageUp: 0.9,
  kvUsageDown: 0.5,
  queueUp: 0.5,
  queueDown: 0.2,
  maxStep: 1,
  decodeScaleDownCooldownIntervals: 3,
  queueTrendIntervals: 3,
};

export function compileLoadRules(user: Partial<LoadRulesConfig> = {}, field = 'loadRules'): LoadRulesConfig {
  const c = { ...DEFAULT_LOAD_RULES, ...user };
  const need = (ok: boolean, name: string, what: string): void => {
    if (!ok) throw invalidArgument(`${field}.${name} ${what}, got ${String(c[name as keyof LoadRulesConfig])}`);
  };
  const fraction = (x: number): boolean => Number.isFinite(x) && x >= 0 && x <= 1;
  need(fraction(c.kvUsageUp), 'kvUsageUp', 'must be in [0, 1]');
  need(fraction(c.kvUsageDown) && c.kvUsageDown < c.kvUsageUp, 'kvUsageDown', 'must be in [0, 1] and below kvUsageUp');
  need(Number.isFinite(c.queueUp) && c.queueUp >= 0, 'queueUp', 'must be a finite number >= 0');
  need(Number.isFinite(c.queueDown) && c.queueDown >= 0 && c.queueDown < c.queueUp, 'queueDown', 'must be >= 0 and below queueUp');
  need(c.maxStep === Infinity || (Number.isSafeInteger(c.maxStep) && c.maxStep >= 1), 'maxStep', 'must be an integer >= 1 or Infinity');
  need(Number.isSafeInteger(c.decodeScaleDownCooldownIntervals) && c.decodeScaleDownCooldownIntervals >= 0, 'decodeScaleDownCooldownIntervals', 'must be an integer >= 0');
  need(Number.isSafeInteger(c.queueTrendIntervals) && c.queueTrendIntervals >= 0 && c.queueTrendIntervals <= 1000, 'queueTrendIntervals', 'must be an integer in 0..1000');
  return c;
}

export interface LoadRuleContext {
  readonly rules: LoadRulesConfig;
  readonly bounds: PoolBounds;
  /** True while this pool's scale-down is held after a recent scale-up. */
  readonly scaleDownHeld: boolean;
  /** The pool's waiting requests per worker at the previous interval, when it was measured. */
  readonly previousQueuePerWorker?: number;
}

/** The load-mode decision for one pool, or `undefined` when the observations do not mention it. */
export function decideLoadPool(pool: Pool, obs: Observations, ctx: LoadRuleContext): Decision | undefined {
  const p = obs.pools[pool];
  if (p === undefined) return undefined;
  const from = Number.isSafeInteger(p.replicas) && p.replicas >= 0 ? p.replicas : 0;
  const s = summarisePoolLoad(p.load);
  const requests = nonNegative(obs.requests.requests);
  const held = nonNegative(obs.requests.heldRequests ?? 0);
  const inputs: Record<string, number> = { replicas: from, reporting: s.reporting, requests, heldRequests: held };
  if (s.kvUsage !== undefined) inputs.kvUsage = s.kvUsage;
  if (s.queuePerWorker !== undefined) inputs.queuePerWorker = s.queuePerWorker;
  if (s.runningPerWorker !== undefined) inputs.runningPerWorker = s.runningPerWorker;
  const { rules } = ctx;
  const base = { pool, from, inputs, bounds: ctx.bounds, maxStep: rules.maxStep, scaleDownHeld: ctx.scaleDownHeld };

  if (from === 0 || s.reporting === 0) {
    // No worker to measure: demand (held or arriving requests) starts one; otherwise keep.
    if (requests + held > 0) return constrain({ ...base, proposed: Math.max(from + 1, 1), reason: 'demand_without_worker' });
    if (from === 0) return constrain({ ...base, proposed: 0, reason: 'no_traffic' });
    return constrain({ ...base, proposed: from, reason: 'no_load_samples' });
  }
  const busy = (s.runningPerWorker ?? 0) + (s.queuePerWorker ?? 0) > 0;
  if (requests + held === 0 && !busy) return constrain({ ...base, proposed: from - 1, reason: 'no_traffic' });

  const kv = pool === 'prefill' ? undefined : s.kvUsage;
  const queue = pool === 'decode' ? undefined : s.queuePerWorker;
  if (kv !== undefined && kv > rules.kvUsageUp) return constrain({ ...base, proposed: from + 1, reason: 'kv_usage_high' });
  if (queue !== undefined && queue > rules.queueUp) {
    const prev = ctx.previousQueuePerWorker;
    if (rules.queueTrendIntervals > 0 && prev !== undefined && Number.isFinite(prev) && prev >= 0) {
      // Draining fast enough that the queue is back under the threshold before a new worker would help.
      const ahead = queue + (queue - prev) * rules.queueTrendIntervals;
      inputs.queueAhead = Math.max(0, ahead);
      if (ahead <= rules.queueUp) return constrain({ ...base, proposed: from, reason: 'queue_draining' });
    }
    return constrain({ ...base, proposed: from + 1, reason: 'queue_high' });
  }
  const kvLow = kv === undefined || kv < rules.kvUsageDown;
  const queueLow = queue === undefined || queue < rules.queueDown;
  if (kvLow && queueLow && (kv !== undefined || queue !== undefined)) {
    return constrain({ ...base, proposed: from - 1, reason: kv !== undefined ? 'kv_usage_low' : 'queue_low' });
  }
  return constrain({ ...base, proposed: from, reason: 'within_thresholds' });
}

function nonNegative(x: number): number {
  return Number.isFinite(x) && x > 0 ? x : 0;
}
