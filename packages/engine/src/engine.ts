/**
 * The engine: the `InferenceEngine` the front doors call. It wires the lifecycle (what is
 * loaded), request normalisation and the per-version schedulers, and answers metadata,
 * readiness and statistics queries. Transport-neutral; every failure is a SwitchyardError.
 */
import { stat } from 'node:fs/promises';
import { cancelled, internal, invalidArgument, toSwitchyardError, unavailable } from '@switchyard/common';
import type { InferRequest, InferResponse } from '@switchyard/kserve';
import type { LlmEndpoint } from '@switchyard/llm';
import { configDataTypeToWire, type ModelConfig } from '@switchyard/model-config';
import { composingReady } from './ensemble/ensemble-plan.js';
import { EnsembleStepStats, type StepComputeTimes } from './ensemble/ensemble-step-stats.js';
import { InferenceJob } from './inference-job.js';
import { inferViaSubmit } from './infer-via-submit.js';
import { JavaScriptBackend } from './javascript/javascript-backend.js';
import { LlmBackend } from './llm/llm-backend.js';
import { EmbeddingBackend } from './embedding/embedding-backend.js';
import { NO_LABELS } from './labels.js';
import { reshapeResult } from './output-reshape.js';
import type { LoadedVersion } from './model/loaded-version.js';
import { ModelLifecycle } from './model/model-lifecycle.js';
import { OnnxRuntimeBackend } from './onnxruntime/onnxruntime-backend.js';
import { compileEngineOptions, type CompiledEngineOptions, type EngineOptions } from './options.js';
import { normalizeRequest, requestPrefix, type NormalizedRequest } from './request-normalizer.js';
import { ResponseCache } from './response-cache.js';
import type {
  InferResult,
  InferenceEngine,
  LoadModelOptions,
  ModelIndexEntry,
  ModelMetadata,
  ModelMetricsSnapshot,
  ModelStatistics,
  OutputLabels,
  ServerMetadata,
  SubmitOptions,
  TensorMetadata,
  UnloadModelOptions,
} from './types.js';

const now = (): bigint => process.hrtime.bigint();

const CONTROL_DISABLED = 'explicit model load / unload is not allowed if polling is enabled';

function tensorMetadata(config: ModelConfig, io: ModelConfig['input'] | ModelConfig['output']): TensorMetadata[] {
  return io.map((t) => ({
    name: t.name,
    datatype: configDataTypeToWire(t.data_type),
    shape: config.max_batch_size > 0 ? [-1, ...t.dims] : [...t.dims],
  }));
}

export class Engine implements InferenceEngine {
  private live = true;
  /** Why the engine failed to initialize (`initFailure: 'not-live'`): it loads nothing and is never live. */
  private initError: string | undefined;
  private stopping = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  /** The server-wide response cache; undefined when its size is 0. */
  private readonly cache: ResponseCache | undefined;

  private constructor(
    private readonly options: CompiledEngineOptions,
    private readonly lifecycle: ModelLifecycle,
  ) {
    const capacityBytes = options.responseCacheByteSize;
    this.cache = capacityBytes > 0 ? new ResponseCache({ capacityBytes, logger: options.logger }) : undefined;
  }

  /** Compile options, check the repositories, load the start-up models, start polling. */
  static async create(userOptions: EngineOptions): Promise<Engine> {
    const options = compileEngineOptions(userOptions);
    // BLS calls of JavaScript models come back into this engine (assigned below, before any load).
    let self: Engine | undefined;
    const javascript = new JavaScriptBackend({ bls: () => self });
    const llmSettings = { ttlMs: options.kvTransferTtlMs, gbps: options.kvTransferGbps, generationConfig: options.generationConfig };
    const settings = options.backendSettings;
    for (const { backend, setting, why } of settings.ignored) {
      options.logger.warn({ backend: backend === '' ? undefined : backend, setting }, `backend setting '${setting}' has no effect: ${why}`);
    }
    if (settings.otherBackends.length > 0) {
      options.logger.warn({ backends: settings.otherBackends }, 'backend settings for backends this server does not have: no effect');
    }
    const builtins = {
      onnxruntime: new OnnxRuntimeBackend({ settings: settings.onnxruntime }),
      javascript,
      llm: new LlmBackend('llm', options.loadLimits, llmSettings, settings.llm),
      mocker: new LlmBackend('mocker', options.loadLimits, llmSettings, settings.mocker),
      embedding: new EmbeddingBackend(),
    };
    const withBuiltins = { ...options, backends: { ...builtins, ...options.backends } };
    let initError: string | undefined;
    for (const root of withBuiltins.modelRepositories) {
      const info = await stat(root).catch(() => undefined);
      if (info?.isDirectory()) continue;
      const message = `repository path is not a valid directory: '${root}'`;
      if (options.initFailure === 'throw') throw invalidArgument(message);
      initError ??= message;
    }
    // Ensemble steps come back into this engine too.
    const submitStep = (...args: Parameters<Engine['submit']>): void => (self as Engine).submit(...args);
    const engine = new Engine(withBuiltins, new ModelLifecycle(withBuiltins, submitStep));
    self = engine;
    if (initError !== undefined) {
      // tritonserver --exit-on-error=false: up, failed to initialize, answering health and metadata
      engine.initError = initError;
      engine.live = false;
      options.logger.error({ err: initError }, 'failed to initialize: serving health and metadata only (not live, not ready)');
      return engine;
    }
    await engine.start();
    if (options.exitOnError && !engine.lifecycle.allLoaded()) {
      // tritonserver's --exit-on-error: the reasons were logged model by model as they failed
      await engine.shutdown();
      throw internal('failed to load all models');
    }
    return engine;
  }

