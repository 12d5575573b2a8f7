/**
 * Loading a model: the configuration pipeline and the creation of a `LoadedVersion`.
 *
 * Model level (`buildBaseConfig`, once per load): parse config.pbtxt (or the load override
 * JSON, which replaces it), complete name/platform/backend/default_model_filename from the
 * folder (server-side auto-complete), check the name matches the folder.
 * Version level (`loadVersion`): pick the backend, let it auto-complete the config from the
 * model file, normalise and validate, load the model, create every instance, warm them up,
 * and put a scheduler in front. Any failure throws; the caller marks the version UNAVAILABLE.
 */
import { basename, join } from 'node:path';
import { confinedSegments, enforceLimits, invalidArgument, isSwitchyardError, type Logger } from '@switchyard/common';
import {
  DEFAULT_MIN_COMPUTE_CAPABILITY,
  normalizeModelConfig,
  parseModelConfigJson,
  parseModelConfigText,
  validateModelConfig,
  type ModelConfig,
} from '@switchyard/model-config';
import { resolveBackend, type Backend, type BackendInstance, type BackendModelContext, type InstanceSpec } from '../backend.js';
import { executeBatch } from '../batch-executor.js';
import { loadEnsembleVersion } from '../ensemble/ensemble-model.js';
import type { EnsemblePort } from '../ensemble/ensemble-port.js';
import { loadOutputLabels } from '../labels.js';
import { configLimitChecks, type LoadLimits } from '../load-limits.js';
import { gpuPlacement, type GpuProbe } from '../gpu/gpu-probe.js';
import { LoadHandoffs } from './load-handoffs.js';
import { LoadedVersion } from './loaded-version.js';
import type { ModelSource } from './model-source.js';
import { checkConfigName, completeBackendFields } from '../repository.js';
import type { Scheduler } from '../scheduler.js';
import { createScheduler } from '../scheduler-factory.js';
import { ModelStatsCollector } from '../statistics.js';
import { runWarmup } from '../warmup.js';

export interface LoaderContext {
  autoComplete: boolean;
  /** Backend name → implementation (extras merged over the built-ins). */
  backends: Readonly<Record<string, Backend>>;
  logger: Logger;
  /** How ensemble steps reach the engine; without it ensembles do not load. */
  ensembles?: EnsemblePort;
  /** Ceilings of what a load may allocate; default DEFAULT_LOAD_LIMITS. */
  limits?: LoadLimits;
  /** The GPUs instance groups may be placed on; absent: none. */
  gpus?: GpuProbe;
  /** GPUs below this compute capability are not used (default 6.0). */
  minComputeCapability?: number;
  /** Told of each step of a version's load as it starts (`EngineOptions.onLoadStep`). */
  onLoadStep?: (step: ModelLoadStep) => void;
  /**
   * A load slot nobody uses, taken now (its release returned), or undefined (`LoadSlots.tryTake`):
   * what lets a model that loads its instances in parallel create more than one at a time. Absent:
   * one at a time.
   */
  borrowLoadSlot?: () => (() => void) | undefined;
}

/**
 * A step of loading one model version, reported as it starts, so that a caller can show a load
 * that takes long (a large ONNX file, an LLM's session, digest and KV cache) while it runs:
 *   loading    the config is completed and the backend reads and builds the model (file, session,
 *              tokenizer, KV cache): the long step of a large model
 *   instances  the instances are created
 *   warmup     the config's `model_warmup` samples run on every instance
 *   loaded     the version is built and about to serve
 *   failed     the load threw (the version becomes UNAVAILABLE, or is tried again)
 * Ensembles report nothing: they build no backend.
 */
export interface ModelLoadStep {
  readonly model: string;
  readonly version: number;
  readonly step: 'loading' | 'instances' | 'warmup' | 'loaded' | 'failed';
}

/**
 * The model-level config. `overrideConfig` (a ModelConfig JSON string) replaces config.pbtxt.
 * Throws invalid_argument / internal with the parser's message (file:line:col for pbtxt).
 */
