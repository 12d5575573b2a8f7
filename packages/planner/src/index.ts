// @switchyard/planner: the planner's pure decision core. No IO: the planner app reads the event
// plane, calls `decide` each interval and acts through a connector.
export type { ConstrainInput, Direction, Decision, DecisionReason, PoolBounds } from './decision.js';
export { constrain } from './decision.js';
export type { Distribution, ForwardPassSample, LoadSample, Observations, Pool, PoolLoadSummary, PoolObservation, RequestFigures } from './observations.js';
export { POOLS, distributionCount, distributionMean, distributionQuantile, summarisePoolLoad } from './observations.js';
export type { Predictor, PredictorConfig, PredictorState } from './predictors.js';
export { DEFAULT_HOLT_ALPHA, DEFAULT_HOLT_BETA, DEFAULT_MOVING_AVERAGE_WINDOW, MAX_MOVING_AVERAGE_WINDOW, checkPredictorConfig, createPredictor } from './predictors.js';
export type { LoadRuleContext, LoadRulesConfig } from './load-rules.js';
export { DEFAULT_LOAD_RULES, compileLoadRules, decideLoadPool } from './load-rules.js';
export type { DecodeProfile, PrefillProfile, Profile } from './profile.js';
export { MAX_PROFILE_POINTS, MAX_PROFILE_VALUE, PROFILE_VERSION, decodeItlMs, interpolate1d, interpolate2d, parseProfile, prefillThroughput, prefillTtftMs } from './profile.js';
export type { Corrections, PredictedDemand, SlaSizing, SlaTargets } from './sla-sizing.js';
export { DECODE_USAGE_SCAN_POINTS, DEFAULT_MAX_CORRECTION, MAX_DEMAND_FIGURE, DEFAULT_MIN_CORRECTION, DEFAULT_SLA_TARGETS, correctionFactor, sizePool } from './sla-sizing.js';
export type { ForecastSeries, PlannerConfig, PlannerMode, PlannerOptions, PlannerResult, PlannerState } from './planner-core.js';
export { DEFAULT_POOL_BOUNDS, DEFAULT_PREDICTOR, FORECAST_SERIES, INITIAL_PLANNER_STATE, MIN_INTERVAL_SEC, compilePlannerConfig, decide } from './planner-core.js';
export type { Connector, ObservationSource } from './connector.js';
export { MemoryConnector } from './connector.js';
export type { IntervalFigures } from './memory-observation-source.js';
export { MAX_QUEUED_INTERVALS, MemoryObservationSource } from './memory-observation-source.js';
export type { DecodePoint, ProfilerProbe, SweepMeasurements, SweepOptions, SweepPlan, WorkerLimits } from './profiler.js';
export { DEFAULT_SWEEP, KV_HEADROOM, MAX_CONCURRENCY, MAX_DECODE_OSL, MAX_REPEATS, MAX_SWEEP_POINTS, assembleProfile, planSweep, profileWorker, runSweep } from './profiler.js';
