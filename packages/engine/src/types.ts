/**
 * The engine's public surface: what the front doors (HTTP, gRPC, metrics) and the worker app
 * call. Everything here is transport-neutral. Lookup and validation failures are thrown as
 * `SwitchyardError` with Triton's messages; the front doors render them.
 */
import type { CancelSignal, SwitchyardError } from '@switchyard/common';
import type { DataType, InferRequest, InferResponse, InferTensor } from '@switchyard/kserve';
import type { LlmEndpoint } from '@switchyard/llm';
import type { ModelConfig } from '@switchyard/model-config';

export interface ServerMetadata {
  name: string;
  version: string;
  extensions: string[];
}

export interface TensorMetadata {
  name: string;
  datatype: DataType;
  /** `[-1, ...dims]` when the model batches (max_batch_size > 0), else `dims`. */
  shape: number[];
}

export interface ModelMetadata {
  name: string;
  /** READY versions as strings, or just the requested one. */
  versions: string[];
  /** Config `platform`, or `backend` when platform is empty. */
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

/**
 * Lifecycle of one model version, as Triton reports it.
 * - LOADING: files read, backend instances being created and warmed up; not servable yet.
 * - READY: servable.
 * - UNLOADING: no new requests admitted; in-flight ones finish, then instances are released.
 * - UNAVAILABLE: not servable; `reason` says why (load failure, or "unloaded").
 * - UNKNOWN: reported for models seen on disk but never loaded.
 */
export type ModelState = 'UNKNOWN' | 'READY' | 'UNAVAILABLE' | 'LOADING' | 'UNLOADING';

/** One row of the repository index. A model known on disk but never loaded carries only `name`. */
export interface ModelIndexEntry {
  name: string;
  version?: string;
  state?: ModelState;
  reason?: string;
}

export interface LoadModelOptions {
  /** A ModelConfig in protobuf JSON that replaces config.pbtxt (Triton's load `config` parameter). */
  config?: string;
  /**
   * File overrides keyed by their path inside the model folder, e.g. `1/model.onnx`
   * (the part after `file:` in the load parameter). When present, `config` is required and
   * the model is loaded from these files alone.
   */
  files?: Map<string, Uint8Array>;
}

export interface UnloadModelOptions {
  unloadDependents?: boolean;
}

export interface StatisticDuration {
  count: number;
  ns: number;
}

export interface InferBatchStatistics {
  batch_size: number;
  compute_input: StatisticDuration;
  compute_infer: StatisticDuration;
  compute_output: StatisticDuration;
}

export interface MemoryUsage {
  type: string;
  id: number;
  byte_size: number;
}

/** Triton's statistics extension, field names as on the wire. */
export interface ModelStatistics {
  name: string;
  version: string;
  /** ms since the epoch of the last inference, 0 if none. */
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: {
    success: StatisticDuration;
    fail: StatisticDuration;
    queue: StatisticDuration;
    compute_input: StatisticDuration;
    compute_infer: StatisticDuration;
    compute_output: StatisticDuration;
    cache_hit: StatisticDuration;
    cache_miss: StatisticDuration;
  };
  response_stats: Record<string, unknown>;
  batch_stats: InferBatchStatistics[];
  memory_usage: MemoryUsage[];
}

/** Failure reasons as Triton's `nv_inference_request_failure{reason=...}` labels them. */
export type FailureReason = 'REJECTED' | 'CANCELED' | 'BACKEND' | 'OTHER';

/** What the metrics front door reads at scrape time, per loaded model version. */
export interface ModelMetricsSnapshot {
  statistics: ModelStatistics;
  failures: Record<FailureReason, number>;
  /** Requests queued and not yet executing. */
  pendingRequests: number;
  /** Seconds the last load took. */
  loadDurationSecs: number;
  /**
   * The version answers from the response cache (model config and server both enable it); its
   * `nv_cache_*_per_model` families are shown only then, as in Triton. Absent means false.
   */
  responseCacheEnabled?: boolean;
}

/**
 * Classification labels of a model version: output name → labels by class index, read from
 * each output's `label_filename` at load. Outputs without a label file are absent.
 */
export type OutputLabels = ReadonlyMap<string, readonly string[]>;

/**
 * One result of a submitted request. Non-decoupled models produce exactly one result with
 * `final: true` (a response or an error). Decoupled models produce zero or more responses and
 * then a final result, which may carry no response at all.
 */
export interface InferResult {
  response?: InferResponse;
  error?: SwitchyardError;
  final: boolean;
}

export interface SubmitOptions {
  /** Aborting cancels the request; it then ends with a `cancelled` error. An `AbortSignal` is one. */
  signal?: CancelSignal;
  /** The request was sampled for tracing (the front door's trace manager): the engine reports to it. */
  trace?: InferenceTrace;
}

/** Triton's timestamp activities of one request in the engine, in the order they happen. */
export type TraceActivity = 'REQUEST_START' | 'QUEUE_START' | 'COMPUTE_START' | 'COMPUTE_INPUT_END' | 'COMPUTE_OUTPUT_START' | 'COMPUTE_END' | 'REQUEST_END';
/** Triton's tensor activities: an input as it enters the queue, an output as the backend produced it. */
export type TraceTensorActivity = 'TENSOR_QUEUE_INPUT' | 'TENSOR_BACKEND_OUTPUT';

/**
 * What the engine reports about a traced request (Triton's TRITONSERVER_InferenceTrace). The engine
 * calls `start` once the model version is resolved (a request for an unknown model is never
 * started), then activities with `process.hrtime.bigint()` timestamps (the monotonic clock Triton's
 * steady_clock reads), ending with `REQUEST_END`. Compute activities come only from a backend
 * execution (an ensemble has none of its own; its steps report through `child()` traces). Tensors
 * are handed over only when `wantsTensors`. Implementations must not throw and must bound what
 * they keep; calls arrive on the event loop, in order.
 */
export interface InferenceTrace {
  readonly wantsTensors: boolean;
  start(modelName: string, modelVersion: number, requestId: string): void;
  activity(activity: TraceActivity, ns: bigint): void;
  tensor(activity: TraceTensorActivity, tensor: InferTensor): void;
  /** The trace of a request this one spawns (an ensemble step): reported with this one as its parent. */
  child(): InferenceTrace;
}

export interface InferenceEngine {
  /** The process is up (always true until shutdown completes). */
  isLive(): boolean;
  /** Live, not shutting down, and (strict readiness) every loaded model version READY. */
  isReady(): boolean;
  serverMetadata(): ServerMetadata;

