/**
 * `createScheduler`: the one place that picks a `Scheduler` implementation from the model
 * configuration (Triton's choice between the ensemble, sequence, dynamic and default schedulers).
 * Called by the loader once per loaded version; the schedulers themselves import only the role
 * (`scheduler.ts`), never this module.
 */
import { internal } from '@switchyard/common';
import type { ModelConfig } from '@switchyard/model-config';
import { DefaultScheduler } from './default-scheduler.js';
import { DynamicBatchScheduler } from './dynamic-batch-scheduler.js';
import type { EnsembleSchedulerContext } from './ensemble/ensemble-port.js';
import { EnsembleScheduler } from './ensemble/ensemble-scheduler.js';
import type { Scheduler, SchedulerContext } from './scheduler.js';
import { SequenceBatchScheduler } from './sequence/sequence-batch-scheduler.js';

/** What the factory gets: the usual context, plus what an ensemble needs. */
export interface SchedulerFactoryContext extends SchedulerContext {
  /** Ensembles only: how steps reach the engine (ensembles have no instances). */
  ensemble?: EnsembleSchedulerContext;
}

export function createScheduler(config: ModelConfig, context: SchedulerFactoryContext): Scheduler {
  if (config.platform === 'ensemble') {
    if (context.ensemble === undefined) throw internal(`ensemble '${config.name}' needs an engine to run its steps`);
    return new EnsembleScheduler(config, context, context.ensemble);
  }
  // Triton's precedence: sequence batching wins over dynamic batching.
  if (config.sequence_batching !== undefined) return new SequenceBatchScheduler(config, context);
  if (config.dynamic_batching !== undefined) return new DynamicBatchScheduler(config, context);
  return new DefaultScheduler(config.name, context);
}
