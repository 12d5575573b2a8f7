/**
 * The JavaScript backend (`backend: "javascript"`), the analogue of Triton's Python backend for
 * pre/post-processing and business logic written in JavaScript or TypeScript (compiled to JS).
 *
 * A model version folder holds `model.js` or `model.mjs` (or `default_model_filename`) exporting
 * a class named `TritonModel`:
 * - `static autoCompleteConfig(config, pb)` (optional): completes the config (Triton JSON form)
 *   when auto-complete is on; returns it or mutates it in place.
 * - `initialize(args)` (optional): once per instance; `args` has Python's keys (`model_config`
 *   parsed, `model_name`, `model_version`, `model_repository`, `model_instance_name`,
 *   `model_instance_kind`, `model_instance_device_id`) and `pb`, the tensor / response / BLS
 *   helpers (`worker/javascript-pb.mjs`).
 * - `execute(requests)` (required, may be async): returns one response per request, or
 *   undefined for requests answered through `request.responseSender()` (always, for decoupled
 *   models). A request carries `id`, `inputs`, `parameters` (the custom ones only, as Python's
 *   `request.parameters()`), `correlationId` and `flags` (Python's `correlation_id()` / `flags()`).
 * - `finalize()` (optional): at unload.
 * Every instance (`instance_group` count) runs on its own worker thread (`JavaScriptInstance`).
 *
 * Config parameters (string values, like every backend parameter):
 * - `execute_timeout_ms` (default 0: none, as in Triton): an execution running longer fails its
 *   requests UNAVAILABLE and the instance is restarted on a fresh thread.
 * - `lifecycle_timeout_ms` (default 30000): bounds auto-complete and initialize at load, and at
 *   unload the wait for in-flight work and finalize; past it the thread is terminated.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { invalidArgument, resolveConfinedPath, unavailable } from '@switchyard/common';
import { parseModelConfigJson, renderModelConfigJson, type ModelConfig } from '@switchyard/model-config';
import type { Backend, BackendInstance, BackendModel, BackendModelContext, InstanceSpec } from '../backend.js';
import type { BlsPort } from './javascript-bls.js';
import { JavaScriptInstance } from './javascript-instance.js';
import type { ThreadData } from './javascript-protocol.js';
import { JavaScriptThread } from './javascript-thread.js';

export const JAVASCRIPT_BACKEND = 'javascript';
/** Looked for in this order when `default_model_filename` is empty. */
export const JAVASCRIPT_MODEL_FILES: readonly string[] = ['model.js', 'model.mjs'];
export const DEFAULT_LIFECYCLE_TIMEOUT_MS = 30_000;
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface JavaScriptBackendOptions {
  /** Where models' BLS calls go. A function, so an engine can pass itself after construction. */
  bls?: () => BlsPort | undefined;
}

/**
 * `<version>/<default_model_filename>`, else the first of `model.js`, `model.mjs` that exists: the
 * name and the real path to import.
 * The name goes through the confined resolver: a name or link leading outside the version folder
 * is refused (invalid_argument) before anything is read or run.
 */
export async function resolveJavaScriptModelFile(context: BackendModelContext): Promise<{ name: string; path: string }> {
  const configured = context.config.default_model_filename;
  const names = configured !== '' ? [configured] : JAVASCRIPT_MODEL_FILES;
  for (const name of names) {
    const found = resolveConfinedPath(context.versionPath, name, `default_model_filename '${name}' of model '${context.modelName}'`, 'its version folder');
    if (found.exists && (await stat(found.path).catch(() => undefined))?.isFile() === true) return { name, path: found.path };
  }
  const wanted = names.map((n) => `'${join(context.versionPath, n)}'`).join(' or ');
  throw unavailable(`unable to load model '${context.modelName}': unable to find ${wanted} for model '${context.modelName}'`);
}

function msParameter(config: ModelConfig, key: string, fallback: number): number {
  const raw = config.parameters[key]?.string_value;
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  // Above 2^31 - 1 ms Node's timers fire at once (they hold a signed 32-bit count).
  if (!Number.isInteger(value) || value < 0 || value > MAX_TIMER_MS) {
    throw invalidArgument(
      `unable to load model '${config.name}': parameter '${key}' must be a non-negative integer number of milliseconds up to ${MAX_TIMER_MS}, got '${raw}'`,
    );
  }
  return value;
}

