import { describe, expect, it } from 'vitest';
import { FigureHistogram, ITL_MS_BOUNDS, TOKEN_BOUNDS, TTFT_MS_BOUNDS, addHistogram, bucketOf, geometricBounds } from './figure-histogram.js';
import { MAX_WIRE_HISTOGRAM_BOUNDS } from './protocols.js';

describe('figure histograms', () => {
  it('the bounds ascend strictly, four per doubling, and fit the wire limit', () => {
    for (const b of [TOKEN_BOUNDS, TTFT_MS_BOUNDS, ITL_MS_BOUNDS]) {
      expect(b.length).toBeLessThanOrEqual(MAX_WIRE_HISTOGRAM_BOUNDS);
      b.forEach((x, i) => expect(i === 0 || x > b[i - 1]!).toBe(true));
      for (let i = 4; i < b.length; i++) expect(b[i]! / b[i - 4]!).toBeCloseTo(2, 1);
    }
    expect(TOKEN_BOUNDS[0]).toBe(16);
    expect(TOKEN_BOUNDS.at(-1)).toBeGreaterThanOrEqual(2 ** 20);
    expect(geometricBounds(1, 4, 1)).toEqual([1, 2, 4]);
    expect(() => geometricBounds(0, 4, 1)).toThrow(RangeError);
  });

  it('bucketOf: the first bound at or above the value, else the overflow bucket', () => {
    const b = [1, 2, 4];
    expect([0, 1, 1.5, 2, 3, 4, 5].map((v) => bucketOf(b, v))).toEqual([0, 0, 1, 1, 2, 2, 3]);
  });

  it('observe ignores non-finite and negative values and counts; reset empties', () => {
    const h = new FigureHistogram([1, 2]);
    h.observe(1.5, 3);
    h.observe(Number.NaN);
    h.observe(-1);
    h.observe(Number.POSITIVE_INFINITY);
    h.observe(1, 0);
    h.observe(1, 0.5);
    h.observe(9);
    expect(h.toWire()).toEqual({ bounds: [1, 2], counts: [0, 3, 1] });
    expect(h.count).toBe(4);
    h.reset();
    expect(h.toWire().counts).toEqual([0, 0, 0]);
  });

  it('addHistogram: same bounds add bucket by bucket; other bounds go whole to the bucket of their upper bound', () => {
    const into = { bounds: [10, 20, 40], counts: [0, 0, 0, 0] };
    addHistogram(into, { bounds: [10, 20, 40], counts: [1, 2, 3, 4] });
    expect(into.counts).toEqual([1, 2, 3, 4]);
    // 15 → (10, 20]; 30 → (20, 40]; the overflow above 30 → the bucket holding 30, (20, 40]
    addHistogram(into, { bounds: [15, 30], counts: [5, 6, 7] });
    expect(into.counts).toEqual([1, 7, 16, 4]);
    // an overflow above exactly a bound of `into` goes to the next bucket
    addHistogram(into, { bounds: [40], counts: [0, 2] });
    expect(into.counts).toEqual([1, 7, 16, 6]);
    // garbage counts are skipped
    addHistogram(into, { bounds: [10, 20, 40], counts: [Number.NaN, -1, Number.POSITIVE_INFINITY, 0] });
    expect(into.counts).toEqual([1, 7, 16, 6]);
  });
});
