/**
 * `LogHistogram`: latencies in log-spaced buckets (1 % wide from 0.01 ms up to 1e8 ms, one
 * underflow and one overflow bucket), so percentiles of millions of samples cost a fixed ~2 300
 * counters. A percentile reports its bucket's upper bound: at most 1 % above the true value.
 */
const MIN_MS = 0.01;
const MAX_MS = 1e8;
const GROWTH = 1.01;
const LOG_GROWTH = Math.log(GROWTH);
const BUCKETS = Math.ceil(Math.log(MAX_MS / MIN_MS) / LOG_GROWTH) + 2;

export class LogHistogram {
  private readonly counts = new Float64Array(BUCKETS);
  count = 0;
  private sum = 0;

  /** Record one value (non-finite and negative values are ignored). */
  add(ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) return;
    this.counts[bucketOf(ms)]! += 1;
    this.count++;
    this.sum += ms;
  }

  mean(): number | undefined {
    return this.count === 0 ? undefined : this.sum / this.count;
  }

  /** The p-th percentile (0..100), nearest rank, as its bucket's upper bound; undefined when empty. */
  quantile(p: number): number | undefined {
    if (this.count === 0) return undefined;
    const rank = Math.max(1, Math.ceil((Math.min(100, Math.max(0, p)) / 100) * this.count));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return upperBound(i);
    }
    return upperBound(BUCKETS - 1);
  }
}

function bucketOf(ms: number): number {
  if (ms <= MIN_MS) return 0;
  return Math.min(BUCKETS - 1, 1 + Math.floor(Math.log(ms / MIN_MS) / LOG_GROWTH));
}

function upperBound(i: number): number {
  if (i === 0) return MIN_MS;
  if (i === BUCKETS - 1) return Infinity;
  return MIN_MS * GROWTH ** i;
}
