import { describe, expect, it } from 'vitest';
import { fc, fuzz } from '@switchyard/testing/fuzz';
import { parseProfile } from './profile.js';
import { correctionFactor, DEFAULT_SLA_TARGETS, sizePool, type PredictedDemand } from './sla-sizing.js';

const profile = parseProfile({
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
});
const targets = DEFAULT_SLA_TARGETS; // TTFT 500 ms, ITL 50 ms, p90
const none = { prefill: 1, decode: 1 };
const demand = (o: Partial<PredictedDemand>): PredictedDemand => ({ requestRate: 0, islMean: 0, oslMean: 0, islAtPercentile: 0, oslAtPercentile: 0, ...o });

describe('sizePool', () => {
  it('prefill: capacity at the p90 ISL, not the mean (3 replicas where a mean-based sizing says 2)', () => {
    const d = demand({ requestRate: 22, islMean: 1000, islAtPercentile: 4096 });
    const s = sizePool('prefill', profile, d, targets, none)!;
    expect(s.inputs.prefillTokensPerSec).toBe(22_000);
    expect(s.inputs.prefillCapacityPerWorker).toBe(10_000);
    expect(s.replicas).toBe(3);
    expect(s.inputs.ttftAtPercentileMs).toBe(400);
    expect(s.inputs.ttftUnattainable).toBe(0);
    // The same demand sized at its mean ISL: 22000 / ~11893 → 2.
    expect(sizePool('prefill', profile, { ...d, islAtPercentile: 1000 }, targets, none)!.replicas).toBe(2);
  });

  it('prefill: a slower-than-profiled worker (correction 2) needs more, and its p90 TTFT misses the SLO', () => {
    const s = sizePool('prefill', profile, demand({ requestRate: 22, islMean: 1000, islAtPercentile: 4096 }), targets, { prefill: 2, decode: 1 })!;
    expect(s.replicas).toBe(5);
    expect(s.inputs.ttftAtPercentileMs).toBe(800);
    expect(s.inputs.ttftUnattainable).toBe(1);
  });

  it('decode: runs at the highest KV usage meeting the ITL target at the p90 context', () => {
    // p90 context = 3072 + 2048 / 2 = 4096; ITL there is 30 ms at 0.5 and 60 ms at 0.9 → 50 ms at 0.7667.
    const s = sizePool('decode', profile, demand({ requestRate: 2, oslMean: 500, islAtPercentile: 3072, oslAtPercentile: 2048 }), targets, none)!;
    expect(s.inputs.decodeContextAtPercentile).toBe(4096);
    expect(s.inputs.decodeKvUsageTarget).toBeGreaterThan(0.7667 - 0.004);
    expect(s.inputs.decodeKvUsageTarget).toBeLessThanOrEqual(0.7667);
    // ≈ 18.7 sequences × 20 tokens/s ≈ 374 tokens/s per worker; 1000 tokens/s → 3.
    expect(s.inputs.decodeCapacityPerWorker).toBeGreaterThan(370);
    expect(s.inputs.decodeCapacityPerWorker).toBeLessThan(380);
    expect(s.replicas).toBe(3);
    expect(s.inputs.itlUnattainable).toBe(0);
  });

  it('decode: an unattainable ITL uses the lowest profiled usage and says so', () => {
    const s = sizePool('decode', profile, demand({ requestRate: 2, oslMean: 500, islAtPercentile: 3072, oslAtPercentile: 2048 }), { ...targets, itlMs: 5 }, none)!;
    expect(s.inputs.itlUnattainable).toBe(1);
    expect(s.inputs.decodeKvUsageTarget).toBe(0.1);
  });

  it('aggregated: prefill and decode fractions add up on the same workers', () => {
    const d = demand({ requestRate: 22, islMean: 1000, islAtPercentile: 4096, oslMean: 10, oslAtPercentile: 10 });
    const p = sizePool('prefill', profile, d, targets, none)!;
    const dec = sizePool('decode', profile, d, targets, none)!;
    const agg = sizePool('aggregated', profile, d, targets, none)!;
    expect(agg.inputs.replicasNeeded).toBeCloseTo(p.inputs.replicasNeeded! + dec.inputs.replicasNeeded!, 9);
    expect(agg.replicas).toBe(Math.ceil(agg.inputs.replicasNeeded!));
  });

  it('zero demand needs zero replicas; a profile without the pool\'s figures cannot size it', () => {
    expect(sizePool('decode', profile, demand({}), targets, none)!.replicas).toBe(0);
    expect(sizePool('aggregated', profile, demand({}), targets, none)!.replicas).toBe(0);
    const prefillOnly = parseProfile({ version: 1, prefill: { isl: [1], ttftMs: [1], throughputTokensPerSec: [1] } });
    expect(sizePool('decode', prefillOnly, demand({}), targets, none)).toBeUndefined();
    expect(sizePool('aggregated', prefillOnly, demand({}), targets, none)).toBeUndefined();
    expect(sizePool('prefill', prefillOnly, demand({}), targets, none)!.replicas).toBe(0);
  });

  it('property: replicas are a non-negative integer that never falls as the request rate rises', () => {
    const n = fc.double({ min: 0, max: 1e5, noNaN: true });
    fuzz(fc.tuple(fc.constantFrom('prefill', 'decode', 'aggregated' as const), n, n, n, n, n, fc.double({ min: 0, max: 1e4, noNaN: true })), ([pool, rate, im, om, ip, op, more]) => {
      const d = demand({ requestRate: rate, islMean: im, oslMean: om, islAtPercentile: ip, oslAtPercentile: op });
      const a = sizePool(pool, profile, d, targets, none)!;
      const b = sizePool(pool, profile, { ...d, requestRate: rate + more }, targets, none)!;
      expect(Number.isSafeInteger(a.replicas) && a.replicas >= 0).toBe(true);
      expect(b.replicas).toBeGreaterThanOrEqual(a.replicas);
      for (const v of Object.values(a.inputs)) expect(Number.isFinite(v)).toBe(true);
    });
  });
});

describe('correctionFactor', () => {
  it('observed / expected, clamped; no data is 1', () => {
    expect(correctionFactor(150, 100)).toBe(1.5);
    expect(correctionFactor(1000, 100)).toBe(4);
    expect(correctionFactor(1, 100)).toBe(0.25);
    expect(correctionFactor(undefined, 100)).toBe(1);
    expect(correctionFactor(100, 0)).toBe(1);
    expect(correctionFactor(NaN, 100)).toBe(1);
    expect(correctionFactor(300, 100, 0.5, 2)).toBe(2);
  });
});
