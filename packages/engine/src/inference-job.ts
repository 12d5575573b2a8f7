/**
 * One admitted inference request on its way through a scheduler and a backend.
 *
 * Lifecycle (explicit, one-way):
 * - `pending`: queued in a scheduler, not executing. Cancelling removes it from the queue and
 *   fails it at once.
 * - `executing`: handed to a backend instance. Answered either by the execution's result
 *   (`succeed` / `fail`: one final response) or through its `ResponseSender` (zero or more
 *   responses, then the final flag; possibly after the execution returned). Cancelling a
 *   single-response request only marks it: the execution completes, its result is discarded
 *   and the request fails as cancelled. Cancelling a request that answers through its sender
 *   ends it at once (a final `cancelled` error) and drops whatever the backend sends later.
 * - `released`: the final result was delivered; nothing else happens to the job.
 *
 * The job owns result delivery and per-request statistics, so every path (success, backend
 * error, cancellation, rejection) is counted exactly once. A sender-answered request counts as
 * failed (BACKEND) when any of its responses was an error, else as a success; its success is
 * recorded once both its final flag arrived and its execution ended (the compute times come from
 * the execution), so a model may close a request before or after `execute` returns.
 */
import { cancelled as cancelledError, type SwitchyardError } from '@switchyard/common';
import type { InferTensor, Parameters } from '@switchyard/kserve';
import type { BackendResponse, ExecutionTiming, ResponseSender } from './backend.js';
import type { NormalizedRequest } from './request-normalizer.js';
import { requestPrefix } from './request-normalizer.js';
import type { ModelStatsCollector } from './statistics.js';
import type { FailureReason, InferenceTrace, InferResult } from './types.js';

export type JobState = 'pending' | 'executing' | 'released';

const now = (): bigint => process.hrtime.bigint();

export class InferenceJob implements ResponseSender {
  private jobState: JobState = 'pending';
  private cancelRequested = false;
  readonly queueStartNs = now();
  private executeStartNs: bigint | undefined;
  // Sender path: set once the backend answers this request through its sender.
  private streaming = false;
  private responseCount = 0;
  private lastResponseNs: bigint | undefined;
  private sawErrorResponse = false;
  private wasCancelled = false;
  private cancelListener: (() => void) | undefined;
  /** Compute times of the execution, once it ended. */
  private timing: ExecutionTiming | undefined;
  /** Final flag delivered before the execution ended: success is recorded at execution end. */
  private successEndNs: bigint | undefined;

  constructor(
    readonly request: NormalizedRequest,
    readonly modelVersion: number,
    private readonly stats: ModelStatsCollector,
    private readonly requestStartNs: bigint,
    private readonly onResult: (result: InferResult) => void,
    /** Set when the request is traced: QUEUE_START now, compute from `executeBatch`, REQUEST_END at release. */
    readonly trace?: InferenceTrace,
  ) {
    if (trace !== undefined) {
      trace.activity('QUEUE_START', this.queueStartNs);
      if (trace.wantsTensors) for (const input of request.request.inputs) trace.tensor('TENSOR_QUEUE_INPUT', input);
    }
  }

  get state(): JobState {
    return this.jobState;
  }

  /** Batch elements this request contributes to an execution (at least 1). */
  get batchElements(): number {
    return Math.max(1, this.request.batchSize);
  }

  /** Called by a scheduler right before handing the job to an instance. */
  markExecuting(): void {
    if (this.jobState !== 'pending') return;
    this.jobState = 'executing';
    this.executeStartNs = now();
  }

  /**
   * Cancellation from the client while executing. A single-response request fails as cancelled
   * when its execution ends; a streaming one ends now. (A pending job is removed by its scheduler
   * and failed with `failCancelled()` instead.)
   */
  requestCancel(): void {
    this.cancelRequested = true;
    if (this.streaming) this.failCancelled();
  }

  /** Deliver a successful execution (or a cancellation, if one was requested meanwhile). */
  succeed(outputs: InferTensor[], timing: ExecutionTiming): void {
    if (this.jobState === 'released') return;
    if (this.cancelRequested) {
      this.failCancelled();
      return;
    }
    this.jobState = 'released';
    this.traceOutputs(outputs);
    this.traceEnd();
    this.onResult({ final: true, response: this.response(outputs, {}) });
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
    if (this.streaming) this.recordResponse(reason === 'CANCELED' ? 'cancel' : 'fail', now());
    this.traceEnd();
    this.onResult({ final: true, error });
    this.stats.recordFailure(reason, this.requestStartNs, now());
    if (reason === 'CANCELED') this.notifyCancel();
  }

