/**
 * Next-interval predictors of one non-negative series (request count, a length percentile):
 * `constant` (the last value), `moving-average` (mean of the last N values) and `holt` (double
 * exponential smoothing: a level and a trend). One `Predictor` role; `createPredictor` picks one.
 *
 * Robustness contract: a non-finite observation (an interval without traffic has no mean ISL) is
 * skipped; a predictor that has seen nothing predicts 0; a prediction is never negative and never
 * NaN. So an idle model predicts 0 requests and can be scaled down (unlike Dynamo's #6985).
 *
 * Decisions are pure, so a predictor's whole state is a plain value (`snapshot()`), carried from
 * one decision to the next and restored by `createPredictor(config, state)`.
 */
import { invalidArgument } from '@switchyard/common';

export interface Predictor {
  /** Add the value of the interval that just ended. Non-finite values are ignored. */
  observe(x: number): void;
  /** The value expected `steps` intervals ahead (>= 0; 0 before any observation). */
  predict(steps?: number): number;
  /** The predictor's state, a plain JSON-able value. */
  snapshot(): PredictorState;
}

export type PredictorConfig =
  | { readonly kind: 'constant' }
  | { readonly kind: 'moving-average'; readonly window: number }
  | { readonly kind: 'holt'; readonly alpha: number; readonly beta: number };

export type PredictorState =
  | { readonly kind: 'constant'; readonly last: number | null }
  | { readonly kind: 'moving-average'; readonly values: readonly number[] }
  | { readonly kind: 'holt'; readonly level: number | null; readonly trend: number };

export const DEFAULT_MOVING_AVERAGE_WINDOW = 5;
export const DEFAULT_HOLT_ALPHA = 0.5;
export const DEFAULT_HOLT_BETA = 0.3;
/** Longest moving-average window accepted (state size is bounded by it). */
export const MAX_MOVING_AVERAGE_WINDOW = 10_000;

/** Refuses a config outside its domain with invalid_argument naming the field. */
export function checkPredictorConfig(config: PredictorConfig, field = 'predictor'): PredictorConfig {
  switch (config.kind) {
    case 'constant':
      return config;
    case 'moving-average':
      if (!Number.isSafeInteger(config.window) || config.window < 1 || config.window > MAX_MOVING_AVERAGE_WINDOW) {
        throw invalidArgument(`${field}.window must be an integer in [1, ${MAX_MOVING_AVERAGE_WINDOW}], got ${config.window}`);
      }
      return config;
    case 'holt':
      for (const k of ['alpha', 'beta'] as const) {
        const v = config[k];
        if (!Number.isFinite(v) || v <= 0 || v > 1) throw invalidArgument(`${field}.${k} must be in (0, 1], got ${v}`);
      }
      return config;
    default:
      throw invalidArgument(`${field}.kind must be 'constant', 'moving-average' or 'holt'`);
  }
}

/** A prediction as a load: NaN and negatives are 0, an overflow is the largest finite number. */
const clean = (x: number): number => (x === Infinity ? Number.MAX_VALUE : Number.isFinite(x) && x > 0 ? x : 0);
const stepsOf = (steps: number | undefined): number => (steps !== undefined && Number.isFinite(steps) && steps > 0 ? steps : 1);

class ConstantPredictor implements Predictor {
  constructor(private last: number | null) {}
  observe(x: number): void {
    if (Number.isFinite(x)) this.last = x;
  }
  predict(): number {
    return this.last === null ? 0 : clean(this.last);
  }
  snapshot(): PredictorState {
    return { kind: 'constant', last: this.last };
  }
}

class MovingAveragePredictor implements Predictor {
  private readonly values: number[];
  constructor(
    private readonly window: number,
    values: readonly number[],
  ) {
    this.values = values.filter(Number.isFinite).slice(-window);
  }
  observe(x: number): void {
    if (!Number.isFinite(x)) return;
    this.values.push(x);
    if (this.values.length > this.window) this.values.shift();
  }
  predict(): number {
    if (this.values.length === 0) return 0;
    return clean(this.values.reduce((a, b) => a + b, 0) / this.values.length);
  }
  snapshot(): PredictorState {
    return { kind: 'moving-average', values: [...this.values] };
  }
}

class HoltPredictor implements Predictor {
  constructor(
    private readonly alpha: number,
    private readonly beta: number,
    private level: number | null,
    private trend: number,
  ) {
    if (level !== null && !Number.isFinite(level)) this.level = null;
    if (!Number.isFinite(trend)) this.trend = 0;
  }
  observe(x: number): void {
    if (!Number.isFinite(x)) return;
    if (this.level === null) {
      this.level = x;
      this.trend = 0;
      return;
    }
    const previous = this.level;
    const level = this.alpha * x + (1 - this.alpha) * (previous + this.trend);
    const trend = this.beta * (level - previous) + (1 - this.beta) * this.trend;
    // Finite inputs near ±MAX_VALUE can overflow: restart from the observation instead of going NaN.
    if (Number.isFinite(level) && Number.isFinite(trend)) {
      this.level = level;
      this.trend = trend;
    } else {
      this.level = x;
      this.trend = 0;
    }
  }
  predict(steps?: number): number {
    if (this.level === null) return 0;
    return clean(this.level + stepsOf(steps) * this.trend);
  }
  snapshot(): PredictorState {
    return { kind: 'holt', level: this.level, trend: this.trend };
  }
}

/** The predictor `config` names, resumed from `state` when that is a state of the same kind. */
export function createPredictor(config: PredictorConfig, state?: PredictorState): Predictor {
  checkPredictorConfig(config);
  const s = state !== undefined && state.kind === config.kind ? state : undefined;
  switch (config.kind) {
    case 'constant':
      return new ConstantPredictor(s?.kind === 'constant' ? s.last : null);
    case 'moving-average':
      return new MovingAveragePredictor(config.window, s?.kind === 'moving-average' ? s.values : []);
    case 'holt':
      return new HoltPredictor(config.alpha, config.beta, s?.kind === 'holt' ? s.level : null, s?.kind === 'holt' ? s.trend : 0);
  }
}
