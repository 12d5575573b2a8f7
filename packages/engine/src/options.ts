/**
 * Engine options: the user-facing type with documented defaults, and the one function that
 * fills the defaults in and validates them (`compileEngineOptions`). Everything downstream
 * reads only the compiled form.
 */
import { invalidArgument, silentLogger, type Logger } from '@switchyard/common';
import { DEFAULT_GENERATION_CONFIG_MODE, DEFAULT_KV_TRANSFER_GBPS, DEFAULT_KV_TRANSFER_TTL_MS, parseGenerationConfigMode, type GenerationConfigMode } from '@switchyard/llm';
import { DEFAULT_MIN_COMPUTE_CAPABILITY } from '@switchyard/model-config';
import type { Backend } from './backend.js';
import { MemoryGpuProbe } from './gpu/memory-gpu-probe.js';
import type { GpuProbe } from './gpu/gpu-probe.js';
import { DEFAULT_LOAD_LIMITS, type LoadLimits } from './load-limits.js';
import { compileBackendConfig, type BackendCommandLine, type BackendSettings } from './backend-config.js';
import type { ModelLoadStep } from './model/model-loader.js';

export type ControlMode = 'none' | 'explicit' | 'poll';

/** Triton reports its own version here; clients only check `name == "triton"`. */
export const DEFAULT_SERVER_NAME = 'triton';
export const DEFAULT_SERVER_VERSION = '2.73.0';
export const DEFAULT_POLL_INTERVAL_SECS = 15;
/** tritonserver's `--model-load-thread-count` default. */
export const DEFAULT_MODEL_LOAD_THREAD_COUNT = 4;
/** LLM engines: KV transfer lease TTL (30 000 ms) and the mocker's simulated bandwidth (25 Gbit/s). */
export { DEFAULT_KV_TRANSFER_GBPS, DEFAULT_KV_TRANSFER_TTL_MS };

/** The extensions Triton advertises at HEAD (`GET /v2`). */
export const DEFAULT_EXTENSIONS: readonly string[] = [
  'classification',
  'sequence',
  'model_repository',
  'model_repository(unload_dependents)',
  'schedule_policy',
  'model_configuration',
  'system_shared_memory',
  'cuda_shared_memory',
  'binary_tensor_data',
  'parameters',
  'statistics',
  'trace',
  'logging',
];

