import { describe, expect, it } from 'vitest';
import { fc, fuzz, parsesOrRefuses } from '@switchyard/testing/fuzz';
import { SwitchyardError } from '@switchyard/common';
import { createPredictor, type PredictorConfig } from './predictors.js';

const CONFIGS: PredictorConfig[] = [
  { kind: 'constant' },
  { kind: 'moving-average', window: 3 },
  { kind: 'holt', alpha: 0.5, beta: 0.3 },
];

describe('predictors', () => {
  it('predict 0 before any observation, and 0 for zero traffic', () => {
    for (const c of CONFIGS) {
      const p = createPredictor(c);
      expect(p.predict()).toBe(0);
      for (let i = 0; i < 5; i++) p.observe(0);
      expect(p.predict(3)).toBe(0);
    }
  });

  it('constant: the last finite value', () => {
    const p = createPredictor({ kind: 'constant' });
    p.observe(4);
    p.observe(NaN);
    expect(p.predict()).toBe(4);
    p.observe(7);
    expect(p.predict(10)).toBe(7);
  });

  it('moving average over the last N', () => {
    const p = createPredictor({ kind: 'moving-average', window: 3 });
    for (const x of [100, 1, 2, 3]) p.observe(x);
    expect(p.predict()).toBe(2);
  });

  it('holt follows a linear trend and extrapolates it', () => {
    const p = createPredictor({ kind: 'holt', alpha: 0.8, beta: 0.8 });
    for (let i = 0; i < 50; i++) p.observe(10 + 2 * i);
    expect(p.predict(1)).toBeCloseTo(10 + 2 * 50, 3);
    expect(p.predict(5)).toBeCloseTo(10 + 2 * 54, 3);
  });

  it('holt on a falling series floors at 0 (load never negative)', () => {
    const p = createPredictor({ kind: 'holt', alpha: 0.9, beta: 0.9 });
    for (const x of [100, 60, 20, 0]) p.observe(x);
    expect(p.predict(3)).toBe(0);
  });

  it('resumes from its snapshot exactly', () => {
    for (const c of CONFIGS) {
      const a = createPredictor(c);
      for (const x of [3, 5, 8]) a.observe(x);
      const b = createPredictor(c, JSON.parse(JSON.stringify(a.snapshot())));
      a.observe(13);
      b.observe(13);
      expect(b.predict(2)).toBe(a.predict(2));
    }
  });

  it('a snapshot of another kind starts fresh', () => {
    const a = createPredictor({ kind: 'constant' });
    a.observe(9);
    expect(createPredictor({ kind: 'moving-average', window: 2 }, a.snapshot()).predict()).toBe(0);
  });

  it('refuses bad configs naming the field', () => {
    for (const c of [
      { kind: 'moving-average', window: 0 },
      { kind: 'moving-average', window: 1.5 },
      { kind: 'holt', alpha: 0, beta: 0.5 },
      { kind: 'holt', alpha: 0.5, beta: NaN },
      { kind: 'arima' },
    ] as unknown as PredictorConfig[]) {
      const r = parsesOrRefuses(() => createPredictor(c));
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.message).toMatch(/predictor\.(window|alpha|beta|kind)/);
    }
    expect(() => createPredictor({ kind: 'holt', alpha: 2, beta: 0.1 })).toThrow(SwitchyardError);
  });

  it('property: any series of numbers gives finite, non-negative predictions', () => {
    const anyNumber = fc.oneof(fc.double(), fc.constantFrom(NaN, Infinity, -Infinity, Number.MAX_VALUE, -Number.MAX_VALUE));
    fuzz(fc.tuple(fc.constantFrom(...CONFIGS), fc.array(anyNumber, { maxLength: 30 }), fc.integer({ min: -3, max: 50 })), ([c, xs, steps]) => {
      const p = createPredictor(c);
      for (const x of xs) p.observe(x);
      const y = p.predict(steps);
      expect(Number.isFinite(y)).toBe(true);
      expect(y).toBeGreaterThanOrEqual(0);
    });
  });

  it('property: a constant series is predicted as itself', () => {
    fuzz(fc.tuple(fc.constantFrom(...CONFIGS), fc.double({ min: 0, max: 1e9, noNaN: true }), fc.integer({ min: 1, max: 20 })), ([c, x, n]) => {
      const p = createPredictor(c);
      for (let i = 0; i < n; i++) p.observe(x);
      expect(p.predict(4)).toBeCloseTo(x, 6);
    });
  });
});
