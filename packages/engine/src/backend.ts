/**
 * The Backend role: turns a model folder + configuration into executable instances.
 *
 * Who calls what, and when:
 * - `autoCompleteConfig` — by the model loader, once per version load, before the config is
 *   normalised, and only when auto-complete is on. Returns a completed copy; never mutates.
 * - `loadModel` — by the model loader after the config is final; may check the config against
 *   the model file and throw (the version then becomes UNAVAILABLE with that message).
 * - `BackendModel.createInstance` — by the loader, once per instance of every instance group.
 * - `BackendInstance.execute` — by a scheduler, one call at a time per instance, with one or
 *   more validated requests (the default scheduler sends one; batchers send several).
 * - `release` — by the lifecycle at unload, after every in-flight execute has settled.
 *
 * `resolveBackend` is the one place that picks a backend from `platform` / `backend`.
 */
import { unavailable, type Logger, type SwitchyardError } from '@switchyard/common';
import type { InferTensor } from '@switchyard/kserve';
import type { ModelConfig } from '@switchyard/model-config';
import type { NormalizedRequest } from './request-normalizer.js';

export interface BackendModelContext {
  modelName: string;
  version: number;
  /** The model folder (holds config.pbtxt and the version folders). */
  modelPath: string;
  /** `<modelPath>/<version>`. */
  versionPath: string;
  config: ModelConfig;
  logger: Logger;
}

export interface InstanceSpec {
  /** `<group name>_<index within group>`, as Triton names instances. */
  name: string;
  kind: string;
  /** Index of the instance across all groups of the model. */
  index: number;
}

/** Monotonic timestamps (ns, from `process.hrtime.bigint()`) of one execution. */
export interface ExecutionTiming {
  computeStartNs: bigint;
  computeInputEndNs: bigint;
  computeOutputStartNs: bigint;
  computeEndNs: bigint;
}

/** Per-request result of an execution: the outputs the request asked for, or its own error. */
export type BackendResult = { outputs: InferTensor[] } | { error: SwitchyardError };

export interface ExecutionOutcome {
  /** Aligned with the requests passed to `execute`. */
  results: BackendResult[];
  timing: ExecutionTiming;
}

export interface BackendInstance {
  readonly name: string;
  /** Run the requests as one execution. Throwing fails every request of the batch. */
  execute(requests: readonly NormalizedRequest[]): Promise<ExecutionOutcome>;
  release(): Promise<void>;
}

export interface BackendModel {
  createInstance(spec: InstanceSpec): Promise<BackendInstance>;
  release(): Promise<void>;
}

export interface Backend {
  /** The `backend` name this implementation serves (e.g. `onnxruntime`). */
  readonly name: string;
  autoCompleteConfig?(context: BackendModelContext): Promise<ModelConfig>;
  loadModel(context: BackendModelContext): Promise<BackendModel>;
}

/**
 * Platform → backend names, Triton's pairs. Platforms not listed here resolve through
 * `config.backend` alone.
 */
export const PLATFORM_BACKENDS: Readonly<Record<string, string>> = {
  onnxruntime_onnx: 'onnxruntime',
  tensorrt_plan: 'tensorrt',
  pytorch_libtorch: 'pytorch',
  torch_aoti: 'pytorch',
  tensorflow_savedmodel: 'tensorflow',
  tensorflow_graphdef: 'tensorflow',
};

/** The backend name a config asks for: `backend`, else the one its `platform` implies. */
export function backendNameOf(config: Pick<ModelConfig, 'backend' | 'platform'>): string {
  if (config.backend !== '') return config.backend;
  return PLATFORM_BACKENDS[config.platform] ?? config.platform;
}

/**
 * Pick the backend for a config from `registry` (extra backends first, then built-ins).
 * Unknown or unsupported backends throw unavailable with a reason naming what this worker runs.
 */
export function resolveBackend(config: ModelConfig, registry: Readonly<Record<string, Backend>>): Backend {
  const name = backendNameOf(config);
  const backend = registry[name];
  if (backend !== undefined) return backend;
  const what = name === '' ? 'no backend or platform is specified' : `backend '${name}' is not supported by this server`;
  throw unavailable(
    `unable to load model '${config.name}': ${what} (this worker runs the onnxruntime backend on CPU; supported: ${Object.keys(registry).sort().join(', ')})`,
  );
}