export function buildBaseConfig(name: string, source: ModelSource, overrideConfig: string | undefined, autoComplete: boolean): ModelConfig {
  let config: ModelConfig;
  if (overrideConfig !== undefined) {
    config = parseModelConfigJson(overrideConfig);
  } else if (source.configText !== undefined) {
    config = parseModelConfigText(source.configText, join(source.path, source.configFile));
  } else if (autoComplete) {
    config = parseModelConfigText('', join(source.path, source.configFile));
  } else {
    throw invalidArgument(`model configuration file '${join(source.path, source.configFile)}' is required when auto-complete is disabled (strict model config)`);
  }
  const newestFirst = [...source.versions].reverse().map((v) => source.versionFiles.get(v) ?? []);
  config = completeBackendFields(config, name, newestFirst, autoComplete);
  checkConfigName(config, overrideConfig !== undefined ? name : basename(source.path));
  return config;
}

/**
 * The checks a config passes before anything is built from it: every value that sizes an
 * allocation or a thread count within its limit (load-limits.ts), and the model file names
 * (`default_model_filename`, `cc_model_filenames`) under the confined resolver's lexical rules. The
 * fields that are opened go through the full resolver (links too) where they are read.
 */
function checkBeforeBuilding(config: ModelConfig, limits: LoadLimits | undefined): void {
  enforceLimits(`unable to load model '${config.name}'`, configLimitChecks(config, limits));
  // Every backend gets the same early answer; those that open the file resolve it again there.
  const file = config.default_model_filename;
  if (file !== '') confinedSegments(file, `default_model_filename '${file}' of model '${config.name}' must name a path inside its version folder`);
  for (const [cc, file] of Object.entries(config.cc_model_filenames)) {
    confinedSegments(file, `cc_model_filenames '${cc}' ('${file}') of model '${config.name}' must name a path inside its version folder`);
  }
}

/**
 * The config a version will run with: backend auto-complete, then normalise and validate. The
 * limits are checked before the backend's auto-complete (which may start a thread or a session)
 * and again on the final config (auto-complete may change it).
 */
async function finalConfig(context: LoaderContext, backend: Backend, base: ModelConfig, backendContext: BackendModelContext): Promise<ModelConfig> {
  let config = base;
  checkBeforeBuilding(config, context.limits);
  if (context.autoComplete && backend.autoCompleteConfig !== undefined) {
    config = await backend.autoCompleteConfig({ ...backendContext, config });
  }
  const minComputeCapability = context.minComputeCapability ?? DEFAULT_MIN_COMPUTE_CAPABILITY;
  let placement = gpuPlacement((await context.gpus?.inventory()) ?? { devices: [] }, minComputeCapability);
  if (placement.supportedGpus.length > 0) {
    // GPUs this backend cannot use are, for its models, no GPUs at all.
    const support = backend.gpuSupport?.() ?? { usable: true };
    if (!support.usable) placement = { supportedGpus: [], hint: `the ${backend.name} backend cannot use this host's GPUs: ${support.reason}; use KIND_CPU or KIND_AUTO to run on CPU` };
  }
  config = normalizeModelConfig(config, { modelName: base.name, supportedGpus: placement.supportedGpus });
  validateModelConfig(config, { supportedGpus: placement.supportedGpus, minComputeCapability, ...(placement.hint !== undefined ? { gpuHint: placement.hint } : {}) });
  checkBeforeBuilding(config, context.limits);
  return config;
}