  modelMetadata(name: string, version?: number): ModelMetadata;
  /** Never throws: unknown or unready models are simply not ready. */
  isModelReady(name: string, version?: number): boolean;
  /** The normalised configuration of a READY version (the one a request without version would use). */
  modelConfig(name: string, version?: number): ModelConfig;
  /**
   * Statistics of READY versions: all models, one model, or one version. An unknown model or version
   * throws (rejects) invalid_argument. A Promise where the statistics live elsewhere (a router asks
   * its workers); the front doors await either.
   */
  modelStatistics(name?: string, version?: number): ModelStatistics[] | Promise<ModelStatistics[]>;
  metricsSnapshot(): ModelMetricsSnapshot[];
  /**
   * Labels for the classification extension, of the version that answered (`InferResponse`'s
   * model name and version). Never throws: an unknown or unloaded version has none. Optional
   * so engines without label files (test doubles) need not implement it.
   */
  classificationLabels?(name: string, version: number): OutputLabels;

  /**
   * The generation endpoint of a READY LLM model (`backend: "llm"` or `"mocker"`), for the OpenAI
   * door: the version a request without version would use. undefined when the model is unknown, not
   * ready, or not an LLM. Optional so test doubles without LLMs need not implement it.
   */
  llmEndpoint?(name: string): LlmEndpoint | undefined;
  /** Every READY LLM model's endpoint (latest ready version each), sorted by name. */
  llmEndpoints?(): LlmEndpoint[];
  /**
   * Called by the front doors before their first lookup of a request's model. `undefined` (answered
   * synchronously, so the doors keep their fast paths): nothing to wait for — the model can take the
   * request, or never will (unknown: the lookup that follows answers). A promise: the engine holds
   * the request (a router whose model is scaled to zero); it resolves once the model can take it,
   * or rejects with the request's error (`unavailable` when no worker started in time, `cancelled`
   * when `signal` aborts). Optional: a worker's engine has nothing to wait for.
   */
  waitForModel?(name: string, signal?: CancelSignal): Promise<void> | undefined;

  /**
   * `listener` is called (synchronously, with no arguments) whenever a model version starts serving,
   * is replaced by a reload, or stops serving (enters UNLOADING). The listener re-reads what it needs
   * (`repositoryIndex(true)`, `llmEndpoint`); it must not throw. Returns unsubscribe. Optional so test
   * doubles need not implement it; the cluster worker re-registers model cards through it.
   */
  onModelChange?(listener: () => void): () => void;

  repositoryIndex(readyOnly: boolean): Promise<ModelIndexEntry[]>;
  loadModel(name: string, options?: LoadModelOptions): Promise<void>;
  unloadModel(name: string, options?: UnloadModelOptions): Promise<void>;

  /**
   * Validate and schedule a request. Results arrive through `onResult`, the last one with
   * `final: true`. Validation errors are delivered through `onResult` too, never thrown.
   */
  submit(request: InferRequest, onResult: (result: InferResult) => void, options?: SubmitOptions): void;
  /** `submit` for non-decoupled models: resolves with the single response or rejects with its error. */
  infer(request: InferRequest, options?: SubmitOptions): Promise<InferResponse>;

  /** Stop admitting requests, let in-flight ones finish, unload every model. */
  shutdown(): Promise<void>;
}