const isDecoupled = (config: ModelConfig): boolean => config.model_transaction_policy?.decoupled === true;

class JavaScriptModel implements BackendModel {
  private readonly instances = new Set<JavaScriptInstance>();
  private unloading = false;

  constructor(
    private readonly context: BackendModelContext,
    private readonly modelFile: string,
    private readonly configJson: unknown,
    private readonly bls: BlsPort | undefined,
  ) {}

  async createInstance(spec: InstanceSpec): Promise<BackendInstance> {
    const { context } = this;
    const config = context.config;
    const lifecycleTimeoutMs = msParameter(config, 'lifecycle_timeout_ms', DEFAULT_LIFECYCLE_TIMEOUT_MS);
    const data: ThreadData = {
      mode: 'instance',
      modelFile: this.modelFile,
      config: this.configJson,
      decoupled: isDecoupled(config),
      args: {
        model_config: this.configJson,
        model_name: context.modelName,
        model_version: String(context.version),
        model_repository: context.modelPath,
        model_instance_name: spec.name,
        model_instance_kind: spec.kind.replace(/^KIND_/, ''),
        model_instance_device_id: String(spec.deviceId),
      },
    };
    const logger = context.logger.child({ instance: spec.name });
    try {
      const instance = await JavaScriptInstance.create({
        name: spec.name,
        modelName: context.modelName,
        modelVersion: context.version,
        decoupled: data.decoupled,
        executeTimeoutMs: msParameter(config, 'execute_timeout_ms', 0),
        lifecycleTimeoutMs,
        data,
        thread: { logger, bls: this.bls, timeoutMs: lifecycleTimeoutMs },
        logger,
      });
      this.instances.add(instance);
      if (this.unloading) instance.beginUnload();
      return instance;
    } catch (e) {
      throw unavailable(`unable to load model '${context.modelName}': ${e instanceof Error ? e.message : String(e)}`, e);
    }
  }

  beginUnload(): void {
    this.unloading = true;
    for (const instance of this.instances) instance.beginUnload();
  }

  async release(): Promise<void> {
    // Instances are released by the lifecycle first; this only covers ones it never saw.
    await Promise.all([...this.instances].map((i) => i.release()));
  }
}

export class JavaScriptBackend implements Backend {
  readonly name = JAVASCRIPT_BACKEND;

  constructor(private readonly options: JavaScriptBackendOptions = {}) {}

  /** Runs the class's static `autoCompleteConfig` (on a short-lived thread) and fills `default_model_filename`. */
  async autoCompleteConfig(context: BackendModelContext): Promise<ModelConfig> {
    const { name, path: modelFile } = await resolveJavaScriptModelFile(context);
    const config: ModelConfig = { ...context.config };
    if (config.default_model_filename === '') config.default_model_filename = name;
    let completed: unknown;
    try {
      completed = await JavaScriptThread.autoComplete(
        `${context.modelName}_autocomplete`,
        { mode: 'autocomplete', modelFile, config: JSON.parse(renderModelConfigJson(config)) as unknown, decoupled: isDecoupled(config) },
        { logger: context.logger, timeoutMs: msParameter(config, 'lifecycle_timeout_ms', DEFAULT_LIFECYCLE_TIMEOUT_MS) },
      );
    } catch (e) {
      throw unavailable(`unable to load model '${context.modelName}': ${e instanceof Error ? e.message : String(e)}`, e);
    }
    if (completed === null || completed === undefined) return config;
    return parseModelConfigJson(JSON.stringify(completed));
  }

  async loadModel(context: BackendModelContext): Promise<BackendModel> {
    const { path: modelFile } = await resolveJavaScriptModelFile(context);
    // Validate the parameters now so a bad value fails the load, not the first request.
    msParameter(context.config, 'execute_timeout_ms', 0);
    msParameter(context.config, 'lifecycle_timeout_ms', DEFAULT_LIFECYCLE_TIMEOUT_MS);
    const configJson = JSON.parse(renderModelConfigJson(context.config)) as unknown;
    return new JavaScriptModel(context, modelFile, configJson, this.options.bls?.());
  }

}
