/**
 * Per model-version statistics, with Triton's counting rules (statistics extension + the
 * counters behind `nv_inference_*`):
 * - success: count of successful requests, ns from arrival to response.
 * - fail: count of failed requests (validation, backend, cancelled, rejected), ns likewise.
 * - queue: successful requests only, ns from enqueue to compute start.
 * - compute_input / compute_infer / compute_output: successful requests only, the durations of
 *   the execution each request was part of.
 * - inference_count: batch elements of successful requests (a batch-8 request counts 8).
 * - execution_count and batch_stats: one per backend execution, keyed by its total batch size.
 * - cache_hit / cache_miss: response-cache lookups (see response-cache.ts); a hit is a success
 *   with request and queue time only, excluded from inference_count, executions and compute.
 * Durations are nanoseconds; `last_inference` is ms since the epoch.
 *
 * Single-threaded: recorded from the event loop only, read at scrape/stats time.
 */
import type { FailureReason, InferBatchStatistics, ModelStatistics, StatisticDuration } from './types.js';
import { ResponseStatsCollector } from './response-statistics.js';

export interface SuccessTimes {
  /** Batch elements the request carried (at least 1). */
  batchSize: number;
  requestStartNs: bigint;
  queueStartNs: bigint;
  computeStartNs: bigint;
  computeInputEndNs: bigint;
  computeOutputStartNs: bigint;
  computeEndNs: bigint;
  requestEndNs: bigint;
}

/** Monotonic timestamps of a request answered from the response cache. */
export interface CacheHitTimes {
  requestStartNs: bigint;
  queueStartNs: bigint;
  lookupStartNs: bigint;
  lookupEndNs: bigint;
  requestEndNs: bigint;
}

interface Duration {
  count: number;
  ns: number;
}

const zero = (): Duration => ({ count: 0, ns: 0 });
const add = (d: Duration, ns: bigint, count = 1): void => {
  d.count += count;
  d.ns += Number(ns > 0n ? ns : 0n);
};
const copy = (d: Duration): StatisticDuration => ({ count: d.count, ns: d.ns });

interface BatchBucket {
  computeInput: Duration;
  computeInfer: Duration;
  computeOutput: Duration;
}

export class ModelStatsCollector {
  private lastInferenceMs = 0;
  private inferenceCount = 0;
  private executionCount = 0;
  private readonly success = zero();
  private readonly fail = zero();
  private readonly queue = zero();
  private readonly computeInput = zero();
  private readonly computeInfer = zero();
  private readonly computeOutput = zero();
  private readonly cacheHit = zero();
  private readonly cacheMiss = zero();
  private readonly batches = new Map<number, BatchBucket>();
  private readonly failures: Record<FailureReason, number> = { REJECTED: 0, CANCELED: 0, BACKEND: 0, OTHER: 0 };
  /** Per-response statistics of sender-answered requests (decoupled / JavaScript models). */
  readonly responses = new ResponseStatsCollector();

  constructor(
    readonly modelName: string,
    readonly version: number,
  ) {}

  recordSuccess(t: SuccessTimes): void {
    this.lastInferenceMs = Date.now();
    this.inferenceCount += Math.max(1, t.batchSize);
    add(this.success, t.requestEndNs - t.requestStartNs);
    add(this.queue, t.computeStartNs - t.queueStartNs);
    add(this.computeInput, t.computeInputEndNs - t.computeStartNs);
    add(this.computeInfer, t.computeOutputStartNs - t.computeInputEndNs);
    add(this.computeOutput, t.computeEndNs - t.computeOutputStartNs);
  }

  recordFailure(reason: FailureReason, requestStartNs: bigint, requestEndNs: bigint): void {
    this.lastInferenceMs = Date.now();
    this.failures[reason] += 1;
    add(this.fail, requestEndNs - requestStartNs);
  }

  /**
   * A request answered from the response cache: a success with its request and queue time, and
   * `cache_hit` with the lookup time. Not an inference or an execution, no compute time, and (as
   * in Triton) no `last_inference` update.
   */
  recordCacheHit(t: CacheHitTimes): void {
    add(this.success, t.requestEndNs - t.requestStartNs);
    add(this.queue, t.lookupStartNs - t.queueStartNs);
    add(this.cacheHit, t.lookupEndNs - t.lookupStartNs);
  }

  /** A cache miss whose execution succeeded: lookup plus insertion time (the success itself is recorded as usual). */
  recordCacheMiss(lookupNs: bigint, insertNs: bigint): void {
    add(this.cacheMiss, lookupNs + insertNs);
  }

  /** One backend execution of `batchSize` total elements. */
  recordExecution(batchSize: number, computeInputNs: bigint, computeInferNs: bigint, computeOutputNs: bigint): void {
    this.executionCount += 1;
    const size = Math.max(1, batchSize);
    let bucket = this.batches.get(size);
    if (bucket === undefined) {
      bucket = { computeInput: zero(), computeInfer: zero(), computeOutput: zero() };
      this.batches.set(size, bucket);
    }
    add(bucket.computeInput, computeInputNs);
    add(bucket.computeInfer, computeInferNs);
    add(bucket.computeOutput, computeOutputNs);
  }

  failureCounts(): Record<FailureReason, number> {
    return { ...this.failures };
  }

  snapshot(): ModelStatistics {
    const batchStats: InferBatchStatistics[] = [...this.batches.entries()]
      .sort(([a], [b]) => a - b)
      .map(([size, b]) => ({
        batch_size: size,
        compute_input: copy(b.computeInput),
        compute_infer: copy(b.computeInfer),
        compute_output: copy(b.computeOutput),
      }));
    return {
      name: this.modelName,
      version: String(this.version),
      last_inference: this.lastInferenceMs,
      inference_count: this.inferenceCount,
      execution_count: this.executionCount,
      inference_stats: {
        success: copy(this.success),
        fail: copy(this.fail),
        queue: copy(this.queue),
        compute_input: copy(this.computeInput),
        compute_infer: copy(this.computeInfer),
        compute_output: copy(this.computeOutput),
        cache_hit: copy(this.cacheHit),
        cache_miss: copy(this.cacheMiss),
      },
      response_stats: this.responses.snapshot(),
      batch_stats: batchStats,
      memory_usage: [],
    };
  }
}