  failCancelled(): void {
    this.cancelRequested = false;
    this.fail(cancelledError(`${requestPrefix(this.request.request.id)}Request was cancelled`), 'CANCELED');
  }

  /**
   * The sender the backend answers this request through (see `ResponseSender`): the job itself
   * (`send`, `cancelled`, `onCancel`), so handing every request of a batch its sender allocates nothing.
   */
  responseSender(): ResponseSender {
    return this;
  }

  /** `ResponseSender.cancelled`: the client cancelled this request. */
  get cancelled(): boolean {
    return this.cancelRequested || this.wasCancelled;
  }

  /** `ResponseSender.onCancel`. */
  onCancel(listener: () => void): void {
    this.cancelListener = listener;
  }

  /**
   * The execution this job was part of ended (successfully or not). `viaSender`: the backend
   * answers this request through its sender, so it stays open until its final flag.
   */
  executionEnded(timing: ExecutionTiming, viaSender: boolean): void {
    this.timing = timing;
    if (this.successEndNs !== undefined) {
      this.recordSuccess(this.successEndNs);
      this.successEndNs = undefined;
    }
    if (viaSender && this.jobState !== 'released') {
      this.streaming = true;
      if (this.cancelRequested) this.failCancelled();
    }
  }

  /** `ResponseSender.send`. */
  send(response: BackendResponse | undefined, final: boolean, sentAtNs?: bigint): boolean {
    if (this.jobState === 'released') return false;
    if (response === undefined && !final) return true;
    this.streaming = true;
    if (this.cancelRequested) {
      this.failCancelled();
      return false;
    }
    const sentNs = sentAtNs ?? now();
    if (response === undefined) {
      this.recordResponse('empty', sentNs);
      this.release();
      this.onResult({ final: true });
      return true;
    }
    const isError = 'error' in response;
    if (isError) this.sawErrorResponse = true;
    this.recordResponse(isError ? 'fail' : 'success', sentNs, now());
    if (!isError) this.traceOutputs(response.outputs);
    if (final) this.release();
    if (isError) this.onResult({ final, error: response.error });
    else this.onResult({ final, response: this.response(response.outputs, response.parameters ?? {}) });
    return true;
  }

  /** Final flag through the sender: counted now (failure, or success once the execution ended). */
  private release(): void {
    this.jobState = 'released';
    this.traceEnd();
    const endNs = now();
    if (this.sawErrorResponse) this.stats.recordFailure('BACKEND', this.requestStartNs, endNs);
    else if (this.timing !== undefined) this.recordSuccess(endNs);
    else this.successEndNs = endNs;
  }

  /** The backend execution this request was part of, as Triton's compute activities (called by `executeBatch`). */
  traceCompute(timing: ExecutionTiming): void {
    const trace = this.trace;
    if (trace === undefined) return;
    trace.activity('COMPUTE_START', timing.computeStartNs);
    trace.activity('COMPUTE_INPUT_END', timing.computeInputEndNs);
    trace.activity('COMPUTE_OUTPUT_START', timing.computeOutputStartNs);
    trace.activity('COMPUTE_END', timing.computeEndNs);
  }

  private traceOutputs(outputs: readonly InferTensor[]): void {
    if (this.trace?.wantsTensors !== true) return;
    for (const output of outputs) this.trace.tensor('TENSOR_BACKEND_OUTPUT', output);
  }

  private traceEnd(): void {
    this.trace?.activity('REQUEST_END', now());
  }

  private recordSuccess(requestEndNs: bigint): void {
    const timing = this.timing as ExecutionTiming;
    this.stats.recordSuccess({
      batchSize: this.batchElements,
      requestStartNs: this.requestStartNs,
      queueStartNs: this.queueStartNs,
      ...timing,
      requestEndNs,
    });
  }

  /** One response in `response_stats`: from the previous one (or execution start) to `sentNs`, then to `deliveredNs`. */
  private recordResponse(outcome: 'success' | 'fail' | 'empty' | 'cancel', sentNs: bigint, deliveredNs = sentNs): void {
    const startNs = this.lastResponseNs ?? this.executeStartNs ?? sentNs;
    this.stats.responses.record(this.responseCount++, outcome, sentNs - startNs, deliveredNs - sentNs);
    this.lastResponseNs = deliveredNs;
  }

  private notifyCancel(): void {
    this.wasCancelled = true;
    const listener = this.cancelListener;
    this.cancelListener = undefined;
    if (listener === undefined) return;
    try {
      listener();
    } catch {
      // A backend's cancel hook must not break result delivery.
    }
  }

  private response(outputs: InferTensor[], parameters: Parameters) {
    const { request } = this.request;
    return { id: request.id, modelName: request.modelName, modelVersion: String(this.modelVersion), parameters, outputs };
  }
}
