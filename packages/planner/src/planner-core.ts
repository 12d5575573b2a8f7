/**
 * The planner's one decision step: `decide(state, observations, config)` → decisions per pool and
 * the state for the next step. Pure: no clock, no IO, no randomness; the same inputs give the same
 * outputs, so the app, the simulator and the tests run exactly this code.
 *
 * - **load** mode: `load-rules.ts` per pool.
 * - **sla** mode: predictors (carried in the state) forecast the next interval's request count and
 *   the ISL/OSL means and SLO percentiles; correction factors compare this interval's observed
 *   latencies with the profile's; `sla-sizing.ts` turns that into replicas. Pools the profile
 *   cannot size, and traffic whose lengths were never reported, fall back to the load rules (the
 *   reason tells which applied).
 * Both modes then apply the same constraints (`constrain`): step limit, scale-down hold after a
 * decode scale-up, bounds. Demand on a pool with no worker always asks for at least one.
 *
 * The config is compiled once (`compilePlannerConfig`): user options with defaults, validated.
 */
import { invalidArgument } from '@switchyard/common';
import { constrain, type Decision, type PoolBounds } from './decision.js';
import { compileLoadRules, decideLoadPool, type LoadRulesConfig } from './load-rules.js';
import { distributionMean, distributionQuantile, summarisePoolLoad, POOLS, type Observations, type Pool } from './observations.js';
import { checkPredictorConfig, createPredictor, DEFAULT_HOLT_ALPHA, DEFAULT_HOLT_BETA, type PredictorConfig, type PredictorState } from './predictors.js';
import { decodeItlMs, prefillTtftMs, type Profile } from './profile.js';
import { correctionFactor, DEFAULT_MAX_CORRECTION, DEFAULT_MIN_CORRECTION, DEFAULT_SLA_TARGETS, sizePool, type PredictedDemand, type SlaTargets } from './sla-sizing.js';

export type PlannerMode = 'load' | 'sla';

export interface PlannerOptions {
  readonly mode: PlannerMode;
  /** Bounds per pool; a pool without its own takes `defaultBounds`. */
  readonly bounds?: Partial<Record<Pool, Partial<PoolBounds>>>;
  readonly defaultBounds?: Partial<PoolBounds>;
  readonly loadRules?: Partial<LoadRulesConfig>;
  /** SLA mode only: required there. */
  readonly profile?: Profile;
  readonly sla?: Partial<SlaTargets>;
  readonly predictor?: PredictorConfig;
  readonly minCorrection?: number;
  readonly maxCorrection?: number;
  /** SLA mode: largest change per interval (default: none, the sizing jumps to its target). */
  readonly slaMaxStep?: number;
}

export interface PlannerConfig {
  readonly mode: PlannerMode;
  readonly bounds: Readonly<Record<Pool, PoolBounds>>;
  readonly loadRules: LoadRulesConfig;
  readonly profile: Profile | undefined;
  readonly sla: SlaTargets;
  readonly predictor: PredictorConfig;
  readonly minCorrection: number;
  readonly maxCorrection: number;
  readonly slaMaxStep: number;
}

/** Dynamo's budget defaults are 1..8 GPUs; a pool here is 1..8 replicas unless told. */
export const DEFAULT_POOL_BOUNDS: PoolBounds = { minReplicas: 1, maxReplicas: 8 };
export const DEFAULT_PREDICTOR: PredictorConfig = { kind: 'holt', alpha: DEFAULT_HOLT_ALPHA, beta: DEFAULT_HOLT_BETA };

function checkBounds(b: PoolBounds, field: string): PoolBounds {
  if (!Number.isSafeInteger(b.minReplicas) || b.minReplicas < 0) throw invalidArgument(`${field}.minReplicas must be an integer >= 0, got ${b.minReplicas}`);
  if (!Number.isSafeInteger(b.maxReplicas) || b.maxReplicas < Math.max(1, b.minReplicas)) {
    throw invalidArgument(`${field}.maxReplicas must be an integer >= max(1, minReplicas), got ${b.maxReplicas}`);
  }
  return b;
}

