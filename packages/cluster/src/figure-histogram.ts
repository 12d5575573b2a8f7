/**
 * Fixed-bound histograms for the figures routers publish to planners (`WireRequestFigures`): the bounds
 * are chosen once, so a histogram's size never depends on the traffic, and histograms of several
 * routers merge by adding counts. Pure: no clock, no IO.
 *
 * The bounds are geometric, four per doubling (each bucket ~19 % wider than the one before): a
 * quantile read by linear interpolation inside a bucket is then within a few per cent of the true
 * value wherever it falls, from a 16-token prompt to a million-token one, which a planner sizing from
 * the p90 of prompt lengths needs (Prometheus' default buckets, spaced 2.5×, are far coarser).
 */
import type { WireHistogram } from './protocols.js';

/** Ascending bounds from `first` to at least `last`, `perDoubling` per doubling, rounded to 3 significant digits. */
export function geometricBounds(first: number, last: number, perDoubling: number): number[] {
  if (!(first > 0) || !(last >= first) || !Number.isSafeInteger(perDoubling) || perDoubling < 1) throw new RangeError('geometricBounds: 0 < first <= last, perDoubling an integer >= 1');
  const out: number[] = [];
  for (let i = 0; ; i++) {
    const b = Number((first * 2 ** (i / perDoubling)).toPrecision(3));
    if (out.length === 0 || b > out[out.length - 1]!) out.push(b);
    if (b >= last) return out;
  }
}

/** Prompt and output lengths, tokens: 16 .. ~1M. */
export const TOKEN_BOUNDS: readonly number[] = geometricBounds(16, 2 ** 20, 4);
/** Time to first token, ms: 4 ms .. ~17 min. */
export const TTFT_MS_BOUNDS: readonly number[] = geometricBounds(4, 2 ** 20, 4);
/** Inter-token latency, ms: 0.25 ms .. ~16 s. */
export const ITL_MS_BOUNDS: readonly number[] = geometricBounds(0.25, 2 ** 14, 4);

/** A histogram with fixed bounds: `observe` adds to a bucket; nothing else grows. Single event loop, no locking. */
export class FigureHistogram {
  private counts: number[];
  private total = 0;

  constructor(readonly bounds: readonly number[]) {
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }

  /** Counts `value` `count` times; non-finite or negative values and counts are ignored. */
  observe(value: number, count = 1): void {
    if (!Number.isFinite(value) || value < 0 || !Number.isSafeInteger(count) || count <= 0) return;
    this.counts[bucketOf(this.bounds, value)]! += count;
    this.total += count;
  }

  /** Observations since the last reset. */
  get count(): number {
    return this.total;
  }

  toWire(): WireHistogram {
    return { bounds: this.bounds, counts: [...this.counts] };
  }

  reset(): void {
    this.counts.fill(0);
    this.total = 0;
  }
}

/** The bucket of `value`: the first bound at or above it, else the overflow bucket (bounds.length). Binary search. */
export function bucketOf(bounds: readonly number[], value: number): number {
  let lo = 0;
  let hi = bounds.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (bounds[mid]! >= value) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * Adds `from`'s counts into `into` (which must have one count more than bounds). Same bounds: bucket by
 * bucket. Other bounds (a router of another version): each of `from`'s buckets goes whole into the
 * bucket of `into` holding its upper bound, so a merged quantile is over- rather than under-estimated
 * (an overflow bucket, whose values are only known to lie above its lower bound, goes to the bucket
 * just above that bound). Counts that are not finite positive numbers are skipped.
 */
export function addHistogram(into: { readonly bounds: readonly number[]; readonly counts: number[] }, from: WireHistogram): void {
  const same = from.bounds.length === into.bounds.length && from.bounds.every((b, i) => b === into.bounds[i]);
  for (let i = 0; i < from.counts.length; i++) {
    const c = from.counts[i]!;
    if (!Number.isFinite(c) || c <= 0) continue;
    let target: number;
    if (same) target = i;
    else if (i < from.bounds.length) target = bucketOf(into.bounds, from.bounds[i]!);
    else {
      const lower = from.bounds[from.bounds.length - 1] ?? 0;
      target = bucketOf(into.bounds, lower);
      // values above `lower`: the bucket whose bound equals `lower` cannot hold them
      if (target < into.bounds.length && into.bounds[target] === lower) target++;
    }
    if (target < into.counts.length) into.counts[target]! += c;
  }
}
