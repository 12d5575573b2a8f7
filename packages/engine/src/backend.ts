/**
 * The Backend role: turns a model folder + configuration into executable instances.
 *
 * Who calls what, and when:
 * - `gpuSupport` — by the model loader, once per version load on a host with GPUs, before the
 *   instance groups are placed.
 * - `autoCompleteConfig` — by the model loader, once per version load, before the config is
 *   normalised, and only when auto-complete is on. Returns a completed copy; never mutates. What it
 *   built that the load can use (a session read for the model's I/O) it may leave in the context's
 *   `handoff` for `loadModel`.
 * - `loadModel` — by the model loader after the config is final; may check the config against
 *   the model file and throw (the version then becomes UNAVAILABLE with that message).
 * - `BackendModel.createInstance` — by the loader, once per instance of every instance group.
 * - `BackendInstance.execute` — by a scheduler, one call at a time per instance, with one or
 *   more validated requests (the default scheduler sends one; batchers send several) and one
 *   `ResponseSender` per request. A backend answers each request either by returning its
 *   result from `execute` (one response, final: the ONNX Runtime path) or by marking it
 *   `viaSender` in the outcome and sending zero or more responses and then a final flag through its
 *   sender, during or after the execution (decoupled models). The instance is free for the next
 *   execution as soon as `execute` settles, whether or not its requests are complete.
 * - `BackendModel.beginUnload` — by the version's unload (explicit, poll, reload, shutdown),
 *   before its requests drain, so a backend whose executions can hang bounds them.
 * - `release` — by the lifecycle at unload, after every in-flight execute has settled.
 *
 * `resolveBackend` is the one place that picks a backend from `platform` / `backend`.
 */
import { unavailable, type Logger, type SwitchyardError } from '@switchyard/common';
import type { InferTensor, Parameters } from '@switchyard/kserve';
import type { LlmEndpoint } from '@switchyard/llm';
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
  /** This version load's handoff from `autoCompleteConfig` to `loadModel`; absent: keep nothing. */
  handoff?: LoadHandoff;
}

/**
 * What one version load carries from the backend's `autoCompleteConfig` to its `loadModel`:
 * something costly auto-complete built that the load can use as is (the ONNX Runtime backend's
 * session, whose I/O completed the config), under a key naming everything it was built from. The
 * loader makes one per version load and closes it once `loadModel` has returned or thrown (or the
 * load failed before it): whatever was not taken is released then. Taking a value makes its
 * releasing the taker's.
 */
export interface LoadHandoff {
  keep(key: string, value: object, release: () => Promise<void>): void;
  /** The value kept under `key`, now the caller's; undefined when none. */
  take(key: string): object | undefined;
}

export interface InstanceSpec {
  /** `<group name>_<index within group>`, as Triton names instances. */
  name: string;
  /** The group's kind after normalisation: `KIND_CPU`, `KIND_GPU` or `KIND_MODEL`. */
  kind: string;
  /**
   * `KIND_GPU`: the CUDA device ordinal this instance runs on (one of the group's `gpus`, which the
   * loader checked against the host's GPUs). Other kinds: 0, as Triton gives them.
   */
  deviceId: number;
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

/** One response: outputs (the ones the request asked for), or an error for this request alone. */
export type BackendResponse = { outputs: InferTensor[]; parameters?: Parameters } | { error: SwitchyardError };

/** Per-request result of an execution: the request's single, final response. */
export type BackendResult = BackendResponse;

/**
 * Streams the responses of one request (Triton's response factory / Python `response_sender`).
 *
 * Contract: `send` may be called any number of times, from any tick, while the request is
 * open; `send(response, true)` or `send(undefined, true)` closes it and every later call is
 * ignored (returns false). `send(undefined, false)` is a no-op. A cancelled request (client gone)
 * reports `cancelled` true and drops whatever is sent; the backend may stop early. Owned by the
 * engine's job; backends only call it.
 */
export interface ResponseSender {
  /**
   * Deliver one response and/or the final flag. Returns false when the request was already
   * closed. `sentAtNs`: when the model produced it (`process.hrtime.bigint()`, one clock for
   * every thread of the process), for `response_stats`; default now.
   */
  send(response: BackendResponse | undefined, final: boolean, sentAtNs?: bigint): boolean;
  /** The request was cancelled by its client: later responses are discarded. */
  readonly cancelled: boolean;
  /** Called once when the request is cancelled while open (at most one listener). */
  onCancel(listener: () => void): void;
}

export interface ExecutionOutcome {
  /** Aligned with the requests passed to `execute`; holes where `viaSender[i]` is true. */
  results: BackendResult[];
  /**
   * Aligned with the requests: true where the request is (or will be) answered through its
   * sender instead of `results` (decoupled models). Absent: every request has a result.
   */
  viaSender?: readonly boolean[];
  timing: ExecutionTiming;
}

export interface BackendInstance {
  readonly name: string;
  /**
   * How many executions a scheduler may hand this instance before the first ended; the instance
   * runs them one after another, in the order given, and each execution's timing covers its own
   * compute only. Absent: 1 (one execution at a time). The default scheduler uses it to keep an
   * instance fed; batching schedulers hand one batch at a time.
   */
  readonly pipelineDepth?: number;
  /**
   * Run the requests as one execution; `senders[i]` belongs to `requests[i]` (absent for warmup:
   * whatever is sent is discarded). Throwing fails every request of the batch that is still open.
   */
  execute(requests: readonly NormalizedRequest[], senders?: readonly ResponseSender[]): Promise<ExecutionOutcome>;
  release(): Promise<void>;
}

export interface BackendModel {
  createInstance(spec: InstanceSpec): Promise<BackendInstance>;
  /**
   * The loader may create this model's instances side by side (Triton's parallel model instance
   * loading, which its ONNX Runtime backend enables), as many at once as load slots are free
   * (`--model-load-thread-count`); absent: one after another, in order. Either way the instances
   * keep their order, and a failure releases the ones created and reports the first failing
   * instance's error.
   */
  readonly parallelInstanceLoading?: boolean;
  /**
   * LLM backends (`llm`, `mocker`): the version's generation endpoint, which the OpenAI door uses
   * directly (token ids in and out). Absent for every other backend.
   */
  readonly llm?: LlmEndpoint;
  /**
   * This version is being unloaded: in-flight requests are about to drain. A backend whose
   * executions can hang (JavaScript models) bounds how long they may still take. Optional.
   */
  beginUnload?(): void;
  release(): Promise<void>;
}

/** Whether a backend can run instances on this host's GPUs; `reason` says why not and what to install. */
export type GpuSupport = { usable: true } | { usable: false; reason: string };

export interface Backend {
  /** The `backend` name this implementation serves (e.g. `onnxruntime`). */
  readonly name: string;
  /**
   * Called by the loader before it places a version's instance groups, when the host has GPUs. A
   * backend that cannot use them in this process (a missing CUDA provider) answers `usable: false`:
   * the loader then places as on a host without GPUs (`KIND_AUTO` runs on the CPU, `KIND_GPU` is
   * refused with the reason). Absent: usable (the backend gives its models the device, as Triton's
   * Python backend does).
   */
  gpuSupport?(): GpuSupport;
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
    `unable to load model '${config.name}': ${what} (supported backends: ${Object.keys(registry).sort().join(', ')})`,
  );
}
