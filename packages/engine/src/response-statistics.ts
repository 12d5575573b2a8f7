/**
 * Per-response statistics (`response_stats` in the statistics extension), Triton's rules
 * (core `InferenceStatsAggregator::UpdateResponse*`), for requests answered through a response
 * sender (decoupled models, JavaScript models):
 * - keyed by the response's index within its request (`"0"` is every request's first response);
 * - success: compute_infer (from the previous response, or the execution start, to the model
 *   sending it), compute_output (from then until it was handed to the client), success (both);
 * - fail: an error response, counted like success under `fail`;
 * - empty_response: a final flag that carried no response (compute_infer and empty_response);
 * - cancel: the request was cancelled while open (only `cancel`).
 * Single-threaded, like `ModelStatsCollector`, which owns one of these.
 */
import type { StatisticDuration } from './types.js';

export type ResponseOutcome = 'success' | 'fail' | 'empty' | 'cancel';

/** `InferResponseStatistics`, field names as on the wire. */
export interface InferResponseStatistics {
  compute_infer: StatisticDuration;
  compute_output: StatisticDuration;
  success: StatisticDuration;
  fail: StatisticDuration;
  empty_response: StatisticDuration;
  cancel: StatisticDuration;
}

const zero = (): StatisticDuration => ({ count: 0, ns: 0 });
const add = (d: StatisticDuration, ns: bigint): void => {
  d.count += 1;
  d.ns += Number(ns > 0n ? ns : 0n);
};

export class ResponseStatsCollector {
  private readonly byIndex = new Map<number, InferResponseStatistics>();

  /**
   * One response of a request. `computeInferNs`: previous response (or execution start) → sent
   * by the model; `computeOutputNs`: sent → delivered. Cancellations pass their whole duration
   * as `computeInferNs`.
   */
  record(index: number, outcome: ResponseOutcome, computeInferNs: bigint, computeOutputNs: bigint): void {
    let entry = this.byIndex.get(index);
    if (entry === undefined) {
      entry = { compute_infer: zero(), compute_output: zero(), success: zero(), fail: zero(), empty_response: zero(), cancel: zero() };
      this.byIndex.set(index, entry);
    }
    const total = computeInferNs + computeOutputNs;
    switch (outcome) {
      case 'success':
        add(entry.compute_infer, computeInferNs);
        add(entry.compute_output, computeOutputNs);
        add(entry.success, total);
        break;
      case 'fail':
        add(entry.compute_infer, computeInferNs);
        if (computeOutputNs > 0n) add(entry.compute_output, computeOutputNs);
        add(entry.fail, total);
        break;
      case 'empty':
        add(entry.compute_infer, total);
        add(entry.empty_response, total);
        break;
      case 'cancel':
        add(entry.cancel, total);
        break;
    }
  }

  /** A copy keyed by the index as a string, indices ascending. */
  snapshot(): Record<string, InferResponseStatistics> {
    const out: Record<string, InferResponseStatistics> = {};
    for (const [index, e] of [...this.byIndex.entries()].sort(([a], [b]) => a - b)) {
      out[String(index)] = {
        compute_infer: { ...e.compute_infer },
        compute_output: { ...e.compute_output },
        success: { ...e.success },
        fail: { ...e.fail },
        empty_response: { ...e.empty_response },
        cancel: { ...e.cancel },
      };
    }
    return out;
  }
}