/** User options → the compiled config, with defaults; throws invalid_argument naming the bad field. */
export function compilePlannerConfig(o: PlannerOptions): PlannerConfig {
  if (o.mode !== 'load' && o.mode !== 'sla') throw invalidArgument(`mode must be 'load' or 'sla'`);
  const base = { ...DEFAULT_POOL_BOUNDS, ...o.defaultBounds };
  const bounds = {} as Record<Pool, PoolBounds>;
  for (const pool of POOLS) bounds[pool] = checkBounds({ ...base, ...o.bounds?.[pool] }, `bounds.${pool}`);
  const sla = { ...DEFAULT_SLA_TARGETS, ...o.sla };
  for (const k of ['ttftMs', 'itlMs'] as const) {
    if (!Number.isFinite(sla[k]) || sla[k] <= 0) throw invalidArgument(`sla.${k} must be a finite number > 0, got ${sla[k]}`);
  }
  if (!Number.isFinite(sla.percentile) || sla.percentile <= 0 || sla.percentile > 100) throw invalidArgument(`sla.percentile must be in (0, 100], got ${sla.percentile}`);
  const minCorrection = o.minCorrection ?? DEFAULT_MIN_CORRECTION;
  const maxCorrection = o.maxCorrection ?? DEFAULT_MAX_CORRECTION;
  if (!Number.isFinite(minCorrection) || minCorrection <= 0 || minCorrection > 1) throw invalidArgument(`minCorrection must be in (0, 1], got ${minCorrection}`);
  if (!Number.isFinite(maxCorrection) || maxCorrection < 1) throw invalidArgument(`maxCorrection must be a finite number >= 1, got ${maxCorrection}`);
  const slaMaxStep = o.slaMaxStep ?? Infinity;
  if (slaMaxStep !== Infinity && (!Number.isSafeInteger(slaMaxStep) || slaMaxStep < 1)) throw invalidArgument(`slaMaxStep must be an integer >= 1, got ${slaMaxStep}`);
  if (o.mode === 'sla' && o.profile === undefined) throw invalidArgument('profile is required in sla mode');
  return {
    mode: o.mode,
    bounds,
    loadRules: compileLoadRules(o.loadRules),
    profile: o.profile,
    sla,
    predictor: checkPredictorConfig(o.predictor ?? DEFAULT_PREDICTOR),
    minCorrection,
    maxCorrection,
    slaMaxStep,
  };
}

/** Shortest interval the request rate is computed over, seconds. */
export const MIN_INTERVAL_SEC = 1;

/** The series SLA mode forecasts. */
export const FORECAST_SERIES = ['requests', 'islMean', 'oslMean', 'islAtPercentile', 'oslAtPercentile'] as const;
export type ForecastSeries = (typeof FORECAST_SERIES)[number];

/** What one decision hands the next. Plain data (JSON-able), so a restarted planner can resume it. */
export interface PlannerState {
  /** Decisions taken so far (the index of the next one). */
  readonly interval: number;
  /** Interval index of each pool's last scale-up. */
  readonly lastScaleUp: Partial<Record<Pool, number>>;
  readonly predictors: Partial<Record<ForecastSeries, PredictorState>>;
  /** Each pool's waiting requests per worker at the last interval that measured it (the queue trend). */
  readonly lastQueuePerWorker?: Partial<Record<Pool, number>>;
}

export const INITIAL_PLANNER_STATE: PlannerState = { interval: 0, lastScaleUp: {}, predictors: {} };

export interface PlannerResult {
  readonly decisions: readonly Decision[];
  readonly nextState: PlannerState;
  /** SLA mode: the forecast the sizing used. */
  readonly predicted?: PredictedDemand;
}

function scaleDownHeld(state: PlannerState, pool: Pool, config: PlannerConfig): boolean {
  if (pool === 'prefill') return false;
  const last = state.lastScaleUp[pool];
  return last !== undefined && state.interval - last <= config.loadRules.decodeScaleDownCooldownIntervals;
}

/** Feed this interval's figures to the predictors and forecast the next interval. */
function forecast(state: PlannerState, obs: Observations, config: PlannerConfig): { demand: PredictedDemand; predictors: PlannerState['predictors'] } {
  const r = obs.requests;
  const p = config.sla.percentile;
  const requests = Number.isFinite(r.requests) && r.requests > 0 ? r.requests : 0;
  // No request in the interval: lengths have no value (not zero); the predictors keep their last.
  const observed: Record<ForecastSeries, number | undefined> = {
    requests,
    islMean: requests > 0 ? distributionMean(r.isl) : undefined,
    oslMean: requests > 0 ? distributionMean(r.osl) : undefined,
    islAtPercentile: requests > 0 ? distributionQuantile(r.isl, p) : undefined,
    oslAtPercentile: requests > 0 ? distributionQuantile(r.osl, p) : undefined,
  };
  const predictors: Partial<Record<ForecastSeries, PredictorState>> = {};
  const next = {} as Record<ForecastSeries, number>;
  for (const s of FORECAST_SERIES) {
    const predictor = createPredictor(config.predictor, state.predictors[s]);
    const x = observed[s];
    if (x !== undefined) predictor.observe(x);
    next[s] = predictor.predict(1);
    predictors[s] = predictor.snapshot();
  }
  // A planner interval is seconds long; anything under 1 s (or not a number) counts as 1 s.
  const interval = Number.isFinite(obs.intervalSec) && obs.intervalSec > MIN_INTERVAL_SEC ? obs.intervalSec : MIN_INTERVAL_SEC;
  return {
    demand: {
      requestRate: next.requests / interval,
      islMean: next.islMean,
      oslMean: next.oslMean,
      // A tail so heavy that the mean exceeds the percentile: size for the mean, the larger.
      islAtPercentile: Math.max(next.islAtPercentile, next.islMean),
      oslAtPercentile: Math.max(next.oslAtPercentile, next.oslMean),
    },
    predictors,
  };
}

