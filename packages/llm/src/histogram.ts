// A cumulative Prometheus-style histogram: fixed upper bounds, observations only ever added. The engine
// records into it; the metrics door reads `snapshot()` at scrape time (nothing is reset).

import type { HistogramSnapshot } from './llm-endpoint.js';

/** vLLM's `vllm:time_to_first_token_seconds` buckets, with finer ones below 10 ms for CPU-sized models. */
export const TTFT_BUCKETS_S: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
];
/** vLLM's `vllm:inter_token_latency_seconds` buckets, with finer ones below 10 ms. */
export const ITL_BUCKETS_S: readonly number[] = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
];
/** vLLM's `vllm:e2e_request_latency_seconds` buckets, with finer ones below 0.3 s. */
export const E2E_BUCKETS_S: readonly number[] = [
  0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680,
];

export class Histogram {
  private readonly bucketCounts: number[];
  private sum = 0;
  private count = 0;

  /** `bounds` strictly increasing; +Inf is implicit. */
  constructor(readonly bounds: readonly number[]) {
    this.bucketCounts = new Array<number>(bounds.length).fill(0);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    // Non-cumulative per bucket here; snapshot() accumulates.
    for (let i = 0; i < this.bounds.length; i++) {
      if (value <= this.bounds[i]!) {
        this.bucketCounts[i]!++;
        return;
      }
    }
  }

  snapshot(): HistogramSnapshot {
    const counts: number[] = [];
    let acc = 0;
    for (const c of this.bucketCounts) counts.push((acc += c));
    return { bounds: this.bounds, counts, sum: this.sum, count: this.count };
  }
}
