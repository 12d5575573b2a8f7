/**
 * Statistics of an ensemble step. A step is an ordinary request to its composing model and is
 * counted there as usual; Triton also adds the compute times of every successful step to the
 * ensemble request (the composing request's "secondary stats aggregator"), and reports their sums
 * as the ensemble's compute_input / compute_infer / compute_output.
 *
 * `EnsembleStepStats` stands in for the composing version's collector in the step's job: every
 * record goes to that collector unchanged, and each success is also reported to `onSuccess`.
 */
import { ModelStatsCollector, type CacheHitTimes, type SuccessTimes } from '../statistics.js';
import type { FailureReason, ModelStatistics } from '../types.js';

/** Compute durations (ns) of one successful step, as its composing model recorded them. */
export interface StepComputeTimes {
  inputNs: bigint;
  inferNs: bigint;
  outputNs: bigint;
}

export class EnsembleStepStats extends ModelStatsCollector {
  constructor(
    private readonly target: ModelStatsCollector,
    private readonly onSuccess: (times: StepComputeTimes) => void,
  ) {
    super(target.modelName, target.version);
    // Response statistics of a decoupled step belong to the composing model as well.
    (this as { responses: ModelStatsCollector['responses'] }).responses = target.responses;
  }

  override recordSuccess(t: SuccessTimes): void {
    this.target.recordSuccess(t);
    this.onSuccess({
      inputNs: t.computeInputEndNs - t.computeStartNs,
      inferNs: t.computeOutputStartNs - t.computeInputEndNs,
      outputNs: t.computeEndNs - t.computeOutputStartNs,
    });
  }

  override recordFailure(reason: FailureReason, requestStartNs: bigint, requestEndNs: bigint): void {
    this.target.recordFailure(reason, requestStartNs, requestEndNs);
  }

  override recordCacheHit(t: CacheHitTimes): void {
    this.target.recordCacheHit(t);
  }

  override recordCacheMiss(lookupNs: bigint, insertNs: bigint): void {
    this.target.recordCacheMiss(lookupNs, insertNs);
  }

  override recordExecution(batchSize: number, computeInputNs: bigint, computeInferNs: bigint, computeOutputNs: bigint): void {
    this.target.recordExecution(batchSize, computeInputNs, computeInferNs, computeOutputNs);
  }

  override failureCounts(): Record<FailureReason, number> {
    return this.target.failureCounts();
  }

  override snapshot(): ModelStatistics {
    return this.target.snapshot();
  }
}
