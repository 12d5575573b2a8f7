/**
 * One admitted inference request on its way through a scheduler and a backend.
 *
 * Lifecycle (explicit, one-way):
 * - `pending`: queued in a scheduler, not executing. Cancelling removes it from the queue and
 *   fails it at once.
 * - `executing`: handed to a backend instance. Cancelling only marks it; the execution
 *   completes, its result is discarded and the request fails as cancelled.
 * - `released`: the final result was delivered; nothing else happens to the job.
 *
 * The job owns result delivery and per-request statistics, so every path (success, backend
 * error, cancellation, rejection) is counted exactly once.
 */
import { cancelled as cancelledError, type SwitchyardError } from '@switchyard/common';
import type { InferTensor } from '@switchyard/kserve';
import type { ExecutionTiming } from './backend.js';
import type { NormalizedRequest } from './request-normalizer.js';
import { requestPrefix } from './request-normalizer.js';
import type { ModelStatsCollector } from './statistics.js';
import type { FailureReason, InferResult } from './types.js';

export type JobState = 'pending' | 'executing' | 'released';

const now = (): bigint => process.hrtime.bigint();

export class InferenceJob {
  private jobState: JobState = 'pending';
  private cancelRequested = false;
  readonly queueStartNs = now();

  constructor(
    readonly request: NormalizedRequest,
    readonly modelVersion: number,
    private readonly stats: ModelStatsCollector,
    private readonly requestStartNs: bigint,
    private readonly onResult: (result: InferResult) => void,
  ) {}

  get state(): JobState {
    return this.jobState;
  }

  /** Batch elements this request contributes to an execution (at least 1). */
  get batchElements(): number {
    return Math.max(1, this.request.batchSize);
  }

  /** Called by a scheduler right before handing the job to an instance. */
  markExecuting(): void {
    if (this.jobState === 'pending') this.jobState = 'executing';
  }

  /**
   * Cancellation from the client while executing: the job is failed as cancelled when its
   * execution ends. (A pending job is removed by its scheduler and failed with
   * `failCancelled()` instead.)
   */
  requestCancel(): void {
    this.cancelRequested = true;
  }

  /** Deliver a successful execution (or a cancellation, if one was requested meanwhile). */
  succeed(outputs: InferTensor[], timing: ExecutionTiming): void {
    if (this.jobState === 'released') return;
    if (this.cancelRequested) {
      this.failCancelled();
      return;
    }
    this.jobState = 'released';
    const { request } = this.request;
    this.onResult({
      final: true,
      response: { id: request.id, modelName: request.modelName, modelVersion: String(this.modelVersion), parameters: {}, outputs },
    });
    this.stats.recordSuccess({
      batchSize: this.batchElements,
      requestStartNs: this.requestStartNs,
      queueStartNs: this.queueStartNs,
      ...timing,
      requestEndNs: now(),
    });
  }

  /** Deliver a failure, counted under `reason`. A pending cancellation takes precedence. */
  fail(error: SwitchyardError, reason: FailureReason): void {
    if (this.jobState === 'released') return;
    if (this.cancelRequested && reason !== 'CANCELED') {
      this.failCancelled();
      return;
    }
    this.jobState = 'released';
    this.onResult({ final: true, error });
    this.stats.recordFailure(reason, this.requestStartNs, now());
  }

  failCancelled(): void {
    this.cancelRequested = false;
    this.fail(cancelledError(`${requestPrefix(this.request.request.id)}Request was cancelled`), 'CANCELED');
  }
}