async function createInstances(context: LoaderContext, config: ModelConfig, model: Awaited<ReturnType<Backend['loadModel']>>): Promise<BackendInstance[]> {
  // Triton's order: per group, per count, one instance on each of the group's GPUs (one on the
  // CPU for other kinds); the instances of one count share the name `<group>_<c>`.
  const specs: InstanceSpec[] = [];
  for (const group of config.instance_group) {
    const devices = group.kind === 'KIND_GPU' ? group.gpus : [0];
    for (let c = 0; c < group.count; c++) {
      for (const deviceId of devices) specs.push({ name: `${group.name}_${c}`, kind: group.kind, deviceId, index: specs.length });
    }
  }
  if (specs.length === 0) throw invalidArgument(`unable to load model '${config.name}': the model has no instances (instance_group count is 0)`);
  const instances: Array<BackendInstance | undefined> = specs.map(() => undefined);
  const errors = new Map<number, unknown>();
  let next = 0;
  // One builder takes instances in order until all are built or one failed; the load's own slot runs
  // the first, each free slot borrowed (parallel loading only) one more.
  const builder = async (release?: () => void): Promise<void> => {
    try {
      while (errors.size === 0 && next < specs.length) {
        const i = next++;
        try {
          instances[i] = await model.createInstance(specs[i]!);
        } catch (e) {
          errors.set(i, e);
        }
      }
    } finally {
      release?.();
    }
  };
  const builders = [builder()];
  if (model.parallelInstanceLoading === true && context.borrowLoadSlot !== undefined) {
    for (let k = 1; k < specs.length; k++) {
      const release = context.borrowLoadSlot();
      if (release === undefined) break;
      builders.push(builder(release));
    }
  }
  await Promise.all(builders);
  if (errors.size > 0) {
    for (const instance of instances) await instance?.release().catch(() => undefined);
    throw errors.get(Math.min(...errors.keys()));
  }
  return instances as BackendInstance[];
}

/** Load one version. Throws on any failure, with every partially created resource released. */
export async function loadVersion(context: LoaderContext, base: ModelConfig, source: ModelSource, version: number): Promise<LoadedVersion> {
  if (base.platform === 'ensemble') return loadEnsembleVersion(context, base, source, version);
  const report = (step: ModelLoadStep['step']): void => {
    try {
      context.onLoadStep?.({ model: base.name, version, step });
    } catch (e) {
      context.logger.error({ err: e, model: base.name, version }, 'model load step listener threw');
    }
  };
  report('loading');
  try {
    const loaded = await loadBackendVersion(context, base, source, version, report);
    report('loaded');
    return loaded;
  } catch (e) {
    report('failed');
    throw e;
  }
}

async function loadBackendVersion(
  context: LoaderContext,
  base: ModelConfig,
  source: ModelSource,
  version: number,
  report: (step: ModelLoadStep['step']) => void,
): Promise<LoadedVersion> {
  const started = process.hrtime.bigint();
  const name = base.name;
  const logger = context.logger.child({ model: name, version });
  // With 'model version loaded' (and its loadSecs) the pair an operator watches a slow load by.
  logger.info({ backend: base.backend || base.platform }, 'loading model version');
  const backend = resolveBackend(base, context.backends);
  // What auto-complete built for loadModel (a session): released here if loadModel does not take it.
  const handoff = new LoadHandoffs();
  const backendContext: BackendModelContext = {
    modelName: name,
    version,
    modelPath: source.path,
    versionPath: join(source.path, String(version)),
    config: base,
    logger,
    handoff,
  };
  let config: ModelConfig;
  let labels: Awaited<ReturnType<typeof loadOutputLabels>>;
  let model: Awaited<ReturnType<Backend['loadModel']>>;
  try {
    config = await finalConfig(context, backend, base, backendContext);
    // Label files are read with the config, before the backend: a missing one fails the load.
    labels = await loadOutputLabels(config, source.path);
    model = await backend.loadModel({ ...backendContext, config });
  } finally {
    await handoff.close();
  }
  let instances: BackendInstance[] = [];
  const stats = new ModelStatsCollector(name, version);
  let scheduler: Scheduler;
  try {
    report('instances');
    instances = await createInstances(context, config, model);
    if (config.model_warmup.length > 0) report('warmup');
    await runWarmup(config, source.path, instances);
    // Inside the cleanup path: a scheduler may refuse its config (e.g. a sequence initial_state).
    scheduler = createScheduler(config, {
      instances,
      run: (instance, jobs) => executeBatch(instance, jobs, stats),
      logger,
      modelPath: source.path,
    });
  } catch (e) {
    for (const instance of instances) await instance.release().catch(() => undefined);
    await model.release().catch(() => undefined);
    throw e;
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  logger.info({ instances: instances.length, loadSecs: seconds }, 'model version loaded');
  return new LoadedVersion(name, version, config, labels, stats, seconds, scheduler, instances, model, logger);
}

/** A one-line reason for the repository index. */
export function failureReason(e: unknown): string {
  if (isSwitchyardError(e) || e instanceof Error) return e.message;
  return String(e);
}
