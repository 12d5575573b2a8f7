import { describe, expect, it } from 'vitest';
import { fc, fuzz } from '@switchyard/testing/fuzz';
import { distributionCount, distributionMean, distributionQuantile, summarisePoolLoad, type Distribution, type LoadSample } from './observations.js';

const sample = (instanceId: string, o: Partial<LoadSample> = {}): LoadSample => ({
  instanceId,
  ts: 0,
  numRunning: 0,
  numWaiting: 0,
  kvActiveBlocks: 0,
  kvTotalBlocks: 100,
  kvUsage: 0,
  prefixCacheQueries: 0,
  prefixCacheHits: 0,
  ...o,
});

describe('distributions', () => {
  it('samples: nearest-rank percentile, mean, skipping non-finite and negative values', () => {
    const d: Distribution = { kind: 'samples', values: [5, 1, NaN, 3, -2, Infinity, 2, 4] };
    expect(distributionCount(d)).toBe(5);
    expect(distributionMean(d)).toBe(3);
    expect(distributionQuantile(d, 50)).toBe(3);
    expect(distributionQuantile(d, 90)).toBe(5);
    expect(distributionQuantile(d, 0)).toBe(1);
    expect(distributionQuantile(d, 100)).toBe(5);
  });

  it('histogram: linear within the bucket, overflow bucket reports its lower bound', () => {
    const d: Distribution = { kind: 'histogram', bounds: [100, 200, Infinity], counts: [50, 40, 10] };
    expect(distributionCount(d)).toBe(100);
    expect(distributionQuantile(d, 50)).toBe(100);
    expect(distributionQuantile(d, 70)).toBe(150);
    expect(distributionQuantile(d, 95)).toBe(200);
    expect(distributionMean(d)).toBe((50 * 50 + 40 * 150 + 10 * 200) / 100);
  });

  it('empty, missing or unusable: undefined, never NaN', () => {
    for (const d of [undefined, { kind: 'samples', values: [] }, { kind: 'samples', values: [NaN, -1] }, { kind: 'histogram', bounds: [1], counts: [NaN] }] as const) {
      expect(distributionCount(d as Distribution | undefined)).toBe(0);
      expect(distributionMean(d as Distribution | undefined)).toBeUndefined();
      expect(distributionQuantile(d as Distribution | undefined, 90)).toBeUndefined();
    }
  });

  it('property: a quantile lies within the finite samples and grows with p', () => {
    fuzz(fc.tuple(fc.array(fc.double(), { maxLength: 40 }), fc.double({ min: 0, max: 100, noNaN: true }), fc.double({ min: 0, max: 100, noNaN: true })), ([values, a, b]) => {
      const d: Distribution = { kind: 'samples', values };
      const ok = values.filter((x) => Number.isFinite(x) && x >= 0);
      const qa = distributionQuantile(d, Math.min(a, b));
      const qb = distributionQuantile(d, Math.max(a, b));
      if (ok.length === 0) {
        expect(qa).toBeUndefined();
        return;
      }
      expect(qa).toBeGreaterThanOrEqual(Math.min(...ok));
      expect(qb).toBeLessThanOrEqual(Math.max(...ok));
      expect(qb!).toBeGreaterThanOrEqual(qa!);
      const m = distributionMean(d)!;
      expect(Number.isFinite(m)).toBe(true);
    });
  });

  it('property: a histogram quantile is finite and within [0, last finite bound]', () => {
    const arb = fc.array(fc.tuple(fc.double({ min: 0.5, max: 1e6, noNaN: true }), fc.oneof(fc.nat(1000), fc.constantFrom(NaN, -5, Infinity))), { maxLength: 8 });
    fuzz(fc.tuple(arb, fc.double({ min: 0, max: 100, noNaN: true })), ([buckets, p]) => {
      const bounds = [...new Set(buckets.map(([b]) => b))].sort((x, y) => x - y);
      const counts = bounds.map((_, i) => buckets[i]?.[1] ?? 0);
      const d: Distribution = { kind: 'histogram', bounds, counts };
      const q = distributionQuantile(d, p);
      if (q === undefined) return;
      expect(Number.isFinite(q)).toBe(true);
      expect(q).toBeGreaterThanOrEqual(0);
      expect(q).toBeLessThanOrEqual(bounds[bounds.length - 1] ?? 0);
    });
  });
});

describe('summarisePoolLoad', () => {
  it('averages per worker first, then across workers; recomputes usage from blocks', () => {
    const s = summarisePoolLoad([
      sample('a', { kvActiveBlocks: 90, kvUsage: 0.1, numWaiting: 2 }),
      sample('a', { kvActiveBlocks: 70, numWaiting: 0 }),
      sample('b', { kvActiveBlocks: 0, kvTotalBlocks: 0, kvUsage: 0.2, numWaiting: 1, numRunning: 4 }),
    ]);
    expect(s.reporting).toBe(2);
    expect(s.kvUsage).toBeCloseTo((0.8 + 0.2) / 2);
    expect(s.queuePerWorker).toBeCloseTo(1);
    expect(s.runningPerWorker).toBeCloseTo(2);
  });

  it('no samples or garbage fields: undefined figures, no NaN', () => {
    expect(summarisePoolLoad([])).toEqual({ reporting: 0, kvUsage: undefined, queuePerWorker: undefined, runningPerWorker: undefined });
    const s = summarisePoolLoad([sample('x', { kvActiveBlocks: NaN, kvTotalBlocks: NaN, kvUsage: NaN, numWaiting: NaN, numRunning: -1 })]);
    expect(s).toEqual({ reporting: 1, kvUsage: undefined, queuePerWorker: undefined, runningPerWorker: undefined });
  });
});