  private async start(): Promise<void> {
    const { controlMode, loadAllAtStartup, startupModels, logger } = this.options;
    if (controlMode !== 'explicit' || loadAllAtStartup) await this.lifecycle.loadAll();
    else await Promise.all(startupModels.map((name) => this.lifecycle.loadQuietly(name)));
    if (controlMode === 'poll') {
      this.pollTimer = setInterval(() => {
        if (this.polling !== undefined || this.stopping) return;
        this.polling = this.lifecycle
          .poll()
          .catch((e: unknown) => logger.error({ err: e }, 'repository poll failed'))
          .finally(() => {
            this.polling = undefined;
          });
      }, this.options.pollIntervalMs);
      this.pollTimer.unref();
    }
    logger.info({ controlMode, ready: this.lifecycle.readyModelNames() }, 'engine started');
  }

  isLive(): boolean {
    return this.live;
  }

  isReady(): boolean {
    if (!this.live || this.stopping) return false;
    return !this.options.strictReadiness || this.lifecycle.allVersionsReady();
  }

  serverMetadata(): ServerMetadata {
    return { name: this.options.serverName, version: this.options.serverVersion, extensions: [...this.options.extensions] };
  }

  modelMetadata(name: string, version?: number): ModelMetadata {
    const loaded = this.lifecycle.resolve(name, version);
    const config = loaded.config;
    const versions = version !== undefined ? [String(version)] : this.lifecycle.readyVersions(name).map((v) => String(v.version));
    return {
      name,
      versions,
      platform: config.platform !== '' ? config.platform : config.backend,
      inputs: tensorMetadata(config, config.input),
      outputs: tensorMetadata(config, config.output),
    };
  }

  /** An ensemble is ready only while every composing model it calls is. */
  isModelReady(name: string, version?: number): boolean {
    const found = this.lifecycle.tryResolve(name, version);
    return !(found instanceof Error) && composingReady(found.config, (n, v) => this.isModelReady(n, v));
  }

  /** The normalised config of the resolved version. Shared, treat as read-only. */
  modelConfig(name: string, version?: number): ModelConfig {
    return this.lifecycle.resolve(name, version).config;
  }

  modelStatistics(name?: string, version?: number): ModelStatistics[] {
    if (name === undefined || name === '') {
      return this.lifecycle.readyModelNames().flatMap((n) => this.lifecycle.readyVersions(n).map((v) => v.stats.snapshot()));
    }
    const ready = this.lifecycle.readyVersions(name);
    if (ready.length === 0) throw invalidArgument(`requested model '${name}' is not available`);
    if (version === undefined) return ready.map((v) => v.stats.snapshot());
    const match = ready.find((v) => v.version === version);
    if (match === undefined) throw invalidArgument(`requested model version is not available for model '${name}'`);
    return [match.stats.snapshot()];
  }

  metricsSnapshot(): ModelMetricsSnapshot[] {
    return this.lifecycle.readyModelNames().flatMap((n) =>
      this.lifecycle.readyVersions(n).map((v) => ({
        statistics: v.stats.snapshot(),
        failures: v.stats.failureCounts(),
        pendingRequests: v.pendingCount(),
        loadDurationSecs: v.loadDurationSecs,
        responseCacheEnabled: this.cache?.enabledFor(v) ?? false,
      })),
    );
  }

  classificationLabels(name: string, version: number): OutputLabels {
    const loaded = this.lifecycle.tryResolve(name, version);
    return loaded instanceof Error ? NO_LABELS : loaded.labels;
  }

  llmEndpoint(name: string): LlmEndpoint | undefined {
    const found = this.lifecycle.tryResolve(name, undefined);
    return found instanceof Error ? undefined : found.llm;
  }

  llmEndpoints(): LlmEndpoint[] {
    return this.lifecycle
      .readyModelNames()
      .sort()
      .map((n) => this.llmEndpoint(n))
      .filter((e): e is LlmEndpoint => e !== undefined);
  }

