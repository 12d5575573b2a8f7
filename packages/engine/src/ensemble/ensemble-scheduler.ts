/**
 * Triton's ensemble scheduler: the `Scheduler` of a `platform: "ensemble"` model. It has no
 * instances and no queue of its own; each admitted request becomes an `EnsembleRun` at once,
 * whose steps go through the engine to the composing models' own schedulers (so steps batch
 * there, and count there). The request counts as executing from the start; cancellation reaches
 * the run through its job's response sender (see `EnsembleRun`).
 *
 * `EnsemblePort` is the one thing the ensemble needs from the engine; the engine provides it.
 */
import { internal, unavailable, type SwitchyardError } from '@switchyard/common';
import type { InferRequest } from '@switchyard/kserve';
import type { ModelConfig } from '@switchyard/model-config';
import { planEnsemble, type EnsemblePlan } from './ensemble-plan.js';
import { EnsembleRun } from './ensemble-run.js';
import type { StepComputeTimes } from './ensemble-step-stats.js';
import type { InferenceJob } from '../inference-job.js';
import { requestPrefix } from '../request-normalizer.js';
import type { Scheduler, SchedulerContext } from '../scheduler.js';
import type { ModelStatsCollector } from '../statistics.js';
import type { InferResult, SubmitOptions } from '../types.js';

export interface EnsemblePort {
  /**
   * `InferenceEngine.submit` for one step; `onStepSuccess` also receives the compute times the
   * composing model records for it. Results may arrive synchronously.
   */
  submit(request: InferRequest, onResult: (result: InferResult) => void, options: SubmitOptions, onStepSuccess: (times: StepComputeTimes) => void): void;
  /** The config of the version a request for (`name`, `version`) reaches now, or the lookup error. */
  modelConfig(name: string, version: number | undefined): ModelConfig | SwitchyardError;
}

/** What an ensemble's scheduler gets besides the usual context. */
export interface EnsembleSchedulerContext {
  port: EnsemblePort;
  /** The ensemble version's statistics (its executions are counted here). */
  stats: ModelStatsCollector;
}

export class EnsembleScheduler implements Scheduler {
  private readonly plan: EnsemblePlan;
  private readonly decoupled: boolean;
  private readonly runs = new Set<EnsembleRun>();
  private stopped = false;
  private drained: (() => void) | undefined;

  constructor(
    config: ModelConfig,
    private readonly context: SchedulerContext,
  ) {
    if (context.ensemble === undefined) throw internal(`ensemble '${config.name}' needs an engine to run its steps`);
    this.plan = planEnsemble(config);
    this.decoupled = config.model_transaction_policy?.decoupled === true;
    const limit = (config.ensemble_scheduling as { max_inflight_requests?: number } | undefined)?.max_inflight_requests ?? 0;
    if (limit > 0) context.logger.warn({ model: config.name, max_inflight_requests: limit }, 'ensemble max_inflight_requests is not supported; steps are not limited');
  }

  enqueue(job: InferenceJob): void {
    if (this.stopped) {
      job.fail(unavailable(`${requestPrefix(job.request.request.id)}Model '${this.plan.name}' is unloading`), 'REJECTED');
      return;
    }
    const { port, stats } = this.context.ensemble as EnsembleSchedulerContext;
    const run: EnsembleRun = new EnsembleRun({
      plan: this.plan,
      job,
      port,
      stats,
      decoupled: this.decoupled,
      logger: this.context.logger,
      onEnd: () => {
        this.runs.delete(run);
        this.checkDrained();
      },
    });
    this.runs.add(run);
    run.start();
  }

  /** Ensemble requests execute from the moment they are admitted: nothing is ever queued here. */
  cancel(_job: InferenceJob): boolean {
    return false;
  }

  pendingCount(): number {
    return 0;
  }

  inflightCount(): number {
    return this.runs.size;
  }

  stop(): Promise<void> {
    this.stopped = true;
    if (this.runs.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.drained = resolve;
    });
  }

  private checkDrained(): void {
    if (this.stopped && this.runs.size === 0 && this.drained !== undefined) {
      const resolve = this.drained;
      this.drained = undefined;
      resolve();
    }
  }
}
