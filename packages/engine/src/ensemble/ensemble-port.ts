/**
 * What an ensemble needs from the engine, and all it needs: `EnsemblePort` (the engine provides
 * it; steps go through it) and `EnsembleSchedulerContext`, what the ensemble's scheduler gets
 * besides the usual `SchedulerContext`. Types only, so the run, the scheduler, the loader and the
 * lifecycle share them without importing each other.
 */
import type { SwitchyardError } from '@switchyard/common';
import type { InferRequest } from '@switchyard/kserve';
import type { ModelConfig } from '@switchyard/model-config';
import type { ModelStatsCollector } from '../statistics.js';
import type { InferResult, OutputLabels, SubmitOptions } from '../types.js';
import type { StepComputeTimes } from './ensemble-step-stats.js';

export interface EnsemblePort {
  /**
   * `InferenceEngine.submit` for one step; `onStepSuccess` also receives the compute times the
   * composing model records for it. Results may arrive synchronously.
   */
  submit(request: InferRequest, onResult: (result: InferResult) => void, options: SubmitOptions, onStepSuccess: (times: StepComputeTimes) => void): void;
  /** The version a request for (`name`, `version`) reaches now (its config and labels), or the lookup error. */
  composingVersion(name: string, version: number | undefined): ComposingVersion | SwitchyardError;
}

/** What an ensemble reads of a composing model's version. */
export interface ComposingVersion {
  readonly config: ModelConfig;
  /** Its classification labels by output (`label_filename`, or inherited when it is an ensemble itself). */
  readonly labels: OutputLabels;
}

/** What an ensemble's scheduler gets besides the usual context. */
export interface EnsembleSchedulerContext {
  port: EnsemblePort;
  /** The ensemble version's statistics (its executions are counted here). */
  stats: ModelStatsCollector;
}