  onModelChange(listener: () => void): () => void {
    return this.lifecycle.onChange(listener);
  }

  repositoryIndex(readyOnly: boolean): Promise<ModelIndexEntry[]> {
    return this.lifecycle.index(readyOnly);
  }

  async loadModel(name: string, options?: LoadModelOptions): Promise<void> {
    if (this.options.controlMode !== 'explicit') throw unavailable(CONTROL_DISABLED);
    if (this.stopping) throw unavailable('Server is stopping');
    if (this.initError !== undefined) throw unavailable('Server not ready');
    await this.lifecycle.load(name, options);
  }

  /** Loaded ensembles using `name` go first; `unloadDependents` also takes its composing models (ensembles). */
  async unloadModel(name: string, options?: UnloadModelOptions): Promise<void> {
    if (this.options.controlMode !== 'explicit') throw unavailable(CONTROL_DISABLED);
    await this.lifecycle.unload(name, options?.unloadDependents === true);
  }

  /** `onStepSuccess` (ensemble steps only): also told the compute times the model records. */
  submit(request: InferRequest, onResult: (result: InferResult) => void, options?: SubmitOptions, onStepSuccess?: (times: StepComputeTimes) => void): void {
    const requestStartNs = now();
    // The request's one closure is its job's result callback; the early endings below are methods.
    if (this.stopping) return this.deliver(request, onResult, { final: true, error: unavailable('Server is stopping') });
    const resolved = this.lifecycle.tryResolve(request.modelName, request.modelVersion);
    if (resolved instanceof Error) return this.deliver(request, onResult, { final: true, error: resolved });
    const version: LoadedVersion = resolved;
    const trace = options?.trace;
    trace?.start(version.config.name, version.version, request.id);
    trace?.activity('REQUEST_START', requestStartNs);

    let normalized: NormalizedRequest;
    try {
      normalized = normalizeRequest(version.config, request);
    } catch (e) {
      version.stats.recordFailure('OTHER', requestStartNs, now());
      return this.endEarly(request, onResult, trace, { final: true, error: toSwitchyardError(e) });
    }
    const signal = options?.signal;
    if (signal?.aborted === true) {
      version.stats.recordFailure('CANCELED', requestStartNs, now());
      return this.endEarly(request, onResult, trace, { final: true, error: cancelled(`${requestPrefix(request.id)}Request was cancelled`) });
    }
    // Response cache (response-cache.ts): a hit answers now; a miss inserts the final result.
    const cached = this.cache?.lookup(version, normalized, requestStartNs);
    if (cached?.response !== undefined) return this.endEarly(request, onResult, trace, { final: true, response: cached.response });
    let onAbort: (() => void) | undefined;
    const stats = onStepSuccess === undefined ? version.stats : new EnsembleStepStats(version.stats, onStepSuccess);
    const job = new InferenceJob(
      normalized,
      version.version,
      stats,
      requestStartNs,
      (answered) => {
        // Outputs leave in the config's dims (Triton's output reshape), for clients, steps and the cache alike.
        const result = reshapeResult(version.config, answered);
        // Decoupled requests stay cancellable until their final result.
        if (result.final && onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
        cached?.settle(result);
        this.deliver(request, onResult, result);
      },
      trace,
    );
    if (signal !== undefined) {
      onAbort = () => {
        if (job.state === 'pending' && version.cancel(job)) job.failCancelled();
        else job.requestCancel();
      };
      signal.addEventListener('abort', onAbort, { once: true });
    }
    version.enqueue(job);
  }

  /** Hand `result` to the caller's callback; a callback that throws is logged, never propagated into the engine. */
  private deliver(request: InferRequest, onResult: (result: InferResult) => void, result: InferResult): void {
    try {
      onResult(result);
    } catch (e) {
      this.options.logger.error({ err: e, model: request.modelName }, 'inference result callback threw');
    }
  }

  /** A request that ends before it reaches a scheduler. */
  private endEarly(request: InferRequest, onResult: (result: InferResult) => void, trace: SubmitOptions['trace'], result: InferResult): void {
    trace?.activity('REQUEST_END', now());
    this.deliver(request, onResult, result);
  }

  infer(request: InferRequest, options?: SubmitOptions): Promise<InferResponse> {
    return inferViaSubmit(this, request, options);
  }

  async shutdown(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    if (this.pollTimer !== undefined) clearInterval(this.pollTimer);
    await this.polling;
    await this.lifecycle.unloadAll();
    this.live = false;
  }
}

/** Build an engine and load its start-up models. Rejects only on invalid options or repositories. */
export function createEngine(options: EngineOptions): Promise<Engine> {
  return Engine.create(options);
}
