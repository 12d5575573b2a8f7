import { describe, expect, it } from 'vitest';
import { eachNodeReplaced, fc, fuzz, nestedText, parsesOrRefuses, type JsonValue } from '@switchyard/testing/fuzz';
import { decodeItlMs, interpolate1d, interpolate2d, parseProfile, prefillThroughput, prefillTtftMs } from './profile.js';

const PROFILE_JSON = {
  version: 1,
  prefill: { isl: [128, 1024, 4096], ttftMs: [20, 80, 400], throughputTokensPerSec: [8000, 12000, 10000] },
  decode: {
    kvUsage: [0.1, 0.5, 0.9],
    contextLength: [256, 4096],
    itlMs: [
      [10, 12],
      [20, 30],
      [40, 60],
    ],
    kvCapacityTokens: 100_000,
  },
};

describe('parseProfile', () => {
  it('accepts a valid profile', () => {
    const p = parseProfile(PROFILE_JSON);
    expect(p.prefill!.isl).toEqual([128, 1024, 4096]);
    expect(p.decode!.kvCapacityTokens).toBe(100_000);
    expect(parseProfile({ version: 1, prefill: PROFILE_JSON.prefill }).decode).toBeUndefined();
  });

  const bad: [string, (j: any) => void, RegExp][] = [
    ['unsorted isl', (j) => (j.prefill.isl = [1024, 128, 4096]), /profile\.prefill\.isl must be strictly ascending/],
    ['duplicate context', (j) => (j.decode.contextLength = [256, 256]), /profile\.decode\.contextLength must be strictly ascending/],
    ['NaN ttft', (j) => (j.prefill.ttftMs[1] = NaN), /profile\.prefill\.ttftMs\[1\]/],
    ['zero throughput', (j) => (j.prefill.throughputTokensPerSec[0] = 0), /profile\.prefill\.throughputTokensPerSec\[0\]/],
    ['string value', (j) => (j.decode.itlMs[2][1] = '60'), /profile\.decode\.itlMs\[2\]\[1\]/],
    ['usage above 1', (j) => (j.decode.kvUsage[2] = 1.5), /profile\.decode\.kvUsage\[2\]/],
    ['absurd latency', (j) => (j.decode.itlMs[0][0] = 1e12), /profile\.decode\.itlMs\[0\]\[0\]/],
    ['ragged grid', (j) => j.decode.itlMs[1].pop(), /profile\.decode\.itlMs\[1\] must have one entry per contextLength/],
    ['missing rows', (j) => j.decode.itlMs.pop(), /profile\.decode\.itlMs must have one entry per kvUsage/],
    ['length mismatch', (j) => j.prefill.ttftMs.pop(), /profile\.prefill\.ttftMs must have one entry/],
    ['no capacity', (j) => delete j.decode.kvCapacityTokens, /profile\.decode\.kvCapacityTokens/],
    ['wrong version', (j) => (j.version = 2), /profile\.version/],
    ['empty axis', (j) => (j.prefill.isl = []), /profile\.prefill\.isl must be an array/],
    ['neither table', (j) => (delete j.prefill, delete j.decode), /prefill or decode/],
  ];
  for (const [name, mutate, message] of bad) {
    it(`refuses ${name}, naming the field`, () => {
      const j = structuredClone(PROFILE_JSON) as any;
      mutate(j);
      const r = parsesOrRefuses(() => parseProfile(j));
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.error.message).toMatch(message);
    });
  }

  it('refuses inherited (prototype) fields', () => {
    const j = Object.create({ version: 1, prefill: PROFILE_JSON.prefill });
    expect(parsesOrRefuses(() => parseProfile(j)).ok).toBe(false);
  });

  it('every node replaced by a hostile value parses or is refused', () => {
    // Each of these is wrong wherever it lands (-0 is not: it is a valid KV usage).
    for (const replacement of ['null', '"1"', '-1', '1e400', '[]', '{}', '{"__proto__":{"version":1}}', nestedText(1000)]) {
      for (const { path, text } of eachNodeReplaced(PROFILE_JSON as unknown as JsonValue, replacement)) {
        expect(parsesOrRefuses(() => parseProfile(JSON.parse(text))).ok, `${path} = ${replacement.slice(0, 30)}`).toBe(false);
      }
    }
    for (const { text } of eachNodeReplaced(PROFILE_JSON as unknown as JsonValue, '-0')) parsesOrRefuses(() => parseProfile(JSON.parse(text)));
  });
});

describe('interpolation', () => {
  const p = parseProfile(PROFILE_JSON);
  it('1-D: exact at points, linear between, clamped outside', () => {
    expect(prefillTtftMs(p.prefill!, 1024)).toBe(80);
    expect(prefillTtftMs(p.prefill!, 576)).toBe(50);
    expect(prefillTtftMs(p.prefill!, 1)).toBe(20);
    expect(prefillTtftMs(p.prefill!, 1e9)).toBe(400);
    expect(prefillThroughput(p.prefill!, NaN)).toBe(8000);
    expect(interpolate1d([5], [7], 100)).toBe(7);
  });

  it('2-D: bilinear inside, clamped on each axis', () => {
    expect(decodeItlMs(p.decode!, 0.5, 256)).toBe(20);
    expect(decodeItlMs(p.decode!, 0.3, 256)).toBeCloseTo(15, 9);
    expect(decodeItlMs(p.decode!, 0.3, 2176)).toBeCloseTo((10 + 12) / 2 / 2 + (20 + 30) / 2 / 2);
    expect(decodeItlMs(p.decode!, 0, 0)).toBe(10);
    expect(decodeItlMs(p.decode!, 1, 1e9)).toBe(60);
  });

  it('property: interpolation stays within the range of the table', () => {
    const axis = fc.uniqueArray(fc.double({ min: 0, max: 1e6, noNaN: true }), { minLength: 1, maxLength: 6 }).map((a) => a.sort((x, y) => x - y));
    const arb = fc.tuple(axis, axis, fc.double(), fc.double()).chain(([xs, ys, x, y]) =>
      fc.tuple(fc.constant(xs), fc.constant(ys), fc.array(fc.array(fc.double({ min: 0, max: 1e6, noNaN: true }), { minLength: ys.length, maxLength: ys.length }), { minLength: xs.length, maxLength: xs.length }), fc.constant(x), fc.constant(y)),
    );
    fuzz(arb, ([xs, ys, grid, x, y]) => {
      const flat = grid.flat();
      const v = interpolate2d(xs, ys, grid, x, y);
      expect(v).toBeGreaterThanOrEqual(Math.min(...flat) - 1e-6);
      expect(v).toBeLessThanOrEqual(Math.max(...flat) + 1e-6);
      const w = interpolate1d(xs, grid.map((r) => r[0]!), x);
      expect(Number.isFinite(w)).toBe(true);
    });
  });
});
