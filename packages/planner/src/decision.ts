/**
 * What a planner decision says about one pool, and the bounds and cooldown every mode applies
 * after proposing a target (`constrain`): both modes share them, so a rule is written once.
 */
import type { Pool } from './observations.js';

export type Direction = 'up' | 'down' | 'hold';

/** Why a pool's target is what it is. A closed set: metrics label by it. */
export type DecisionReason =
  | 'kv_usage_high'
  | 'kv_usage_low'
  | 'queue_high'
  | 'queue_draining'
  | 'queue_low'
  | 'within_thresholds'
  | 'no_traffic'
  | 'demand_without_worker'
  | 'no_load_samples'
  | 'sla_sizing'
  | 'below_min'
  | 'above_max'
  | 'at_max'
  | 'at_min'
  | 'scale_up_cooldown';

export interface Decision {
  readonly pool: Pool;
  /** Replicas now. */
  readonly from: number;
  /** Replicas wanted after this interval. */
  readonly to: number;
  readonly direction: Direction;
  readonly reason: DecisionReason;
  /** The figures the decision was taken on (names are stable; values are finite). */
  readonly inputs: Readonly<Record<string, number>>;
}

export interface PoolBounds {
  /** Fewest replicas; 0 lets an idle pool scale to zero. */
  readonly minReplicas: number;
  readonly maxReplicas: number;
}

export interface ConstrainInput {
  readonly pool: Pool;
  readonly from: number;
  /** The rule's proposal (any number; rounded up, non-finite means "keep"). */
  readonly proposed: number;
  readonly reason: DecisionReason;
  readonly inputs: Record<string, number>;
  readonly bounds: PoolBounds;
  /** Largest change per interval (Infinity: none). */
  readonly maxStep: number;
  /** True while scale-down is held after a recent scale-up (decode KV warm-up). */
  readonly scaleDownHeld: boolean;
}

/**
 * Apply, in order: the step limit, the scale-down hold, then the bounds (a pool outside its bounds
 * moves into them at once, whatever the step). The reason is the rule's unless a constraint changed
 * the outcome.
 */
export function constrain(c: ConstrainInput): Decision {
  const from = c.from;
  let to = Number.isFinite(c.proposed) ? Math.max(0, Math.ceil(c.proposed)) : from;
  let reason = c.reason;
  if (to > from + c.maxStep) to = from + c.maxStep;
  if (to < from - c.maxStep) to = from - c.maxStep;
  if (to < from && c.scaleDownHeld) {
    to = from;
    reason = 'scale_up_cooldown';
  }
  const { minReplicas, maxReplicas } = c.bounds;
  if (to > maxReplicas) {
    reason = from > maxReplicas ? 'above_max' : 'at_max';
    to = maxReplicas;
  } else if (to < minReplicas) {
    reason = from < minReplicas ? 'below_min' : 'at_min';
    to = minReplicas;
  }
  const direction: Direction = to > from ? 'up' : to < from ? 'down' : 'hold';
  return { pool: c.pool, from, to, direction, reason, inputs: c.inputs };
}
