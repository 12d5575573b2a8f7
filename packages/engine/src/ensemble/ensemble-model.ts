/**
 * Loading one version of an ensemble (`platform: "ensemble"`, Triton's EnsembleModel): no
 * backend and no instances, only a config, statistics, labels (its own label files, completed from
 * its steps: `ensemble-labels.ts`) and the `EnsembleScheduler`.
 * Called by `loadVersion` once the lifecycle has checked that the composing models are loaded
 * (`EnsembleDependencies.check`).
 *
 * The served config is the ensemble's own, normalised, with `model_transaction_policy.decoupled`
 * set as Triton sets it: true exactly when a step is decoupled (the ensemble then streams).
 */
import { internal, type Logger } from '@switchyard/common';
import { normalizeModelConfig, validateModelConfig, type ModelConfig } from '@switchyard/model-config';
import type { BackendModel } from '../backend.js';
import { inheritComposingLabels } from './ensemble-labels.js';
import { ensembleSteps } from './ensemble-plan.js';
import type { EnsemblePort } from './ensemble-port.js';
import { validateEnsembleComposition } from './ensemble-validation.js';
import { loadOutputLabels } from '../labels.js';
import { LoadedVersion } from '../model/loaded-version.js';
import type { ModelSource } from '../model/model-source.js';
import { createScheduler } from '../scheduler-factory.js';
import { ModelStatsCollector } from '../statistics.js';

/** An ensemble has no backend: nothing to create, nothing to release. */
const NO_BACKEND: BackendModel = {
  createInstance: () => Promise.reject(internal('an ensemble has no instances')),
  release: () => Promise.resolve(),
};

export interface EnsembleLoadContext {
  logger: Logger;
  /** Absent when the engine was built without one (then ensembles cannot load). */
  ensembles?: EnsemblePort;
}

export async function loadEnsembleVersion(context: EnsembleLoadContext, base: ModelConfig, source: ModelSource, version: number): Promise<LoadedVersion> {
  const started = process.hrtime.bigint();
  const name = base.name;
  const logger = context.logger.child({ model: name, version });
  const port = context.ensembles;
  if (port === undefined) throw internal(`unable to load ensemble '${name}': this engine cannot run ensembles`);
  let config = normalizeModelConfig(base, { modelName: name });
  validateModelConfig(config);
  const { decoupled } = validateEnsembleComposition(config, (model) => {
    const found = port.composingVersion(model, undefined);
    if (found instanceof Error) throw found;
    return found.config;
  });
  config = { ...config, model_transaction_policy: { ...config.model_transaction_policy, decoupled } };
  const labels = inheritComposingLabels(config, await loadOutputLabels(config, source.path), (model, v) => {
    const found = port.composingVersion(model, v);
    return found instanceof Error ? undefined : found.labels;
  });
  const stats = new ModelStatsCollector(name, version);
  const scheduler = createScheduler(config, {
    instances: [],
    run: () => Promise.resolve(),
    logger,
    modelPath: source.path,
    ensemble: { port, stats },
  });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  logger.info({ steps: ensembleSteps(config).length, decoupled, loadSecs: seconds }, 'ensemble version loaded');
  return new LoadedVersion(name, version, config, labels, stats, seconds, scheduler, [], NO_BACKEND, logger);
}
