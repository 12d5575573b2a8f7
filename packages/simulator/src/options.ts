/**
 * The simulator's options: user type with documented defaults → `compileSimulationOptions`, the one
 * place they are validated (invalid_argument naming the field).
 */
import { invalidArgument } from '@switchyard/common';
import { DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS, polynomialTimingModel, type TimingModel } from '@switchyard/llm';
import { compilePlannerConfig, DEFAULT_SLA_TARGETS, type PlannerConfig, type PlannerOptions } from '@switchyard/planner';

/** One simulated worker: the mocker engine's settings (the worker's `mocker` backend's names). */
export interface MockerConfig {
  /** KV blocks of the engine (`num_gpu_blocks`). */
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  /** Longest prompt + output a worker admits; longer requests are refused (counted, not served). */
  readonly maxModelLen: number;
  /** Simulated time is divided by this (a faster or slower GPU than the timing model's). */
  readonly speedupRatio: number;
  readonly timingModel: TimingModel;
  readonly vocabSize: number;
}

/** The worker app's mocker defaults (block size 64, 16 384 blocks) and the scheduler's. */
export const DEFAULT_MOCKER: MockerConfig = {
  numBlocks: 16384,
  blockSize: 64,
  maxNumSeqs: DEFAULT_MAX_NUM_SEQS,
  maxNumBatchedTokens: DEFAULT_MAX_NUM_BATCHED_TOKENS,
  maxModelLen: 32768,
  speedupRatio: 1,
  timingModel: polynomialTimingModel,
  vocabSize: 32000,
};

/** The router's modes, as `switchyard router --router-mode` names them. */
export type SimRouterMode = 'kv' | 'least-loaded' | 'round-robin' | 'random';

export interface SimulationOptions {
  readonly mocker?: Partial<MockerConfig>;
  /** Tokens per trace hash id (Mooncake: 512). Default: the mocker's block size. */
  readonly traceBlockSize?: number;
  /** Seeds the router's draws and the engines' tokens. Default 0. */
  readonly seed?: number;
  readonly router?: { readonly mode?: SimRouterMode; readonly overlapWeight?: number; readonly temperature?: number };
  /** Absent: static provisioning (`initialReplicas` for the whole run). */
  readonly planner?: PlannerOptions;
  /** Seconds between planner decisions. Default 60. */
  readonly adjustmentIntervalSec?: number;
  /** Replicas serving at t = 0. Default 1. */
  readonly initialReplicas?: number;
  /** A replica the planner adds serves this long after the decision. Default 30 s. */
  readonly startupDelaySec?: number;
  /** How often workers report load (the worker's `loadIntervalMs`). Default 1 s. */
  readonly loadSampleSec?: number;
  /** The objectives results are measured against. Default: the planner's (or Dynamo's: 500 / 50 ms). */
  readonly slo?: { readonly ttftMs?: number; readonly itlMs?: number };
  /** A request that finds no serving replica waits this long for one, then fails. Default 60 s. */
  readonly queueTimeoutSec?: number;
  /** Width of the timeline's points (the plot). Default: the adjustment interval. */
  readonly timelineSec?: number;
}

export interface CompiledSimulation {
  readonly mocker: MockerConfig;
  readonly traceBlockSize: number;
  readonly seed: number;
  readonly router: { readonly mode: SimRouterMode; readonly overlapWeight: number; readonly temperature: number };
  readonly planner: PlannerConfig | undefined;
  readonly adjustmentIntervalMs: number;
  readonly initialReplicas: number;
  readonly startupDelayMs: number;
  readonly loadSampleMs: number;
  readonly slo: { readonly ttftMs: number; readonly itlMs: number };
  readonly queueTimeoutMs: number;
  readonly timelineMs: number;
}

/** Most load samples per replica in one planner interval. */
export const MAX_SAMPLES_PER_INTERVAL = 10_000;

/** Most replicas a simulation may run at once (bounds memory and time). */
export const MAX_SIM_REPLICAS = 1024;

