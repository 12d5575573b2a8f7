import { describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { parseRateShape, rateAt, SyntheticTraceSource, type SyntheticOptions } from './synthetic.js';
import type { TraceRequest } from './trace.js';

const base: SyntheticOptions = {
  shape: { kind: 'constant', rate: 5 },
  durationSec: 600,
  seed: 7,
  blockSize: 16,
  islMean: 200,
  oslMean: 20,
  islSpread: 0.5,
  oslSpread: 0.5,
  islMax: 1000,
  oslMax: 100,
  prefixGroups: 4,
  prefixBlocks: 3,
};
function drain(o: SyntheticOptions): TraceRequest[] {
  const src = new SyntheticTraceSource(o);
  const out: TraceRequest[] = [];
  for (let r = src.next(); r !== undefined; r = src.next()) out.push(r);
  return out;
}

describe('parseRateShape', () => {
  it('parses the three shapes', () => {
    expect(parseRateShape('constant:rate=2.5')).toEqual({ kind: 'constant', rate: 2.5 });
    expect(parseRateShape('sin:min=1,max=4,period=86400')).toEqual({ kind: 'sin', min: 1, max: 4, periodSec: 86400, phase: 0 });
    expect(parseRateShape('burst:base=1,peak=9,every=600,length=60')).toEqual({ kind: 'burst', base: 1, peak: 9, everySec: 600, lengthSec: 60 });
  });

  it.each([
    ['poisson:rate=1', 'constant, sin or burst'],
    ['constant', "'rate' is required"],
    ['constant:rate=-1', "'rate' must be in"],
    ['constant:rate=0', 'rate is 0 everywhere'],
    ['constant:rate=abc', 'not key=number'],
    ['constant:rate=1,rate=2', 'given twice'],
    ['constant:rate=1,period=3', "unknown parameter 'period'"],
    ['sin:min=4,max=1,period=10', "'max' must be in [4"],
    ['sin:min=1,max=4,period=0', "'period'"],
    ['burst:base=1,peak=2,every=10,length=11', "'length' must be in [0, 10]"],
    ['constant:rate=1e9', "'rate' must be in"],
  ])('refuses %s', (spec, fragment) => {
    let message = '';
    try {
      parseRateShape(spec);
    } catch (err) {
      expect((err as SwitchyardError).code).toBe('invalid_argument');
      message = (err as Error).message;
    }
    expect(message).toContain(fragment);
  });
});

describe('rateAt', () => {
  it('a sinusoid starts at its trough and peaks at half its period', () => {
    const s = parseRateShape('sin:min=1,max=5,period=100');
    expect(rateAt(s, 0)).toBeCloseTo(1);
    expect(rateAt(s, 50)).toBeCloseTo(5);
    expect(rateAt(s, 25)).toBeCloseTo(3);
    expect(rateAt(s, 100)).toBeCloseTo(1);
  });

  it('bursts repeat', () => {
    const s = parseRateShape('burst:base=1,peak=9,every=100,length=10');
    expect([rateAt(s, 5), rateAt(s, 50), rateAt(s, 105), rateAt(s, 110)]).toEqual([9, 1, 9, 1]);
  });
});

describe('SyntheticTraceSource', () => {
  it('is deterministic per seed', () => {
    const a = drain(base);
    expect(drain(base)).toEqual(a);
    expect(drain({ ...base, seed: 8 })).not.toEqual(a);
  });

  it('a constant rate gives about rate × duration arrivals, sorted, inside the duration', () => {
    const r = drain(base);
    expect(r.length).toBeGreaterThan(3000 * 0.93);
    expect(r.length).toBeLessThan(3000 * 1.07);
    for (let i = 1; i < r.length; i++) expect(r[i]!.arrivalMs).toBeGreaterThanOrEqual(r[i - 1]!.arrivalMs);
    expect(r.at(-1)!.arrivalMs).toBeLessThan(600_000);
  });

  it('a sinusoid puts its arrivals where its rate is', () => {
    const r = drain({ ...base, shape: parseRateShape('sin:min=0,max=10,period=600') });
    const firstTenth = r.filter((x) => x.arrivalMs < 60_000).length;
    const middleTenth = r.filter((x) => x.arrivalMs >= 270_000 && x.arrivalMs < 330_000).length;
    expect(r.length).toBeGreaterThan(3000 * 0.9);
    expect(r.length).toBeLessThan(3000 * 1.1);
    expect(middleTenth).toBeGreaterThan(5 * firstTenth);
  });

  it('lengths stay in bounds, average near the mean, and hash ids cover the prompt with a shared prefix', () => {
    const r = drain(base);
    let isl = 0;
    for (const x of r) {
      expect(x.inputLength).toBeGreaterThanOrEqual(1);
      expect(x.inputLength).toBeLessThanOrEqual(1000);
      expect(x.outputLength).toBeLessThanOrEqual(100);
      expect(x.hashIds).toHaveLength(Math.ceil(x.inputLength / 16));
      isl += x.inputLength;
      if (x.inputLength >= 48) expect(x.hashIds[0]! % 3).toBe(0);
    }
    expect(isl / r.length).toBeGreaterThan(180);
    expect(isl / r.length).toBeLessThan(220);
    const groups = new Set(r.filter((x) => x.inputLength >= 48).map((x) => x.hashIds.slice(0, 3).join()));
    expect(groups.size).toBe(4);
    // own blocks are never shared
    const own = r.flatMap((x) => x.hashIds.slice(3));
    expect(new Set(own).size).toBe(own.length);
  });

  it('spread 0 gives every request the mean', () => {
    const r = drain({ ...base, islSpread: 0, oslSpread: 0, durationSec: 10 });
    expect(new Set(r.map((x) => `${x.inputLength}/${x.outputLength}`))).toEqual(new Set(['200/20']));
  });

  it('refuses bad options', () => {
    expect(() => new SyntheticTraceSource({ ...base, durationSec: 0 })).toThrow(/duration/);
    expect(() => new SyntheticTraceSource({ ...base, islMean: 5000 })).toThrow(/isl mean/);
    expect(() => new SyntheticTraceSource({ ...base, oslSpread: Number.NaN })).toThrow(/osl spread/);
    expect(() => new SyntheticTraceSource({ ...base, prefixGroups: -1 })).toThrow(/prefix groups/);
    expect(() => new SyntheticTraceSource({ ...base, shape: parseRateShape('constant:rate=100000'), durationSec: 86400 })).toThrow(/at most 10000000/);
  });
});