function corrections(obs: Observations, profile: Profile, config: PlannerConfig): { prefill: number; decode: number } {
  const r = obs.requests;
  const p = config.sla.percentile;
  const isl = distributionQuantile(r.isl, p);
  const osl = distributionQuantile(r.osl, p);
  const expectedTtft = profile.prefill !== undefined && isl !== undefined ? prefillTtftMs(profile.prefill, isl) : undefined;
  const decodePool = obs.pools.decode ?? obs.pools.aggregated;
  const usage = decodePool === undefined ? undefined : summarisePoolLoad(decodePool.load).kvUsage;
  const expectedItl =
    profile.decode !== undefined && isl !== undefined && usage !== undefined ? decodeItlMs(profile.decode, usage, isl + (osl ?? 0) / 2) : undefined;
  return {
    prefill: correctionFactor(distributionQuantile(r.ttftMs, p), expectedTtft, config.minCorrection, config.maxCorrection),
    decode: correctionFactor(distributionQuantile(r.itlMs, p), expectedItl, config.minCorrection, config.maxCorrection),
  };
}

/**
 * Traffic whose lengths the routers never reported (no ISL or OSL figures so far) cannot be sized
 * from a profile: sizing it as zero-length requests would scale a busy pool down. The load rules
 * decide instead until lengths arrive.
 */
function lengthsKnown(pool: Pool, d: PredictedDemand): boolean {
  if (d.requestRate === 0) return true;
  if (pool !== 'decode' && d.islMean === 0) return false;
  if (pool !== 'prefill' && d.oslMean === 0) return false;
  return true;
}

/**
 * One decision over every pool `obs` mentions (in `POOLS` order). `state` is the previous call's
 * `nextState` (or `INITIAL_PLANNER_STATE`); `config` comes from `compilePlannerConfig`.
 */
export function decide(state: PlannerState, obs: Observations, config: PlannerConfig): PlannerResult {
  const decisions: Decision[] = [];
  let predicted: PredictedDemand | undefined;
  let predictors = state.predictors;
  let corr: { prefill: number; decode: number } | undefined;
  if (config.mode === 'sla' && config.profile !== undefined) {
    const f = forecast(state, obs, config);
    predicted = f.demand;
    predictors = f.predictors;
    corr = corrections(obs, config.profile, config);
  }
  const held = Number.isFinite(obs.requests.heldRequests) && obs.requests.heldRequests! > 0 ? obs.requests.heldRequests! : 0;
  const lastScaleUp = { ...state.lastScaleUp };
  const lastQueuePerWorker: Partial<Record<Pool, number>> = {};
  for (const pool of POOLS) {
    const p = obs.pools[pool];
    if (p === undefined) continue;
    const queueNow = summarisePoolLoad(p.load).queuePerWorker;
    if (queueNow !== undefined) lastQueuePerWorker[pool] = queueNow;
    const previousQueuePerWorker = state.lastQueuePerWorker?.[pool];
    const ctx = {
      rules: config.loadRules,
      bounds: config.bounds[pool],
      scaleDownHeld: scaleDownHeld(state, pool, config),
      ...(previousQueuePerWorker === undefined ? {} : { previousQueuePerWorker }),
    };
    let decision: Decision | undefined;
    const sizing =
      predicted !== undefined && corr !== undefined && config.profile !== undefined && lengthsKnown(pool, predicted)
        ? sizePool(pool, config.profile, predicted, config.sla, corr)
        : undefined;
    if (sizing !== undefined) {
      const from = Number.isSafeInteger(p.replicas) && p.replicas >= 0 ? p.replicas : 0;
      const demandWithoutWorker = from === 0 && held > 0 && sizing.replicas === 0;
      decision = constrain({
        pool,
        from,
        proposed: demandWithoutWorker ? 1 : sizing.replicas,
        reason: demandWithoutWorker ? 'demand_without_worker' : sizing.replicas === 0 ? 'no_traffic' : 'sla_sizing',
        inputs: { ...sizing.inputs, replicas: from, heldRequests: held },
        bounds: ctx.bounds,
        maxStep: config.slaMaxStep,
        scaleDownHeld: ctx.scaleDownHeld,
      });
    } else {
      decision = decideLoadPool(pool, obs, ctx);
    }
    if (decision === undefined) continue;
    if (decision.direction === 'up') lastScaleUp[pool] = state.interval;
    decisions.push(decision);
  }
  return { decisions, nextState: { interval: state.interval + 1, lastScaleUp, predictors, lastQueuePerWorker }, ...(predicted === undefined ? {} : { predicted }) };
}
