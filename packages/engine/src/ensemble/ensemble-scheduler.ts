/**
 * Triton's ensemble scheduler: the `Scheduler` of a `platform: "ensemble"` model. It has no
 * instances and no queue of its own; each admitted request becomes an `EnsembleRun` at once,
 * whose steps go through the engine to the composing models' own schedulers (so steps batch
 * there, and count there). The request counts as executing from the start; cancellation reaches
 * the run through its job's response sender (see `EnsembleRun`).
 *
 * It is built by `createScheduler` (`scheduler-factory.ts`) with the `EnsembleSchedulerContext`
 * (`ensemble-port.ts`) the ensemble's loader provides.
 */
import { unavailable } from '@switchyard/common';
import type { ModelConfig } from '@switchyard/model-config';
import type { InferenceJob } from '../inference-job.js';
import { requestPrefix } from '../request-normalizer.js';
import type { Scheduler, SchedulerContext } from '../scheduler.js';
import { planEnsemble, type EnsemblePlan } from './ensemble-plan.js';
import type { EnsembleSchedulerContext } from './ensemble-port.js';
import { EnsembleRun } from './ensemble-run.js';

export class EnsembleScheduler implements Scheduler {
  private readonly plan: EnsemblePlan;
  private readonly decoupled: boolean;
  private readonly runs = new Set<EnsembleRun>();
  private stopped = false;
  private drained: (() => void) | undefined;

  constructor(
    config: ModelConfig,
    private readonly context: SchedulerContext,
    private readonly ensemble: EnsembleSchedulerContext,
  ) {
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
    const { port, stats } = this.ensemble;
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