export function compileSimulationOptions(o: SimulationOptions): CompiledSimulation {
  const mocker = { ...DEFAULT_MOCKER, ...o.mocker };
  const int = (v: number, name: string, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    if (!Number.isSafeInteger(v) || v < min || v > max) throw invalidArgument(`${name} must be an integer in [${min}, ${max}], got ${v}`);
    return v;
  };
  const num = (v: number, name: string, min: number, max: number, openMin = false): number => {
    if (!Number.isFinite(v) || v < min || (openMin && v === min) || v > max) throw invalidArgument(`${name} must be a number in ${openMin ? '(' : '['}${min}, ${max}], got ${v}`);
    return v;
  };
  int(mocker.numBlocks, 'mocker.numBlocks', 1, 1 << 24);
  int(mocker.blockSize, 'mocker.blockSize', 1, 4096);
  int(mocker.maxNumSeqs, 'mocker.maxNumSeqs', 1, 1 << 16);
  int(mocker.maxNumBatchedTokens, 'mocker.maxNumBatchedTokens', 1, 1 << 24);
  int(mocker.maxModelLen, 'mocker.maxModelLen', 2, mocker.numBlocks * mocker.blockSize);
  num(mocker.speedupRatio, 'mocker.speedupRatio', 0, 1e6, true);
  int(mocker.vocabSize, 'mocker.vocabSize', 1, 1 << 24);
  const planner = o.planner === undefined ? undefined : compilePlannerConfig(o.planner);
  const bounds = planner?.bounds.aggregated;
  const initialReplicas = int(o.initialReplicas ?? Math.max(1, bounds?.minReplicas ?? 1), 'initialReplicas', 0, MAX_SIM_REPLICAS);
  if (bounds !== undefined && bounds.maxReplicas > MAX_SIM_REPLICAS) throw invalidArgument(`planner maxReplicas must be at most ${MAX_SIM_REPLICAS}`);
  if (planner === undefined && initialReplicas === 0) throw invalidArgument('static provisioning needs initialReplicas >= 1');
  const mode = o.router?.mode ?? 'kv';
  if (!['kv', 'least-loaded', 'round-robin', 'random'].includes(mode)) throw invalidArgument(`router.mode must be kv, least-loaded, round-robin or random, got ${mode}`);
  const adjustmentIntervalMs = num(o.adjustmentIntervalSec ?? 60, 'adjustmentIntervalSec', 1, 86400) * 1000;
  const loadSampleMs = num(o.loadSampleSec ?? 1, 'loadSampleSec', 0.01, 3600) * 1000;
  // The planner sees every sample of an interval: bound them.
  if (adjustmentIntervalMs / loadSampleMs > MAX_SAMPLES_PER_INTERVAL) throw invalidArgument(`adjustmentIntervalSec / loadSampleSec must be at most ${MAX_SAMPLES_PER_INTERVAL}`);
  return {
    mocker,
    traceBlockSize: int(o.traceBlockSize ?? mocker.blockSize, 'traceBlockSize', 1, 1 << 20),
    seed: int(o.seed ?? 0, 'seed', 0),
    router: {
      mode,
      overlapWeight: num(o.router?.overlapWeight ?? 1, 'router.overlapWeight', 0, 1e6),
      temperature: num(o.router?.temperature ?? 0, 'router.temperature', 0, 1e6),
    },
    planner,
    adjustmentIntervalMs,
    initialReplicas,
    startupDelayMs: num(o.startupDelaySec ?? 30, 'startupDelaySec', 0, 86400) * 1000,
    loadSampleMs,
    slo: {
      ttftMs: num(o.slo?.ttftMs ?? planner?.sla.ttftMs ?? DEFAULT_SLA_TARGETS.ttftMs, 'slo.ttftMs', 0, 1e9, true),
      itlMs: num(o.slo?.itlMs ?? planner?.sla.itlMs ?? DEFAULT_SLA_TARGETS.itlMs, 'slo.itlMs', 0, 1e9, true),
    },
    queueTimeoutMs: num(o.queueTimeoutSec ?? 60, 'queueTimeoutSec', 0, 86400) * 1000,
    timelineMs: num(o.timelineSec ?? adjustmentIntervalMs / 1000, 'timelineSec', 1, 86400) * 1000,
  };
}