export interface EngineOptions {
  /** Model repository roots (at least one). Model names must be unique across them. */
  modelRepositories: string[];
  /**
   * How models get loaded. `none` (default): everything at start-up, load/unload APIs refused.
   * `explicit`: only `startupModels` at start-up, then the load/unload APIs. `poll`: everything
   * at start-up, then a rescan every `pollIntervalSecs`.
   */
  controlMode?: ControlMode;
  /** Explicit mode only: models to load at start-up; `['*']` loads all (and must stand alone). */
  startupModels?: string[];
  /**
   * false (default): config.pbtxt is optional and missing fields are completed from the model
   * file (Triton's auto-complete). true: config.pbtxt is required and used as written.
   */
  strictModelConfig?: boolean;
  /** Poll mode: seconds between repository scans (default 15). */
  pollIntervalSecs?: number;
  /** Reported by server metadata (default "triton"). */
  serverName?: string;
  /** Reported by server metadata (default DEFAULT_SERVER_VERSION). */
  serverVersion?: string;
  /** Reported by server metadata (default DEFAULT_EXTENSIONS). */
  extensions?: string[];
  logger?: Logger;
  /** true (default): server readiness requires every loaded model version to be READY. */
  strictReadiness?: boolean;
  /**
   * Extra backends keyed by backend name (`config.backend`), consulted before the built-in ones.
   * This is how later backends (javascript, mocker, ...) and tests plug in.
   */
  backends?: Record<string, Backend>;
  /**
   * Byte budget of the server-wide response cache (Triton's `--cache-config local,size=N`).
   * 0 (default): no cache, so `response_cache { enable: true }` in a model config has no effect.
   */
  responseCacheByteSize?: number;
  /**
   * Ceilings for what one model load may make the server allocate (instances, sequence slots,
   * warmup and state tensors, threads, LLM settings, the `llm` KV cache). Default
   * `DEFAULT_LOAD_LIMITS`; each given field replaces its default and must be a positive number.
   */
  loadLimits?: Partial<LoadLimits>;
  /**
   * LLM backends (disaggregated prefill/decode): how long a prefill-only request's KV blocks stay
   * pinned under their lease, in ms (default 30 000); a positive integer.
   */
  kvTransferTtlMs?: number;
  /** `mocker` backend: the simulated KV transfer bandwidth in Gbit/s (default 25); a number > 0. */
  kvTransferGbps?: number;
  /**
   * Where the GPUs of this host come from, for placing instance groups (`KIND_GPU`, `KIND_AUTO`,
   * `gpus`). Default: a `MemoryGpuProbe` with no device (a host without GPUs; the worker app passes
   * an `NvidiaSmiProbe`).
   */
  gpus?: GpuProbe;
  /**
   * Told of each step of a model version's load as it starts (`ModelLoadStep`: loading, instances,
   * warmup, then loaded or failed), on the loading path: keep it short and do not throw (a throw is
   * logged and ignored). The worker shows loads still running on a terminal with it. Default none.
   */
  onLoadStep?: (step: ModelLoadStep) => void;
  /**
   * GPUs below this CUDA compute capability are not used (Triton's
   * `--min-supported-compute-capability`, default 6.0); a number >= 0.
   */
  minComputeCapability?: number;
  /**
   * LLM backends: whether generation_config.json's sampling fields are request defaults (`auto`, the
   * default, as vLLM) or not (`vllm`); a model's `generation_config` parameter overrides it. Its end
   * ids apply either way.
   */
  generationConfig?: GenerationConfigMode;
  /**
   * Backend settings from the command line (`--backend-config`): backend name (`''` for all) →
   * setting → value; see backend-config.ts for what each built-in backend reads. Default none.
   */
  backendConfig?: BackendCommandLine;
  /**
   * true: `createEngine` fails ("failed to load all models") when a start-up model does not load, after
   * releasing what did (tritonserver's `--exit-on-error`). false (default): it serves what loaded.
   */
  exitOnError?: boolean;
  /**
   * Most models loading at once, at start-up and in a poll pass (tritonserver's `--model-load-thread-count`;
   * default 4). A slot no model is waiting for may build another instance of a loading ONNX Runtime
   * or embedding model (Triton's parallel instance loading), so builds at once stay within this count too.
   */
  modelLoadThreadCount?: number;
  /**
   * A repository path that is not a folder: `'throw'` (default) fails creation; `'not-live'` gives
   * the engine tritonserver keeps running with `--exit-on-error=false` when it failed to initialize
   * (qa L0_lifecycle test_parse_error_noexit): nothing loaded, not live, not ready, server metadata
   * still answered.
   */
  initFailure?: 'throw' | 'not-live';
  /**
   * tritonserver's `--model-config-name`: read each model's `configs/<name>.pbtxt` when it has one,
   * else its `config.pbtxt`. A plain file name: no path separators, no whitespace, not `.`/`..`.
   */
  modelConfigName?: string;
  /** tritonserver's `--model-load-retry-count`: times a failed version load is tried again (default 0). */
  modelLoadRetryCount?: number;
}

export interface CompiledEngineOptions {
  modelRepositories: readonly string[];
  controlMode: ControlMode;
  /** Explicit mode start-up models; `loadAllAtStartup` replaces the `*` wildcard. */
  startupModels: readonly string[];
  loadAllAtStartup: boolean;
  autoComplete: boolean;
  pollIntervalMs: number;
  serverName: string;
  serverVersion: string;
  extensions: readonly string[];
  logger: Logger;
  strictReadiness: boolean;
  backends: Readonly<Record<string, Backend>>;
  /** 0 = no response cache. */
  responseCacheByteSize: number;
  loadLimits: LoadLimits;
  kvTransferTtlMs: number;
  kvTransferGbps: number;
  gpus: GpuProbe;
  onLoadStep: ((step: ModelLoadStep) => void) | undefined;
  minComputeCapability: number;
  generationConfig: GenerationConfigMode;
  backendSettings: BackendSettings;
  exitOnError: boolean;
  modelLoadThreadCount: number;
  initFailure: 'throw' | 'not-live';
  modelConfigName: string | undefined;
  modelLoadRetryCount: number;
}

/** `modelConfigName` must name a file in the model's `configs/` folder, nothing else. */
export function checkModelConfigName(name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  if (name === '') throw invalidArgument('Error: empty argument for --model-config-name');
  if (/[\s/\\]/.test(name) || name === '.' || name === '..' || name.includes('\0')) {
    throw invalidArgument(`invalid model config name '${name}': a file name in the model's configs/ folder, without spaces or path separators`);
  }
  return name;
}

/** Fill defaults and validate. Throws invalid_argument with Triton's wording where it has one. */
export function compileEngineOptions(options: EngineOptions): CompiledEngineOptions {
  const roots = options.modelRepositories ?? [];
  if (!Array.isArray(roots) || roots.length === 0 || roots.some((r) => typeof r !== 'string' || r === '')) {
    throw invalidArgument('at least one model repository path is required');
  }
  const controlMode = options.controlMode ?? 'none';
  if (!['none', 'explicit', 'poll'].includes(controlMode)) {
    throw invalidArgument(`invalid model control mode '${String(controlMode)}', expected none, explicit or poll`);
  }
  const startup = [...new Set(options.startupModels ?? [])];
  const wildcard = startup.includes('*');
  if (wildcard && startup.length > 1 && controlMode === 'explicit') {
    throw invalidArgument("Wildcard model name '*' must be the ONLY startup model if specified at all.");
  }
  const pollSecs = options.pollIntervalSecs ?? DEFAULT_POLL_INTERVAL_SECS;
  if (!Number.isFinite(pollSecs) || pollSecs <= 0) {
    throw invalidArgument(`invalid poll interval ${String(pollSecs)}, expected a positive number of seconds`);
  }
  const logger = options.logger ?? silentLogger;
  const cacheBytes = options.responseCacheByteSize ?? 0;
  if (!Number.isSafeInteger(cacheBytes) || cacheBytes < 0) {
    throw invalidArgument(`invalid response cache size ${String(cacheBytes)}, expected a non-negative number of bytes`);
  }
  const limits: Record<string, number> = { ...DEFAULT_LOAD_LIMITS };
  for (const [key, value] of Object.entries(options.loadLimits ?? {})) {
    if (!(key in DEFAULT_LOAD_LIMITS)) throw invalidArgument(`unknown load limit '${key}'`);
    if (typeof value !== 'number' || !(value > 0)) throw invalidArgument(`invalid load limit ${key} ${String(value)}, expected a positive number`);
    limits[key] = value;
  }
  const loadLimits = limits as unknown as LoadLimits;
  const ttlMs = options.kvTransferTtlMs ?? DEFAULT_KV_TRANSFER_TTL_MS;
  if (typeof ttlMs !== 'number' || !Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
    throw invalidArgument(`invalid KV transfer TTL ${String(ttlMs)}, expected a positive integer number of ms`);
  }
  const gbps = options.kvTransferGbps ?? DEFAULT_KV_TRANSFER_GBPS;
  if (typeof gbps !== 'number' || !Number.isFinite(gbps) || gbps <= 0) {
    throw invalidArgument(`invalid KV transfer bandwidth ${String(gbps)}, expected a number of Gbit/s > 0`);
  }
  const minCc = options.minComputeCapability ?? DEFAULT_MIN_COMPUTE_CAPABILITY;
  if (typeof minCc !== 'number' || !Number.isFinite(minCc) || minCc < 0) {
    throw invalidArgument(`invalid minimum compute capability ${String(minCc)}, expected a number >= 0`);
  }
  const generationConfig = parseGenerationConfigMode(options.generationConfig ?? DEFAULT_GENERATION_CONFIG_MODE, 'the generation config mode');
  const loadThreads = options.modelLoadThreadCount ?? DEFAULT_MODEL_LOAD_THREAD_COUNT;
  if (!Number.isSafeInteger(loadThreads) || loadThreads < 1) {
    throw invalidArgument(`invalid model load thread count ${String(loadThreads)}, expected a positive integer`);
  }
  const loadRetries = options.modelLoadRetryCount ?? 0;
  if (!Number.isSafeInteger(loadRetries) || loadRetries < 0) {
    throw invalidArgument(`invalid model load retry count ${String(loadRetries)}, expected a non-negative integer`);
  }
  if (startup.length > 0 && controlMode !== 'explicit') {
    logger.warn({ startupModels: startup }, 'startup models are only used in explicit model control mode; ignoring them');
  }
  return {
    modelRepositories: [...roots],
    controlMode,
    startupModels: controlMode === 'explicit' && !wildcard ? startup : [],
    loadAllAtStartup: controlMode === 'explicit' && wildcard,
    autoComplete: !(options.strictModelConfig ?? false),
    pollIntervalMs: Math.round(pollSecs * 1000),
    serverName: options.serverName ?? DEFAULT_SERVER_NAME,
    serverVersion: options.serverVersion ?? DEFAULT_SERVER_VERSION,
    extensions: [...(options.extensions ?? DEFAULT_EXTENSIONS)],
    logger,
    strictReadiness: options.strictReadiness ?? true,
    backends: { ...(options.backends ?? {}) },
    responseCacheByteSize: cacheBytes,
    loadLimits,
    kvTransferTtlMs: ttlMs,
    kvTransferGbps: gbps,
    gpus: options.gpus ?? new MemoryGpuProbe(),
    onLoadStep: options.onLoadStep,
    minComputeCapability: minCc,
    generationConfig,
    backendSettings: compileBackendConfig(options.backendConfig),
    exitOnError: options.exitOnError ?? false,
    modelLoadThreadCount: loadThreads,
    initFailure: options.initFailure ?? 'throw',
    modelConfigName: checkModelConfigName(options.modelConfigName),
    modelLoadRetryCount: loadRetries,
  };
}
